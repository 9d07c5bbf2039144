"""MemoryStore: the event log in a dict, for tests and short-lived scripts."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from ctxfold.errors import ConflictError, StoreClosedError
from ctxfold.events import Event
from ctxfold.storage.base import (
    EncodedEvent,
    StoreBase,
    check_seq,
    check_session_id,
    decode_event,
)

# What one stored event keeps: type, JSON text of the data, created_at.
_Row = tuple[str, str, float]


class MemoryStore(StoreBase):
    """An `EventStore` held in memory; everything is gone when the process ends.

    It keeps the JSON text of each event, as the SQL stores do, so the data a caller reads back is a
    fresh copy that behaves exactly like theirs: changing it, or the dict that was appended, never
    changes the log. Safe to call from several threads.

    >>> from ctxfold.events import NewEvent
    >>> store = MemoryStore()
    >>> [e.seq for e in store.append("s", [NewEvent("turn"), NewEvent("turn")])]
    [1, 2]
    """

    def __init__(self) -> None:
        self._logs: dict[str, list[_Row]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def _write_batch(
        self,
        session_id: str,
        batch: Sequence[EncodedEvent],
        expected_seq: int | None,
        created_at: float,
    ) -> int:
        with self._lock:
            self._check_open()
            log = self._logs.get(session_id, [])
            if expected_seq is not None and expected_seq != len(log):
                raise ConflictError(session_id, expected_seq, len(log))
            first = len(log) + 1
            if batch:
                log.extend((e.type, e.data, created_at) for e in batch)
                self._logs[session_id] = log
        return first

    def read(self, session_id: str, after: int = 0) -> list[Event]:
        """The session's events with a seq above `after`, in seq order."""
        check_session_id(session_id)
        check_seq(after, "after")
        with self._lock:
            self._check_open()
            rows = self._logs.get(session_id, [])[after:]
        return [decode_event(session_id, after + 1 + i, *row) for i, row in enumerate(rows)]

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
            return len(self._logs.get(session_id, ()))

    def close(self) -> None:
        """Drop the events; later calls raise `StoreClosedError`. Closing twice is fine."""
        with self._lock:
            self._closed = True
            self._logs = {}

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("this MemoryStore is closed")
