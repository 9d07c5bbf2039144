"""The projection: the fold that turns a session's log into the messages the model is sent.

Message events add items in seq order; a compaction replaces a contiguous run of items with one
message where the run stood; a mask replaces the content of tool results (or user messages) in
place; a retraction
takes the newest item (or newest whole step) back out; a reset empties the projection. Pins and
unpins change which items the application protects. Every other event type is ignored here
(usage reports and overflows are read by the session).

An item's id is the seq of the event that put it there. Items also carry a position key (the seq
of the first original message they stand for), which keeps the list sorted, so finding an item is
a binary search and applying an event costs O(log n) plus a list splice.

`check` validates an event against the current projection before it is written (the rules of
`invalid-edit-refused`, and pins); `apply` folds a stored event in. Neither does I/O. `apply`
holds every log to the structural rules but not to pins, so a log written before compactions
were checked against pins still reads (`old-logs-read`).
"""

from __future__ import annotations

import bisect
from collections.abc import Container, Iterable, KeysView, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ctxfold._assembled import assembled
from ctxfold.errors import InvalidHistoryError, InvalidInputError
from ctxfold.events import (
    COMPACTION,
    MASK,
    MESSAGE,
    OVERFLOW,
    PIN,
    RESET,
    RETRACTION,
    UNPIN,
    USAGE,
    Compaction,
    Event,
    LedgerParts,
    Mask,
    NewEvent,
    Overflow,
    Pin,
    Retraction,
    Unpin,
    Usage,
    joined_ledger,
)
from ctxfold.messages import Message
from ctxfold.messages.structure import analyze, in_system_block, is_safe_cut, pending_step
from ctxfold.session.frozen import Frozen, frozen

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
    original: Message | None = None
    """For a tool result or user message a mask replaced: the message as it was logged, before
    any mask."""
    identifiers: tuple[str, ...] | None = None
    """For a summary: the identifiers it holds verbatim, as its compaction recorded them (None
    when the log did not record them)."""
    ledger: Mapping[str, Any] | LedgerParts | None = field(default=None, compare=False)
    """For a summary or note: the work ledger of what it stands for, as its compaction recorded
    it (`ctxfold.summarizers.ledger.to_data`; None when the log did not record one), or the
    parts it is the merge of, the ledgers of the items it replaced among them (`LedgerParts`)."""

    @property
    def synthetic(self) -> bool:
        return self.kind != "message"

    @property
    def unmasked(self) -> Message:
        """The message as it was logged: `original` for a masked result, else `message`. What a
        summary of this item must account for (`identifiers-survive`)."""
        return self.original if self.original is not None else self.message

    @property
    def span(self) -> tuple[int, int]:
        """The first and last original seqs this item stands for: its own id for an original,
        the range it replaced for a summary or a note."""
        return self.covers if self.covers is not None else (self.id, self.id)


class SyntheticAt(Container[int]):
    """The positions of the synthetic items (summaries, notes) of `items`, answered by looking at
    the item asked about: what `ctxfold.messages.structure` reads to check one range, without a
    set built over every item."""

    __slots__ = ("_items",)

    def __init__(self, items: Sequence[Item]) -> None:
        self._items = items

    def __contains__(self, index: object) -> bool:
        return (
            isinstance(index, int)
            and 0 <= index < len(self._items)
            and self._items[index].synthetic
        )


def original_item(seq: int, message: Message) -> Item:
    """``Item(seq, message, "message", seq)``: the item of an original message event.

    A cold start makes a hundred thousand of these, and an append one, so only the three
    fields that differ from item to item are set, all at once (`assembled`); the others read
    their defaults from the class, which costs no more than reading a field set on the item."""
    return assembled(Item, {"id": seq, "message": message, "key": seq})


@dataclass(frozen=True)
class Change:
    """What one applied event did, for incremental bookkeeping (token tallies)."""

    removed: tuple[Item, ...] = ()
    added: tuple[Item, ...] = ()
    edit: bool = False
    """True when items already projected changed: a provider-usage anchor no longer holds."""
    counter: str | None = None
    """The counter that counted `tokens`, as the event recorded it (None: nothing counted)."""
    tokens: Mapping[int, int] = field(default_factory=dict)
    """Tokens of added items (by id) that the writer of the event counted already."""


