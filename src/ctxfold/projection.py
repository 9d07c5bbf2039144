"""The projection: the fold that turns a session's log into the messages the model is sent.

Message events add items in seq order; compaction events replace a contiguous run of items with
one message where the run stood; mask events replace the content of tool results in place. Every
other event type is ignored here (usage and pins are read by the session).

An item's id is the seq of the event that put it there. Items also carry a position key (the seq
of the first original message they stand for), which keeps the list sorted, so finding an item is
a binary search and applying an event costs O(log n) plus a list splice.

`check` validates an edit against the current projection before anything is written; `apply`
folds an event in. Neither does I/O.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ctxfold.errors import InvalidHistoryError
from ctxfold.events import COMPACTION, MASK, MESSAGE, Event, NewEvent
from ctxfold.messages import Message
from ctxfold.messages.structure import analyze

ItemKind = Literal["message", "summary", "note"]


@dataclass(frozen=True)
class Item:
    """One projected message and where it came from."""

    id: int
    """The seq of the event that put this message in the projection."""
    message: Message
    kind: ItemKind = "message"
    """"message" for an original, "summary" or "note" for what a compaction put in place."""
    key: int = 0
    """Position key: the seq of the first original this item stands for."""
    covers: tuple[int, int] | None = None
    """For a compaction item: the first and last original seqs it replaced (for recall)."""

    @property
    def synthetic(self) -> bool:
        return self.kind != "message"


@dataclass(frozen=True)
class Change:
    """What one applied event did, for incremental bookkeeping (token tallies)."""

    removed: tuple[Item, ...] = ()
    added: tuple[Item, ...] = ()
    edit: bool = False
    """True for compactions and masks: a provider-usage anchor no longer holds."""


@dataclass
class Projection:
    """The current projection of one session, updated event by event."""

    last_seq: int = 0
    _items: list[Item] = field(default_factory=list)
    _keys: list[int] = field(default_factory=list)
    _key_of: dict[int, int] = field(default_factory=dict)

    # -- reading ---------------------------------------------------------------------------
    @property
    def items(self) -> Sequence[Item]:
        return self._items

    def messages(self) -> list[Message]:
        return [item.message for item in self._items]

    def synthetic(self) -> frozenset[int]:
        return frozenset(i for i, item in enumerate(self._items) if item.synthetic)

    def position(self, item_id: int) -> int | None:
        """Index of the item with this id in the current projection, or None."""
        key = self._key_of.get(item_id)
        if key is None:
            return None
        index = bisect.bisect_left(self._keys, key)
        if index < len(self._items) and self._items[index].id == item_id:
            return index
        return None

    def __len__(self) -> int:
        return len(self._items)

    # -- validating ------------------------------------------------------------------------
    def check(self, event: NewEvent | Event) -> None:
        """Raise `InvalidHistoryError` if applying `event` now would make an invalid history."""
        if event.type == COMPACTION:
            self._run_of(event.data)
            replacement = Message.from_dict(event.data["message"])
            if replacement.role == "tool" or replacement.tool_calls:
                raise InvalidHistoryError(
                    "a compaction must put a plain message in place, not a tool call or result"
                )
        elif event.type == MASK:
            self._mask_targets(event.data)
        elif event.type == MESSAGE:
            Message.from_dict(event.data["message"])

    def _run_of(self, data: Mapping[str, Any]) -> tuple[int, int]:
        first, last = data.get("first"), data.get("last")
        if not isinstance(first, int) or not isinstance(last, int):
            raise InvalidHistoryError(
                f"a compaction needs integer 'first' and 'last' item ids, got {first!r}, {last!r}"
            )
        start, end = self.position(first), self.position(last)
        if start is None or end is None:
            missing = first if start is None else last
            raise InvalidHistoryError(
                f"item {missing} is not in the current projection (already replaced, or never "
                "there); a compaction may only name items the model currently sees"
            )
        if end < start:
            raise InvalidHistoryError(
                f"compaction range is reversed: item {first} comes after {last}"
            )
        replaced = data.get("replaced")
        if replaced is not None and list(replaced) != [i.id for i in self._items[start : end + 1]]:
            raise InvalidHistoryError(
                f"compaction of items {first}..{last} is not contiguous in the current projection"
            )
        structure = analyze(self.messages(), self.synthetic())
        if start < structure.system_end:
            raise InvalidHistoryError("the system block is never compacted")
        if start not in structure.cuts or end + 1 not in structure.cuts:
            bad = start if start not in structure.cuts else end + 1
            raise InvalidHistoryError(
                f"compaction of items {first}..{last} would split a tool call from its result "
                f"(position {bad} is not a safe cut point)"
            )
        for index in structure.pending:
            if start <= index <= end:
                raise InvalidHistoryError(
                    f"compaction of items {first}..{last} would drop a call that is still pending"
                )
        return start, end

    def _mask_targets(self, data: Mapping[str, Any]) -> list[tuple[int, str]]:
        entries = data.get("items")
        if not isinstance(entries, list) or not entries:
            raise InvalidHistoryError("a mask needs a non-empty list of {id, content} items")
        out: list[tuple[int, str]] = []
        for entry in entries:
            item_id, content = entry.get("id"), entry.get("content")
            index = self.position(item_id) if isinstance(item_id, int) else None
            if index is None:
                raise InvalidHistoryError(f"mask names item {item_id!r}, which is not projected")
            if self._items[index].message.role != "tool":
                raise InvalidHistoryError(f"mask names item {item_id}, which is not a tool result")
            if not isinstance(content, str):
                raise InvalidHistoryError(f"mask placeholder for item {item_id} must be text")
            out.append((index, content))
        return out

    # -- folding ---------------------------------------------------------------------------
    def apply(self, event: Event) -> Change:
        """Fold one stored event in. Events must come in seq order."""
        if event.seq <= self.last_seq:
            raise InvalidHistoryError(
                f"event {event.seq} arrived after {self.last_seq}; events fold in seq order"
            )
        self.last_seq = event.seq
        if event.type == MESSAGE:
            item = Item(event.seq, event.message, "message", event.seq)
            self._items.append(item)
            self._keys.append(item.key)
            self._key_of[item.id] = item.key
            return Change(added=(item,))
        if event.type == COMPACTION:
            start, end = self._run_of(event.data)
            removed = tuple(self._items[start : end + 1])
            kind: ItemKind = "note" if event.data.get("kind") == "note" else "summary"
            covers = _covered(removed)
            item = Item(event.seq, event.message, kind, removed[0].key, covers)
            self._items[start : end + 1] = [item]
            self._keys[start : end + 1] = [item.key]
            for gone in removed:
                del self._key_of[gone.id]
            self._key_of[item.id] = item.key
            return Change(removed=removed, added=(item,), edit=True)
        if event.type == MASK:
            removed_items: list[Item] = []
            added_items: list[Item] = []
            for index, content in self._mask_targets(event.data):
                old = self._items[index]
                # Provider fields stay (an Anthropic is_error, say); the adapters write kept
                # content parts back only while they still match the text.
                new = Item(old.id, old.message.replace(content=content), old.kind, old.key)
                self._items[index] = new
                removed_items.append(old)
                added_items.append(new)
            return Change(tuple(removed_items), tuple(added_items), edit=True)
        return Change()

    def extend(self, events: Iterable[Event]) -> list[Change]:
        return [self.apply(event) for event in events]


def _covered(items: Sequence[Item]) -> tuple[int, int]:
    first = items[0].covers[0] if items[0].covers else items[0].id
    last = items[-1].covers[1] if items[-1].covers else items[-1].id
    return first, last
