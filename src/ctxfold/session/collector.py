"""`collector_paused`: the cyclic garbage collector held off while a projection is built.

A session's first look folds its whole log: hundreds of thousands of objects that all stay
alive. The cyclic collector would walk them again and again while they are made (half the time
of a cold start) and could free none of them.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_paused_lock = threading.Lock()
_paused_depth = 0
_paused_from_enabled = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Hold off the cyclic garbage collector for the block (reference counting still frees
    everything that is not in a cycle). Nested and concurrent blocks share one pause, and the
    collector comes back only if it was on when the first of them began."""
    global _paused_depth, _paused_from_enabled
    with _paused_lock:
        if _paused_depth == 0:
            _paused_from_enabled = gc.isenabled()
            gc.disable()
        _paused_depth += 1
    try:
        yield
    finally:
        with _paused_lock:
            _paused_depth -= 1
            if _paused_depth == 0 and _paused_from_enabled:
                # Hand what the block made to the oldest generation, where a collection meets
                # it only when a full one is due, instead of walking it all at once in the
                # next young collection; nothing is kept from being freed. Not when the
                # application froze objects itself: unfreezing would undo that.
                if gc.get_freeze_count() == 0:
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()
