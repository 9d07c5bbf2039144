"""Which originals the view no longer shows, folded from the log event by event.

Recall reads the log, never a session's projection: `OutOfView` runs the projection's own fold
over the events and keeps, beside it, what each projected item stands for (the seqs of the
original messages under a summary or a note) and which tool results a mask cleared. From that it
tells, for each original message, one of three fates:

- **in view**: the model is sent it as it was written;
- **out of view**: a summary or a note stands where it stood, or a mask replaced its content; these
  are what recall returns;
- **removed**: a retraction or a reset took it out on purpose (a framework's ``pop_item`` or
  ``clear_session``, or an item under a summary that was retracted). A reset means "forget":
  recall never brings such a message back.

Folding costs O(new events) per call after the first, like the session's own projection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ctxfold.events import COMPACTION, MASK, MESSAGE, Event
from ctxfold.session.projection import Projection

Fate = Literal["in view", "out of view", "removed"]


@dataclass(frozen=True)
class Fates:
    """The fate of every original message at one seq of the log: the seqs out of view and those
    in view (every other message seq was removed on purpose)."""

    last_seq: int
    out_of_view: frozenset[int]
    in_view: frozenset[int]

    def of(self, seq: int) -> Fate:
        if seq in self.out_of_view:
            return "out of view"
        return "in view" if seq in self.in_view else "removed"


class OutOfView:
    """The fold: the projection, what each item stands for, and the log's index of call ids."""

    def __init__(self) -> None:
        self.projection = Projection()
        self.last_seq = 0
        self._origins: dict[int, tuple[int, ...]] = {}
        self._masked: set[int] = set()
        self.types: dict[int, str] = {}
        """The type of every event folded, by seq (message, compaction, mask, ...)."""
        self.results: dict[str, list[int]] = {}
        """Seqs of the tool results that answer each call id, oldest first."""
        self.tool_names: dict[str, str] = {}
        """The tool each call id called (the newest call with that id)."""
        self.masked_by: dict[int, tuple[int, ...]] = {}
        """The tool results each mask event cleared, by the mask's seq."""
        self._fates: Fates | None = None

    def fold(self, event: Event) -> None:
        """Fold one stored event in; events come in seq order, each once."""
        change = self.projection.apply(event)
        self.last_seq = event.seq
        self.types[event.seq] = event.type
        self._fates = None
        if event.type == MESSAGE:
            self._origins[event.seq] = (event.seq,)
            message = change.added[0].message
            if message.role == "tool" and message.tool_call_id:
                self.results.setdefault(message.tool_call_id, []).append(event.seq)
            for call in message.tool_calls:
                self.tool_names[call.id] = call.name
        elif event.type == COMPACTION and change.added:
            # A summary of summaries stands for every original under each of them.
            under = sorted({seq for item in change.removed for seq in self._origins[item.id]})
            self._origins[event.seq] = tuple(under)
        elif event.type == MASK:
            cleared = tuple(item.id for item in change.added)
            self.masked_by[event.seq] = cleared
            self._masked.update(cleared)

    def originals(self, compaction_seq: int) -> tuple[int, ...]:
        """The original message seqs the compaction at `compaction_seq` replaced, in order."""
        return self._origins.get(compaction_seq, ())

    def fates(self) -> Fates:
        """Which original messages are in view and which out of view now."""
        if self._fates is None:
            hidden: set[int] = set()
            shown: set[int] = set()
            for item in self.projection.items:
                if item.synthetic:
                    hidden.update(self._origins.get(item.id, ()))
                elif item.id in self._masked:
                    hidden.add(item.id)
                else:
                    shown.add(item.id)
            self._fates = Fates(self.last_seq, frozenset(hidden), frozenset(shown))
        return self._fates