@dataclass
class Projection:
    """The current projection of one session, updated event by event."""

    last_seq: int = 0
    # `_items` and `_messages` follow the rule of `ctxfold.session.frozen`: they grow in place
    # only at the end; any other change builds new lists (`_rebuilt`), so views handed out by
    # `items` and `messages()` never change under their holders.
    _items: list[Item] = field(default_factory=list)
    _keys: list[int] = field(default_factory=list)
    _key_of: dict[int, int] = field(default_factory=dict)
    _pins: set[int] = field(default_factory=set)
    _messages: list[Message] = field(default_factory=list)
    _shown: bool = field(default=True, compare=False, repr=False)
    """Whether a view of `_items` or `_messages` may be out: until one is, a compaction edits
    them in place (a batch of a thousand compactions copies them once, not a thousand times)."""

    @classmethod
    def of_items(cls, items: Sequence[Item], last_seq: int, pins: Iterable[int] = ()) -> Projection:
        """A projection that holds `items` as of seq `last_seq` (their keys must ascend), with
        the items `pins` pinned."""
        # One pass: a cold start holds a hundred thousand items spread over the heap, and
        # each pass over them waits on memory more than it computes.
        keys: list[int] = []
        key_of: dict[int, int] = {}
        messages: list[Message] = []
        for item in items:
            key = item.key
            keys.append(key)
            key_of[item.id] = key
            messages.append(item.message)
        return cls(last_seq, list(items), keys, key_of, set(pins), messages, False)

    @classmethod
    def of_columns(
        cls,
        items: list[Item],
        ids: list[int],
        keys: list[int],
        messages: list[Message],
        last_seq: int,
        pins: Iterable[int] = (),
    ) -> Projection:
        """`of_items` for a caller that holds each item's id, key and message already, in lists
        in the items' order: the lists are taken over, not copied, and no item is read."""
        return cls(last_seq, items, keys, dict(zip(ids, keys, strict=True)), set(pins), messages)

    def copy(self) -> Projection:
        """An independent copy, to check a batch against without touching this one."""
        return Projection(
            self.last_seq,
            list(self._items),
            list(self._keys),
            dict(self._key_of),
            set(self._pins),
            list(self._messages),
            False,
        )

    # -- reading ---------------------------------------------------------------------------
    @property
    def items(self) -> Frozen[Item]:
        """The projected items, as an immutable view: O(1), and it never changes afterwards."""
        self._shown = True
        return frozen(self._items)

    def ids(self) -> KeysView[int]:
        """The ids of the projected items, as a set-like view (in no promised order)."""
        return self._key_of.keys()

    def messages(self) -> Frozen[Message]:
        """The projected messages, as an immutable view: O(1), and it never changes afterwards."""
        self._shown = True
        return frozen(self._messages)

    def synthetic(self) -> frozenset[int]:
        return frozenset(i for i, item in enumerate(self._items) if item.synthetic)

    @property
    def pinned(self) -> frozenset[int]:
        """Ids of the items the application pinned that are still projected."""
        return frozenset(i for i in self._pins if self.position(i) is not None)

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
        """Raise `InvalidHistoryError` if appending `event` now would make an invalid history,
        or touch what the application pinned; `InvalidInputError` if its data cannot be read."""
        if event.type == MESSAGE:
            message = event.data.get("message")
            if not isinstance(message, Mapping):
                raise InvalidInputError(
                    f"a message event needs a 'message' object, not {message!r:.200}"
                )
            Message.from_dict(message)
        elif event.type == COMPACTION:
            compaction = Compaction.from_data(event.data)
            start, end = self._run_of(compaction)
            replacement = compaction.message
            if replacement.role == "tool" or replacement.tool_calls:
                raise InvalidHistoryError(
                    "a compaction must put a plain message in place, not a tool call or result"
                )
            if not replacement.content or not replacement.content.strip():
                # A message with no text is refused by providers: the view would stop being
                # valid from this edit on.
                raise InvalidHistoryError(
                    "a compaction must put a message with text in place (its summary or note), "
                    f"not one whose content is {replacement.content!r}"
                )
            what = f"compaction of items {compaction.first}..{compaction.last}"
            self._refuse_pinned(range(start, end + 1), what)
        elif event.type == MASK:
            targets = self._mask_targets(Mask.from_data(event.data))
            self._refuse_pinned([index for index, _ in targets], "mask")
        elif event.type == RETRACTION:
            self._retracted(Retraction.from_data(event.data))
        elif event.type in (PIN, UNPIN):
            ids = (Pin if event.type == PIN else Unpin).from_data(event.data).ids
            for item_id in ids:
                if self.position(item_id) is None:
                    raise InvalidHistoryError(
                        f"item {item_id!r} is not in the current projection; only projected "
                        f"items can be {event.type}ned"
                    )
        elif event.type == USAGE:
            Usage.from_data(event.data)
        elif event.type == OVERFLOW:
            Overflow.from_data(event.data)

    def _refuse_pinned(self, indices: Iterable[int], what: str) -> None:
        for index in indices:
            item_id = self._items[index].id
            if item_id in self._pins:
                raise InvalidHistoryError(
                    f"{what} would touch item {item_id}, which the application pinned; "
                    "unpin it first, or leave it out"
                )

    def _run_of(self, compaction: Compaction) -> tuple[int, int]:
        first, last = compaction.first, compaction.last
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
        replaced = compaction.replaced
        if replaced is not None and list(replaced) != [i.id for i in self._items[start : end + 1]]:
            raise InvalidHistoryError(
                f"compaction of items {first}..{last} is not contiguous in the current projection"
            )
        # Checked from the messages around the range alone: a batch of a thousand compactions
        # is checked, and then folded, one compaction at a time.
        messages, synthetic = self._messages, SyntheticAt(self._items)
        if in_system_block(messages, start, synthetic):
            raise InvalidHistoryError("the system block is never compacted")
        for bad in (start, end + 1):
            if not is_safe_cut(messages, bad, synthetic):
                raise InvalidHistoryError(
                    f"compaction of items {first}..{last} would split a tool call from its "
                    f"result (position {bad} is not a safe cut point)"
                )
        pending = pending_step(messages, synthetic)
        if pending is not None and start <= pending <= end:
            raise InvalidHistoryError(
                f"compaction of items {first}..{last} would drop a call that is still pending"
            )
        return start, end

    def _mask_targets(self, mask: Mask) -> list[tuple[int, str]]:
        out: list[tuple[int, str]] = []
        for entry in mask.items:
            index = self.position(entry.id)
            if index is None:
                raise InvalidHistoryError(f"mask names item {entry.id!r}, which is not projected")
            item = self._items[index]
            if item.message.role not in ("tool", "user") or item.synthetic:
                raise InvalidHistoryError(
                    f"mask names item {entry.id}, which is neither a tool result nor a user message"
                )
            out.append((index, entry.content))
        return out

    def _retracted(self, retraction: Retraction) -> int:
        """Where the retracted stretch starts; it runs to the end of the projection."""
        index = self.position(retraction.id)
        if index is None:
            raise InvalidHistoryError(
                f"item {retraction.id} is not in the current projection (compacted, retracted "
                "or never there); only a projected item can be retracted"
            )
        newest = len(self._items) - 1
        if index == newest:
            return index
        message = self._items[index].message
        if message.role == "assistant" and message.tool_calls:
            unit = analyze(self.messages(), self.synthetic()).unit_at(index)
            if unit.start == index and unit.end == len(self._items):
                return index  # the newest step, with its results
        raise InvalidHistoryError(
            f"item {retraction.id} is neither the newest item ({self._items[newest].id}) nor the "
            "start of the newest step; retracting it would leave an invalid history"
        )

    # -- folding ---------------------------------------------------------------------------
    def apply(self, event: Event, message: Message | None = None) -> Change:
        """Fold one stored event in. Events must come in seq order. `message`: the message of
        a message event, when the caller holds it (else it is read from the event's data)."""
        if event.seq <= self.last_seq:
            raise InvalidHistoryError(
                f"event {event.seq} arrived after {self.last_seq}; events fold in seq order"
            )
        self.last_seq = event.seq
        if event.type == MESSAGE:
            if message is None:
                message = event.message
            return Change(added=(self._add(event.seq, message),))
        if event.type == COMPACTION:
            return self._compact(event.seq, Compaction.from_data(event.data))
        if event.type == MASK:
            return self._mask(Mask.from_data(event.data))
        if event.type == RETRACTION:
            retraction = Retraction.from_data(event.data)
            return self._remove_from(self._retracted(retraction))
        if event.type == RESET:
            self._pins.clear()
            return self._remove_from(0)
        if event.type == PIN:
            self._pins.update(Pin.from_data(event.data).ids)
        elif event.type == UNPIN:
            self._pins.difference_update(Unpin.from_data(event.data).ids)
        return Change()

    def add_message(self, seq: int, message: Message) -> Item:
        """Fold in the message event at `seq` (after every seq folded so far), whose message
        is `message`; what `apply` does for it, without building a `Change`."""
        if seq <= self.last_seq:
            raise InvalidHistoryError(
                f"event {seq} arrived after {self.last_seq}; events fold in seq order"
            )
        self.last_seq = seq
        return self._add(seq, message)

    def add_messages(self, first: int, messages: Sequence[Message]) -> list[Item]:
        """`add_message` for the message events at `first`, `first + 1`, ... whose messages are
        `messages`: one batch of appends, folded with a few list extensions."""
        if first <= self.last_seq:
            raise InvalidHistoryError(
                f"event {first} arrived after {self.last_seq}; events fold in seq order"
            )
        seqs = range(first, first + len(messages))
        items = [original_item(seq, message) for seq, message in zip(seqs, messages, strict=True)]
        self._items.extend(items)
        self._messages.extend(messages)
        self._keys.extend(seqs)
        self._key_of.update(zip(seqs, seqs, strict=True))
        if items:
            self.last_seq = seqs[-1]
        return items

    def _add(self, seq: int, message: Message) -> Item:
        item = original_item(seq, message)
        self._items.append(item)
        self._messages.append(message)
        self._keys.append(seq)
        self._key_of[seq] = seq
        return item

    def _compact(self, seq: int, compaction: Compaction) -> Change:
        start, end = self._run_of(compaction)
        removed = tuple(self._items[start : end + 1])
        covers = (removed[0].span[0], removed[-1].span[1])
        held = compaction.identifiers.held if compaction.identifiers is not None else None
        item = Item(
            seq, compaction.message, compaction.kind, removed[0].key, covers, None, held,
            joined_ledger(compaction.ledger, [r.ledger for r in removed]),
        )  # fmt: skip
        if self._shown:
            self._rebuilt(list(self._items), list(self._messages))
        self._items[start : end + 1] = [item]
        self._messages[start : end + 1] = [item.message]
        self._keys[start : end + 1] = [item.key]
        for gone in removed:
            del self._key_of[gone.id]
        self._key_of[item.id] = item.key
        tokens = {} if compaction.tokens_after is None else {item.id: compaction.tokens_after}
        return Change(removed, (item,), True, compaction.counter, tokens)

    def _mask(self, mask: Mask) -> Change:
        removed: list[Item] = []
        added: list[Item] = []
        items = list(self._items)
        for index, content in self._mask_targets(mask):
            old = items[index]
            # Provider fields stay (an Anthropic is_error, say); the adapters write kept
            # content parts back only while they still match the text.
            new = Item(
                old.id,
                old.message.replace(content=content),
                old.kind,
                old.key,
                original=old.unmasked,
            )
            items[index] = new
            removed.append(old)
            added.append(new)
        self._rebuilt(items)
        tokens = {i.id: i.tokens for i in mask.items if i.tokens is not None}
        return Change(tuple(removed), tuple(added), True, mask.counter, tokens)

    def _remove_from(self, start: int) -> Change:
        removed = tuple(self._items[start:])
        self._rebuilt(self._items[:start])
        del self._keys[start:]
        for gone in removed:
            del self._key_of[gone.id]
            self._pins.discard(gone.id)
        return Change(removed=removed, edit=bool(removed))

    def _rebuilt(self, items: list[Item], messages: list[Message] | None = None) -> None:
        # New lists, never an edit in place: views handed out earlier keep what they showed.
        self._items = items
        self._messages = [item.message for item in items] if messages is None else messages
        self._shown = False

    def extend(self, events: Iterable[Event]) -> list[Change]:
        return [self.apply(event) for event in events]
