"""Following a session live: the one algorithm behind `subscribe` and `asubscribe`.

`Follow.step` is the whole algorithm (read what is new, else wait a little); a sync loop and an
async loop each drive it, so the two forms cannot drift apart. What a subscription waits on is a
`Watch`: the store's own appends in this process (`LocalWatch`, with polling when other processes
may write) or PostgreSQL's ``LISTEN``.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Protocol

from ctxfold.errors import StoreClosedError
from ctxfold.events import Event
from ctxfold.storage.checks import PAGE_SIZE

if TYPE_CHECKING:
    from ctxfold.storage.base import StoreBase

WAIT_SLICE = 0.25
"""Longest single wait, in seconds: how soon a `stop` flag or a cancelled task takes effect."""


class Watch(Protocol):
    """What a subscription waits on between reads."""

    def arm(self) -> None:
        """Called right before each read: any append after this must end the next `wait`."""

    def wait(self, timeout: float) -> bool:
        """Block up to `timeout` seconds; True when the session may have new events."""

    def close(self) -> None:
        """Release what the watch holds (a listening connection)."""


class LocalWatch:
    """Woken by the store's own appends in this process; with `poll_interval` (seconds), also
    reports a possible change after each interval, for writers in other processes."""

    def __init__(self, store: StoreBase, poll_interval: float | None) -> None:
        self._store = store
        self._poll = poll_interval
        self._seen = -1

    def arm(self) -> None:
        with self._store._changed:
            self._seen = self._store._generation

    def wait(self, timeout: float) -> bool:
        store = self._store
        limit = timeout if self._poll is None else min(timeout, self._poll)
        with store._changed:
            store._waiting += 1  # so that `_announce` wakes this wait
            try:
                woken = store._changed.wait_for(
                    lambda: store._generation != self._seen or store._ended, limit
                )
            finally:
                store._waiting -= 1
        return woken or self._poll is not None

    def close(self) -> None:
        pass


class Follow:
    """One subscription: the last seq seen, the idle clock, and the watch it waits on."""

    def __init__(
        self,
        store: StoreBase,
        session_id: str,
        after: int,
        idle_timeout: float | None,
        stop: threading.Event | None,
    ) -> None:
        self._store = store
        self._session_id = session_id
        self._last = after
        self._idle_timeout = idle_timeout
        self._stop = stop
        self._watch: Watch | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._started = False
        self._dirty = True
        self._quiet_since = time.monotonic()

    def step(self) -> list[Event] | None:
        """The next events (possibly none yet), or None when the subscription is over."""
        with self._lock:
            if self._closed or (self._stop is not None and self._stop.is_set()):
                return None
            if self._watch is None:
                # Listen before the first read, so nothing lands unseen in between.
                self._watch = self._store._watch(self._session_id)
            if self._store._ended:
                self._dirty = True  # the read below raises StoreClosedError and ends the loop
            if self._dirty:
                self._watch.arm()
                try:
                    page = self._store._read_page(self._session_id, self._last, PAGE_SIZE)
                except StoreClosedError:
                    if not self._started:
                        raise
                    return None  # the store was closed under a running subscription: it ends
                self._started = True
                # A full page may have more behind it; otherwise the watch, armed before the
                # read, reports anything that lands from now on.
                self._dirty = len(page) == PAGE_SIZE
                if page:
                    self._last = page[-1].seq
                    self._quiet_since = time.monotonic()
                    return page
            wait = WAIT_SLICE
            if self._idle_timeout is not None:
                left = self._idle_timeout - (time.monotonic() - self._quiet_since)
                if left <= 0:
                    return None
                wait = min(wait, left)
            self._dirty = self._watch.wait(wait)
            return []

    def close(self) -> None:
        """End the subscription and release its watch (waits for a running step to finish)."""
        with self._lock:
            self._closed = True
            if self._watch is not None:
                self._watch.close()
                self._watch = None
