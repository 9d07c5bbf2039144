"""What a session derives from its log, event by event: `Fold`.

A fold holds the projection (pins included), the count of overflows, the provider usage report
that still describes the view, and, once someone asks for an estimate, the token `Tally`. The
tally is attached to the projection as it stands (`attach`): each projected item is counted once
then, or its count is taken from where it was recorded (a checkpoint, a compaction event); the
log is never folded a second time to build it.

Pure: no I/O. A session feeds it events (`fold`) or starts it from a checkpoint
(`ctxfold.session.checkpoint`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ctxfold.events import MASK, OVERFLOW, RESET, USAGE, Event, Usage
from ctxfold.messages import Message
from ctxfold.session.projection import Change, Item, Projection
from ctxfold.tokens.tally import Tally


@dataclass(frozen=True)
class Anchor:
    """The provider's report that still describes the view: it measured the request sent after
    `after_seq` and was logged at `seq`, after the last edit."""

    seq: int
    after_seq: int
    prompt_tokens: int


class Fold:
    """A session's derived state; see the module docstring."""

    def __init__(self, projection: Projection | None = None) -> None:
        self.projection = projection if projection is not None else Projection()
        self.tally: Tally | None = None
        self.last_edit_seq = 0
        self.overflows = 0
        self.anchor: Anchor | None = None
        self.known: dict[int, int] = {}
        """Recorded counts of projected items, by id, in units of the counter `known_counter`
        names; kept only until a tally is attached."""
        self.known_counter: str | None = None
        self.altered: set[int] = set()
        """Ids of original items whose message a mask changed: they differ from their event."""
        self.reshapes = 0
        """How many folded events removed or changed items already projected: while it stays
        the same, the projection has only grown at its end."""

    def fold(self, event: Event, message: Message | None = None) -> None:
        """Fold one stored event in (events come in seq order). `message`: the message of a
        message event when the caller holds it already (the one it just appended)."""
        change = self.projection.apply(event, message)
        if change.removed or change.edit:
            self.reshapes += 1
        if change.edit:
            self.last_edit_seq = event.seq
            self.anchor = None
        if change.removed:
            self.altered.difference_update(item.id for item in change.removed)
        if event.type == MASK:
            self.altered.update(item.id for item in change.added)
        elif event.type == OVERFLOW:
            self.overflows += 1
        elif event.type == RESET:
            self.overflows = 0
        elif event.type == USAGE:
            usage = Usage.from_data(event.data)
            # A report on a request sent before the last edit no longer describes the view.
            if usage.after_seq >= self.last_edit_seq:
                self.anchor = Anchor(event.seq, usage.after_seq, usage.prompt_tokens)
        tally = self.tally
        if tally is not None:
            _update_tally(tally, change)
            if event.type == USAGE and self.anchor is not None and self.anchor.seq == event.seq:
                # Every item came before this report: the tail is the newest items.
                tail = _tail_after(self.projection.items, self.anchor.after_seq)
                tally.anchor(self.anchor.prompt_tokens + sum(tally.count(i.id) for i in tail))
        elif (
            change.tokens
            and change.counter is not None
            and self.known_counter
            in (
                None,
                change.counter,
            )
        ):
            self.known_counter = change.counter
            self.known.update(change.tokens)

    def fold_message(self, seq: int, message: Message) -> None:
        """Fold in the message event at `seq` whose message the caller holds: what `fold` does
        for it, with none of the checks only other events need (a batch of appends folds this
        way, message by message)."""
        item = self.projection.add_message(seq, message)
        if self.tally is not None:
            self.tally.add(item.id, message)

    def fold_messages(self, first: int, messages: Sequence[Message]) -> None:
        """`fold_message` for the message events at `first`, `first + 1`, ... (a batch of
        appends that holds only messages), in one go."""
        items = self.projection.add_messages(first, messages)
        tally = self.tally
        if tally is not None:
            for item in items:
                tally.add(item.id, item.message)

    def attach(self, tally: Tally, previous: Tally | None = None) -> None:
        """Count the projection into `tally` (empty) and keep it current from now on.

        Each item is counted once, unless its count is known already under the same counter
        name: recorded (`known`), or held by `previous`, the tally this one replaces."""
        name = tally.counter.name
        known = self.known if self.known_counter == name else {}
        reuse = previous if previous is not None and previous.counter.name == name else None
        anchor = self.anchor
        counts = self._all_counts(tally, known, reuse)
        if counts is not None:
            if self._take_known(tally, counts):
                self.tally, self.known, self.known_counter = tally, {}, None
                return
            known = counts  # counted already: the walk below takes them
        items = self.projection.items
        later: list[Item] = []
        for item in items:
            if anchor is not None and item.id > anchor.seq:
                later.append(item)  # appended after the report: counted on top of it
                continue
            tokens = known.get(item.id)
            if tokens is None and reuse is not None and item.id in reuse:
                tokens = reuse.count(item.id)
            tally.add(item.id, item.message, tokens=tokens)
        if anchor is not None:
            before = [item for item in items if item.id < anchor.seq]
            tail = _tail_after(before, anchor.after_seq)
            tally.anchor(anchor.prompt_tokens + sum(tally.count(i.id) for i in tail))
        for item in later:
            tokens = known.get(item.id)
            if tokens is None and reuse is not None and item.id in reuse:
                tokens = reuse.count(item.id)
            tally.add(item.id, item.message, tokens=tokens)
        self.tally = tally
        self.known = {}
        self.known_counter = None

    def _all_counts(
        self, tally: Tally, known: dict[int, int], reuse: Tally | None
    ) -> dict[int, int] | None:
        """Every projected item's count by id, when `known` holds most of them (a checkpoint's
        counts, with the few items folded after it counted here, or taken from `reuse`); None
        when it holds fewer than half, and counting item by item costs no more."""
        ids = self.projection.ids()
        if known.keys() == ids:
            return known
        missing = ids - known.keys()
        if len(missing) * 2 > len(ids):
            return None
        # Counts of items no longer projected (retracted, compacted away) are left out.
        counts = dict(known)
        for item_id in known.keys() - ids:
            del counts[item_id]
        items = self.projection.items
        for item_id in missing:
            if reuse is not None and item_id in reuse:
                counts[item_id] = reuse.count(item_id)
            else:
                index = self.projection.position(item_id)
                assert index is not None  # every id in `ids` is projected
                counts[item_id] = tally.counter.count_message(items[index].message)
        return counts

    def _take_known(self, tally: Tally, known: dict[int, int]) -> bool:
        """What `attach` does when `known` holds the count of every projected item (a
        checkpoint's, say), taking the counts whole, with no look at each of a hundred thousand
        items; False, having done nothing, where that cannot be done exactly."""
        anchor = self.anchor
        if anchor is None:
            tally.add_counts(known)
            return True
        items = self.projection.items
        # Every edit drops the anchor, so the items newer than the report were appended after
        # it and end the projection; a checkpoint says so only by its word, so it is checked.
        later = _tail_after(items, anchor.seq)
        ids = self.projection.ids()
        if anchor.seq in ids or sum(1 for i in ids if i > anchor.seq) != len(later):
            return False
        newer = {item.id: known[item.id] for item in later}
        head = dict(known)
        for item_id in newer:
            del head[item_id]
        tally.add_counts(head)
        tail = _tail_after(items[: len(items) - len(later)], anchor.after_seq)
        tally.anchor(anchor.prompt_tokens + sum(tally.count(i.id) for i in tail))
        tally.add_counts(newer)
        return True


def _tail_after(items: Sequence[Item], seq: int) -> list[Item]:
    tail: list[Item] = []
    for item in reversed(items):
        if item.id <= seq:
            break
        tail.append(item)
    return tail


def _update_tally(tally: Tally, change: Change) -> None:
    for item in change.removed:
        tally.remove(item.id)
    # A compaction or mask records what its writer counted; with a counter of the same name the
    # count is the same, so it is taken rather than counted again.
    known = change.tokens if change.counter == tally.counter.name else {}
    for item in change.added:
        tally.add(item.id, item.message, tokens=known.get(item.id))
    if change.edit:
        tally.drop_anchor()


__all__ = ["Anchor", "Fold"]
