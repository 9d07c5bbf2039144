"""A bounded memo keyed by the identity of immutable objects: what the compaction pipeline uses
to read each message once (its identifiers, its redacted copy, its work ledger) however many
compactions read it again."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class IdentityMemo(Generic[T]):
    """The last `maxsize` values made from some objects, keyed by the objects' identity (a
    message may hold an unhashable `extra` dict) and a hashable `tag`.

    Each entry keeps a reference to its objects, so their ids cannot be reused while it lives.
    The objects must be immutable (frozen messages, recorded data never edited), so an entry
    never goes stale. Compactors may run in several threads: one lock.
    """

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._entries: OrderedDict[Hashable, tuple[tuple[object, ...], T]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, objects: tuple[object, ...], make: Callable[[], T], tag: Hashable = None) -> T:
        """The value remembered for `objects` and `tag`, else `make()`, remembered."""
        key = (tuple(id(o) for o in objects), tag)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and all(a is b for a, b in zip(entry[0], objects, strict=True)):
                self._entries.move_to_end(key)
                return entry[1]
        made = make()
        with self._lock:
            self._entries[key] = (objects, made)
            if len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
        return made
