"""`StoreBase`: the one seam every event store implements, and the checks they all share.

A store is a durable, append-only log of events per session, plus data derived from it (a search
index, projection snapshots) that only ever costs speed when it is lost. `StoreBase` holds every
argument check and the control flow; a backend implements a few small primitives (`_write_batch`,
`_read_page`, `_search`, the snapshot trio, and optionally `_watch`). The store layer knows
nothing of sessions: `store.session(id)` builds whatever session type the session layer
registered with `register_session_type`.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from ctxfold.errors import ConfigurationError, CtxfoldError, InvalidInputError
from ctxfold.events import Event, NewEvent
from ctxfold.storage.checks import (
    PAGE_SIZE,
    EncodedBatch,
    EncodedEvent,
    check_idempotency_key,
    check_seq,
    check_session_id,
    check_text,
    decode_data,
    decode_event,
    encode_batch,
    same_data,
    stored_event,
)
from ctxfold.storage.search import SearchHit, SearchQuery
from ctxfold.storage.watch import Follow, LocalWatch, Watch

if TYPE_CHECKING:
    # For the annotation only: at run time the session layer registers itself (imports point down).
    from ctxfold.session import Session

log = logging.getLogger("ctxfold.storage")

_Store = TypeVar("_Store", bound="StoreBase")
_session_type: Callable[..., Session] | None = None

MAX_SEARCH_LIMIT = 1000
"""The most hits one `search` returns."""


def register_session_type(factory: Callable[..., Session]) -> None:
    """Tell every store what `store.session(id)` builds; the session layer calls this once."""
    global _session_type
    _session_type = factory


@dataclass(frozen=True)
class PriorAppend:
    """What a backend reports when an idempotency key was used before: the seqs that append got."""

    first_seq: int
    last_seq: int
    digest: str


def now() -> float:
    """The time stamped on appended events, in seconds since the epoch."""
    return time.time()


class StoreBase(abc.ABC):
    """The seam every ctxfold store implements: a durable, append-only event log per session.

    What every store guarantees (the contract suite in `ctxfold.testing.store_contract` checks it):

    - `append` is atomic: all of a batch lands with contiguous seqs after the last one, or none.
      With `expected_seq` it raises `ConflictError` unless that is the session's last seq. Two
      appends can never get the same seq. With `idempotency_key`, a repeated append writes nothing
      and returns what the first one stored.
    - `read` and `stream` return events in seq order; `last_seq` is 0 for an unknown session.
    - Nothing in the log is ever updated or deleted. The search index and snapshots are derived
      data: a store builds its index for events written before the index existed, and a missing
      or broken snapshot costs speed, never a read or an append.
    - Every call is safe from several threads; a closed store raises `StoreClosedError`.

    Subclass it and implement the abstract methods to add a backend; `with store:` closes it.
    """

    poll_interval: float | None = None
    """Seconds between checks for other processes' appends while `subscribe` waits; None when
    every writer is in this process (the wait is then woken by the append itself)."""

    local_writes: bool = False
    """True when every write to this store goes through this object (an in-process store such
    as `MemoryStore`): `change_mark` then tells a reader whether the log may have changed."""

    snapshot_errors: tuple[type[BaseException], ...] = ()
    """Backend errors that mean the snapshot table is missing or broken: logged, never raised."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        # Set up here rather than in __init__, so a backend that forgets super().__init__()
        # still wakes its subscribers.
        store = super().__new__(cls)
        # A plain lock under the condition: every append takes it (`_announce`), and taken
        # directly it costs a fraction of the condition's own `with`.
        store._changed_lock = threading.Lock()
        store._changed = threading.Condition(store._changed_lock)
        store._generation = 0
        store._waiting = 0
        store._ended = False
        return store

    _changed_lock: threading.Lock
    _changed: threading.Condition
    _generation: int
    _waiting: int
    """How many subscribers wait on `_changed` now (`LocalWatch.wait`, under its lock)."""
    _ended: bool

    # -- the log -------------------------------------------------------------------------------

    def append(
        self,
        session_id: str,
        events: Sequence[NewEvent],
        expected_seq: int | None = None,
        idempotency_key: str | None = None,
    ) -> list[Event]:
        """Append `events` atomically after the session's last seq and return them as stored.

        - `expected_seq`: the caller's idea of the last seq (0 for a new session); when it is not
          the last seq, raise `ConflictError` and write nothing.
        - `idempotency_key`: a string naming this append (a UUID made before the first try). If
          an append with this key already landed in this session, nothing is written and the
          events it stored are returned, so a retry after a lost acknowledgement (a timeout, a
          dropped connection) never appends twice. The retry's events are compared with the
          stored ones by meaning: the keys of a mapping in their data may come in another
          order. The key is checked before `expected_seq`. A key reused for different events
          is an `InvalidInputError`. An empty batch records no key. Keys are kept per session,
          at most 256 bytes.

        Every check and the encoding happen before the backend writes anything.

        >>> from ctxfold.storage import MemoryStore
        >>> store = MemoryStore()
        >>> first = store.append("s", [NewEvent("turn")], idempotency_key="req-1")
        >>> store.append("s", [NewEvent("turn")], idempotency_key="req-1") == first
        True
        """
        return self._append(session_id, events, expected_seq, idempotency_key)[0]

    def _append(
        self,
        session_id: str,
        events: Sequence[NewEvent],
        expected_seq: int | None,
        idempotency_key: str | None,
    ) -> tuple[list[Event], list[EncodedEvent] | None]:
        """`append`, and the events as encoded and written (None when nothing was written: a
        repeated key). The session layer folds an event it does not hold as a message from
        that text, a copy the caller never sees, instead of encoding the event's data again."""
        check_session_id(session_id)
        if expected_seq is not None:
            check_seq(expected_seq, "expected_seq")
        if idempotency_key is not None:
            check_idempotency_key(idempotency_key, session_id)
        batch = encode_batch(session_id, events, digest=idempotency_key is not None)
        if not batch.events:
            idempotency_key = None
        created_at = now()
        written = self._write_batch(session_id, batch, expected_seq, idempotency_key, created_at)
        if isinstance(written, PriorAppend):
            return self._prior(session_id, idempotency_key, batch, written), None
        if batch.events:
            self._announce()
        # A FreshEvent's own data is what decoding its text would give, so it is not decoded.
        return [
            stored_event(session_id, seq, e.type, e.value, created_at)
            if e.value is not None
            else decode_event(session_id, seq, e.type, e.data, created_at)
            for seq, e in enumerate(batch.events, start=written)
        ], batch.events

    def _prior(
        self, session_id: str, key: str | None, batch: EncodedBatch, prior: PriorAppend
    ) -> list[Event]:
        """The events the first append with `key` stored, when `batch` is that append again;
        else raise `InvalidInputError`.

        The digest is of the encoded text, so the usual retry matches it at no cost. A retry
        the application built again from the same data may encode a mapping's keys in another
        order, which changes the text but not the meaning: only then are the stored events
        read and compared by meaning (`same_data`), so neither an unkeyed append nor a first
        try pays for it."""
        count = prior.last_seq - prior.first_seq + 1
        if prior.digest == batch.digest:
            return self._read_page(session_id, prior.first_seq - 1, count)
        if count == len(batch.events):
            stored = self._read_page(session_id, prior.first_seq - 1, count)
            if _same_events(batch, stored):
                return stored
        raise InvalidInputError(
            f"session {session_id!r}: idempotency_key {key!r} was already used for other "
            f"events (seqs {prior.first_seq} to {prior.last_seq}); use a new key for a new "
            "append"
        )

    def read(self, session_id: str, after: int = 0) -> list[Event]:
        """The session's events with a seq above `after`, in seq order."""
        check_session_id(session_id)
        check_seq(after, "after")
        return self._read_page(session_id, after, None)

    def stream(self, session_id: str, after: int = 0) -> Iterator[Event]:
        """The session's events with a seq above `after`, in seq order, fetched a page at a time.

        Memory stays bounded by one page (`PAGE_SIZE` events) however long the session is, and no
        connection or lock is held between pages, so the caller may append while it iterates.
        Events appended during the iteration may or may not be included.

        >>> from ctxfold.storage import MemoryStore
        >>> store = MemoryStore()
        >>> _ = store.append("s", [NewEvent("turn"), NewEvent("turn"), NewEvent("turn")])
        >>> [e.seq for e in store.stream("s", after=1)]
        [2, 3]
        """
        check_session_id(session_id)
        check_seq(after, "after")
        return self._stream(session_id, after)

    def _stream(self, session_id: str, after: int) -> Iterator[Event]:
        while True:
            page = self._read_page(session_id, after, PAGE_SIZE)
            yield from page
            if len(page) < PAGE_SIZE:
                return
            after = page[-1].seq

    def stream_data(self, session_id: str, after: int = 0) -> Iterator[tuple[int, str, Any]]:
        """`stream` as each event's ``(seq, type, data)``, for a reader that builds values of its
        own from the data: no `Event` is made per row (a cold start reads a hundred thousand).
        Paged, and as safe to append during, as `stream`.

        >>> from ctxfold.storage import MemoryStore
        >>> store = MemoryStore()
        >>> _ = store.append("s", [NewEvent("turn", {"n": 1})])
        >>> list(store.stream_data("s"))
        [(1, 'turn', {'n': 1})]
        """
        check_session_id(session_id)
        check_seq(after, "after")
        return self._stream_data(session_id, after)

    def _stream_data(self, session_id: str, after: int) -> Iterator[tuple[int, str, Any]]:
        while True:
            page = self._read_data_page(session_id, after, PAGE_SIZE)
            yield from page
            if len(page) < PAGE_SIZE:
                return
            after = page[-1][0]

    @abc.abstractmethod
    def sessions(self) -> list[str]:
        """Every session id with at least one event, sorted."""

    @abc.abstractmethod
    def last_seq(self, session_id: str) -> int:
        """The session's last seq, 0 when it has no events."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the store's resources and end every subscription; later calls raise
        `StoreClosedError`. Closing twice is fine."""

    # -- search --------------------------------------------------------------------------------

    def search(
        self,
        session_id: str,
        query: str,
        *,
        seqs: Collection[int] | None = None,
        limit: int = 20,
    ) -> list[SearchHit]:
        """Full-text search over the session's ``message`` events, best matches first.

        The text searched is each message's content and its tool calls' names and arguments. A
        message matches when it holds every whitespace-separated term of `query`, each term's
        words in order (see `ctxfold.storage.search` for the exact rules; nothing in the query is
        syntax). `seqs`, when given, restricts the search to those events (for example the ones
        the view no longer shows). `limit` is the most hits returned (1 to 1,000). Ties go to the
        newer message.

        >>> from ctxfold.messages import Message
        >>> from ctxfold.storage import MemoryStore
        >>> store = MemoryStore()
        >>> _ = store.append("s", [NewEvent.message(Message("user", "fix tests/test_io.py"))])
        >>> [hit.seq for hit in store.search("s", "test_io.py")]
        [1]
        """
        check_session_id(session_id)
        parsed = SearchQuery.parse(query)
        if (
            isinstance(limit, bool)
            or not isinstance(limit, int)
            or not 1 <= limit <= MAX_SEARCH_LIMIT
        ):
            raise InvalidInputError(
                f"limit must be an integer from 1 to {MAX_SEARCH_LIMIT:,}, not {limit!r}"
            )
        wanted = None
        if seqs is not None:
            if isinstance(seqs, (str, bytes)) or not isinstance(seqs, Collection):
                raise InvalidInputError(f"seqs must be a collection of seqs, not {seqs!r}")
            wanted = sorted({check_seq(seq, "each of seqs") for seq in seqs})
            if not wanted:
                return []
        return self._search(session_id, parsed, wanted, limit)

    # -- snapshots -----------------------------------------------------------------------------

    def save_snapshot(self, session_id: str, seq: int, data: str) -> None:
        """Keep `data` (JSON text the session layer made) as the session's snapshot at `seq`.

        A snapshot is derived data, outside the log: only the newest one per session is kept, it is
        never returned by `read`, and a store whose snapshot table is missing or broken logs a
        warning here instead of raising. `seq` must not be above the session's last seq."""
        check_session_id(session_id)
        check_seq(seq, "seq")
        check_text(data, f"session {session_id!r}: snapshot data")
        last = self.last_seq(session_id)
        if seq > last:
            raise InvalidInputError(
                f"session {session_id!r}: a snapshot at seq {seq} is ahead of the log, whose "
                f"last seq is {last}"
            )
        self._guard_snapshot("save", session_id, lambda: self._save_snapshot(session_id, seq, data))

    def load_snapshot(self, session_id: str) -> tuple[int, str] | None:
        """The session's newest snapshot as ``(seq, data)``, or None when there is none (or the
        snapshot table cannot be read: that costs speed, never a failure)."""
        check_session_id(session_id)
        loaded: tuple[int, str] | None = self._guard_snapshot(
            "load", session_id, lambda: self._load_snapshot(session_id)
        )
        return loaded

    def drop_snapshots(self, session_id: str) -> None:
        """Forget every snapshot of the session (the log is untouched)."""
        check_session_id(session_id)
        self._guard_snapshot("drop", session_id, lambda: self._drop_snapshots(session_id))

    def _guard_snapshot(self, action: str, session_id: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except CtxfoldError:
            raise
        except self.snapshot_errors as exc:
            # Derived data: the session rebuilds what a snapshot would have saved it.
            log.warning("%r: cannot %s the snapshot of %r: %s", self, action, session_id, exc)
            return None

    # -- subscriptions -------------------------------------------------------------------------

    def subscribe(
        self,
        session_id: str,
        after: int = 0,
        *,
        idle_timeout: float | None = None,
        stop: threading.Event | None = None,
    ) -> Iterator[Event]:
        """Follow the session live: yield every event with a seq above `after`, in seq order, each
        once, first those already stored, then new ones as they land.

        The iteration ends when `stop` is set, when no new event arrived for `idle_timeout`
        seconds (None: wait for ever), when the store is closed, or when the caller breaks out of
        the loop. `Session.watch()` and ``ctxfold sessions watch`` follow this shape:

        >>> import threading
        >>> from ctxfold.storage import MemoryStore
        >>> store = MemoryStore()
        >>> writer = threading.Timer(0.05, store.append, ("s", [NewEvent("turn")]))
        >>> writer.start()
        >>> for event in store.subscribe("s", idle_timeout=5):
        ...     print(event.seq, event.type)
        ...     break
        1 turn
        """
        self._check_follow(session_id, after, idle_timeout)
        return self._follow(Follow(self, session_id, after, idle_timeout, stop))

    def asubscribe(
        self,
        session_id: str,
        after: int = 0,
        *,
        idle_timeout: float | None = None,
        stop: threading.Event | None = None,
    ) -> AsyncIterator[Event]:
        """`subscribe` for asyncio code: ``async for event in store.asubscribe(id): ...``.

        Waiting and reading run in a worker thread, so the event loop never blocks; cancelling the
        task or leaving the loop ends the subscription."""
        self._check_follow(session_id, after, idle_timeout)
        return self._afollow(Follow(self, session_id, after, idle_timeout, stop))

    def _check_follow(self, session_id: str, after: int, idle_timeout: float | None) -> None:
        check_session_id(session_id)
        check_seq(after, "after")
        if idle_timeout is not None and (
            isinstance(idle_timeout, bool)
            or not isinstance(idle_timeout, (int, float))
            or not idle_timeout >= 0
        ):
            raise InvalidInputError(
                f"idle_timeout must be a number of seconds, 0 or more, or None, "
                f"not {idle_timeout!r}"
            )

    @staticmethod
    def _follow(follow: Follow) -> Iterator[Event]:
        try:
            while (batch := follow.step()) is not None:
                yield from batch
        finally:
            follow.close()

    @staticmethod
    async def _afollow(follow: Follow) -> AsyncIterator[Event]:
        try:
            while (batch := await asyncio.to_thread(follow.step)) is not None:
                for event in batch:
                    yield event
        finally:
            await asyncio.to_thread(follow.close)

    def _watch(self, session_id: str) -> Watch:
        """What `subscribe` waits on between reads: by default the store's own appends, plus a
        check every `poll_interval` seconds when other processes may write."""
        return LocalWatch(self, self.poll_interval)

    def _announce(self) -> None:
        """Wake this process's subscribers: something was appended."""
        with self._changed_lock:
            self._generation += 1
            # Only a subscriber inside `wait` needs waking: one that has yet to wait checks the
            # generation first, under this lock, and sees the new one.
            if self._waiting:
                self._changed.notify_all()

    def change_mark(self) -> int | None:
        """A number that moves on with every append that writes an event, to any session of
        this store, when the store sees every write (`local_writes`); None when it cannot tell
        (another process may write) or once it is closed. A reader that took the mark before
        reading the log knows nothing was appended since while the mark stays the same."""
        if not self.local_writes or self._ended:
            return None
        return self._generation

    def _end_subscriptions(self) -> None:
        """Wake every subscriber for good; a backend's `close` calls this."""
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    # -- what a backend implements -------------------------------------------------------------

    @abc.abstractmethod
    def _write_batch(
        self,
        session_id: str,
        batch: EncodedBatch,
        expected_seq: int | None,
        idempotency_key: str | None,
        created_at: float,
    ) -> int | PriorAppend:
        """Write `batch` in one transaction right after the session's last seq, record
        `idempotency_key` with the seqs and the batch's digest, and return the seq the first
        event got.

        When `idempotency_key` was recorded before, write nothing and return that `PriorAppend`
        (checked before `expected_seq`). Otherwise raise `ConflictError` when `expected_seq` is
        given and is not the last seq, and write nothing."""

    @abc.abstractmethod
    def _read_page(self, session_id: str, after: int, limit: int | None) -> list[Event]:
        """At most `limit` (None: all) events with a seq above `after`, in seq order."""

    def _read_data_page(
        self, session_id: str, after: int, limit: int | None
    ) -> list[tuple[int, str, Any]]:
        """`_read_page` as ``(seq, type, data)`` tuples; a backend that can read them without
        building events overrides it."""
        return [(e.seq, e.type, e.data) for e in self._read_page(session_id, after, limit)]

    def _read_text_page(
        self, session_id: str, after: int, limit: int | None
    ) -> list[tuple[int, str, str | bytes]] | None:
        """`_read_data_page` with each event's data as the JSON text the store keeps (a str, or
        its UTF-8 bytes, unchecked), for a reader that decodes it its own way (a checkpoint's
        load); None when the backend does not keep text, and the reader takes
        `_read_data_page`."""
        return None

    @abc.abstractmethod
    def _search(
        self, session_id: str, query: SearchQuery, seqs: list[int] | None, limit: int
    ) -> list[SearchHit]:
        """The best `limit` hits for `query` among the session's message events (only those in
        `seqs`, sorted, when given), best first, ties newest first. The index is derived data
        and may lag the log: bring it up to the session's last seq first."""

    @abc.abstractmethod
    def _save_snapshot(self, session_id: str, seq: int, data: str) -> None:
        """Keep `(seq, data)` as the session's snapshot, replacing older ones."""

    @abc.abstractmethod
    def _load_snapshot(self, session_id: str) -> tuple[int, str] | None:
        """The newest snapshot of the session, or None."""

    @abc.abstractmethod
    def _drop_snapshots(self, session_id: str) -> None:
        """Delete every snapshot of the session."""

    # -- sessions and lifetime -----------------------------------------------------------------

    def session(self, session_id: str, **kwargs: Any) -> Session:
        """A `Session` over this store; keyword arguments go to `Session`.

        >>> from ctxfold.storage import MemoryStore
        >>> MemoryStore().session("chat-1").id
        'chat-1'
        """
        if _session_type is None:
            raise ConfigurationError(
                "store.session() needs the session layer; import ctxfold (or ctxfold.session)"
            )
        return _session_type(self, session_id, **kwargs)

    def __enter__(self: _Store) -> _Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _same_events(batch: EncodedBatch, stored: Sequence[Event]) -> bool:
    """True when `batch` holds the events `stored`, by type and by the meaning of their data."""
    return len(stored) == len(batch.events) and all(
        event.type == kept.type and same_data(decode_data(event.data), kept.data)
        for event, kept in zip(batch.events, stored, strict=True)
    )


EventStore = StoreBase
"""The name earlier versions gave the store protocol; it is `StoreBase` itself now."""
