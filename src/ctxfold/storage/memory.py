"""MemoryStore: the event log in a dict, for tests and short-lived scripts."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ctxfold.errors import ConflictError, StoreClosedError
from ctxfold.events import MESSAGE, Event
from ctxfold.storage.base import PriorAppend, StoreBase
from ctxfold.storage.checks import EncodedBatch, check_session_id, decode_event
from ctxfold.storage.search import SearchHit, SearchQuery, index_words, stored_text

_Row = tuple[str, str, float]
"""One stored event: its type, its data as JSON text (as the SQL stores keep it), and its time.
A plain tuple, made in C: one is made per appended event, where a NamedTuple's `__new__` or a
dataclass's `__init__` is a Python call."""


@dataclass
class _Log:
    rows: list[_Row] = field(default_factory=list)
    keys: dict[str, PriorAppend] = field(default_factory=dict)
    words: list[str | None] = field(default_factory=list)
    """The search words of each row (`index_words`; None for other event types), filled by the
    first search that needs them, as the SQL stores fill their indexes."""


class MemoryStore(StoreBase):
    """A store held in memory; everything is gone when the process ends.

    It keeps the JSON text of each event, as the SQL stores do, so the data a caller reads back is a
    fresh copy that behaves exactly like theirs: changing it, or the dict that was appended, never
    changes the log. Search is a scan of the session's messages (their words are worked out once,
    by the first search that needs them). Safe to call from several threads.

    >>> from ctxfold.events import NewEvent
    >>> store = MemoryStore()
    >>> [e.seq for e in store.append("s", [NewEvent("turn"), NewEvent("turn")])]
    [1, 2]
    """

    local_writes = True

    def __init__(self) -> None:
        self._logs: dict[str, _Log] = {}
        self._snapshots: dict[str, tuple[int, str]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def _write_batch(
        self,
        session_id: str,
        batch: EncodedBatch,
        expected_seq: int | None,
        idempotency_key: str | None,
        created_at: float,
    ) -> int | PriorAppend:
        with self._lock:
            if self._closed:
                self._check_open()
            log = self._logs.get(session_id)
            if log is None:
                log = _Log()
            elif idempotency_key is not None and idempotency_key in log.keys:
                return log.keys[idempotency_key]
            rows = log.rows
            last = len(rows)
            if expected_seq is not None and expected_seq != last:
                raise ConflictError(session_id, expected_seq, last)
            events = batch.events
            if events:
                if len(events) == 1:
                    # Most appends write one event: no comprehension (a call of its own in
                    # Python 3.11) for it.
                    rows.append((events[0].type, events[0].data, created_at))
                else:
                    # Built whole before it joins the log, which takes all of a batch or none.
                    rows.extend([(e.type, e.data, created_at) for e in events])
                if idempotency_key is not None:
                    log.keys[idempotency_key] = PriorAppend(last + 1, len(rows), batch.digest)
                if not last:
                    self._logs[session_id] = log
        return last + 1

    def _read_page(self, session_id: str, after: int, limit: int | None) -> list[Event]:
        with self._lock:
            self._check_open()
            log = self._logs.get(session_id)
            rows = log.rows[after : None if limit is None else after + limit] if log else []
        return [
            decode_event(session_id, seq, kind, data, created_at)
            for seq, (kind, data, created_at) in enumerate(rows, start=after + 1)
        ]

    def sessions(self) -> list[str]:
        """Every session id with at least one event, sorted."""
        with self._lock:
            self._check_open()
            return sorted(self._logs)

    def last_seq(self, session_id: str) -> int:
        """The session's last seq, 0 when it has no events."""
        check_session_id(session_id)
        with self._lock:
            self._check_open()
            log = self._logs.get(session_id)
            return len(log.rows) if log else 0

    def _search(
        self, session_id: str, query: SearchQuery, seqs: list[int] | None, limit: int
    ) -> list[SearchHit]:
        with self._lock:
            self._check_open()
            log = self._logs.get(session_id) or _Log()
            for kind, data, _ in log.rows[len(log.words) :]:
                log.words.append(index_words(stored_text(data)) if kind == MESSAGE else None)
            rows, found = list(log.rows), list(log.words)
        candidates = (
            range(1, len(rows) + 1) if seqs is None else [s for s in seqs if 1 <= s <= len(rows)]
        )
        scored = []
        for seq in candidates:
            text = found[seq - 1]
            if text is not None and (score := query.score(text)) > 0:
                scored.append((score, seq))
        scored.sort(reverse=True)
        return [
            SearchHit(seq, score, decode_event(session_id, seq, *rows[seq - 1]))
            for score, seq in scored[:limit]
        ]

    def _save_snapshot(self, session_id: str, seq: int, data: str) -> None:
        with self._lock:
            self._check_open()
            kept = self._snapshots.get(session_id)
            if kept is None or kept[0] <= seq:
                self._snapshots[session_id] = (seq, data)

    def _load_snapshot(self, session_id: str) -> tuple[int, str] | None:
        with self._lock:
            self._check_open()
            return self._snapshots.get(session_id)

    def _drop_snapshots(self, session_id: str) -> None:
        with self._lock:
            self._check_open()
            self._snapshots.pop(session_id, None)

    def close(self) -> None:
        """Drop the events and end every subscription; later calls raise `StoreClosedError`.
        Closing twice is fine."""
        with self._lock:
            self._closed = True
            self._logs = {}
            self._snapshots = {}
        self._end_subscriptions()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("this MemoryStore is closed")
