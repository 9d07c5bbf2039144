"""Checkpoints: a session's projection kept in the store, so a new process need not fold the log.

A checkpoint is derived data (the store calls it a snapshot, `StoreBase.save_snapshot`). It holds
the projection as of a seq: each item, the item's token count and the name of the counter that
made it, the pins, the overflow count, and the provider report that still describes the view.
An original message that nothing changed is stored as a reference to its event (the log holds
it already); summaries, notes and masked results are stored whole (a masked result's original,
again, as a reference). `load` reads the checkpoint,
the events it refers to, and nothing else of what came before it; the session then folds the
events after it.

Losing a checkpoint, or finding it unreadable, costs speed and changes no result
(`checkpoints-are-derived`): anything wrong with it (not JSON, another format, a seq beyond the
log, a reference to an event that is not a message, a shape out of place) makes `load` return
None, and the session folds the log from the start. A count made by a counter of another name is
not used; the item is counted again.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeGuard

from ctxfold._memo import IdentityMemo
from ctxfold.errors import InvalidInputError
from ctxfold.events import MESSAGE, LedgerParts
from ctxfold.messages import Message
from ctxfold.session.fold import Anchor, Fold
from ctxfold.session.projection import Item, Projection, original_item
from ctxfold.storage.base import StoreBase
from ctxfold.storage.checks import PAGE_SIZE
from ctxfold.tokens.tally import Tally

log = logging.getLogger("ctxfold.session")

FORMAT = 3
"""The checkpoint layout this version writes and reads; a checkpoint of any other is ignored.
Format 2 keeps each summary's and note's recorded work ledger (`Item.ledger`) too; format 3
writes a ledger kept in parts (`LedgerParts`) as the list of their data."""

KINDS = ("message", "summary", "note")


def encode(fold: Fold) -> str:
    """The checkpoint of `fold`, as JSON text."""
    return Encoder().encode(fold)


class Encoder:
    """Writes the checkpoints of one session. While the projection has only grown at its end
    since the last checkpoint (appends, no compaction, mask, retraction or reset) and the same
    tally counts it, the items encoded then are reused as text: a checkpoint every N appends
    then costs O(N), not a pass over a hundred thousand items each time."""

    def __init__(self) -> None:
        self._basis: tuple[Fold, Tally | None, str | None, int] | None = None
        self._done = 0
        self._chunks: list[str] = []

    def encode(self, fold: Fold) -> str:
        """The checkpoint of `fold`, as JSON text: the same text `encode` gives."""
        items = fold.projection.items
        basis = (fold, fold.tally, fold.known_counter, fold.reshapes)
        if (
            self._basis is None
            or any(a is not b for a, b in zip(self._basis, basis, strict=True))
            or self._done > len(items)
        ):
            self._basis, self._done, self._chunks = basis, 0, []
        new = items[self._done :]
        if new:
            tally = fold.tally
            known = fold.known
            altered = fold.altered
            parts = []
            for item in new:
                tokens = tally.count(item.id) if tally is not None else known.get(item.id)
                if (
                    item.kind == "message"
                    and item.covers is None
                    and item.id not in altered
                    and (tokens is None or type(tokens) is int)
                ):
                    # What `_entry` and `_dumps` give such an item, without building either:
                    # nearly every item is one, and a checkpoint writes thousands at a time.
                    parts.append(f"[{item.id},{'null' if tokens is None else tokens}]")
                else:
                    parts.append(_entry_text(item, tokens, item.id in altered))
            self._chunks.append(",".join(parts))
            self._done = len(items)
        counter = fold.tally.counter.name if fold.tally is not None else fold.known_counter
        anchor = fold.anchor
        rest = {
            "pins": sorted(fold.projection.pinned),
            "last_edit": fold.last_edit_seq,
            "overflows": fold.overflows,
            "anchor": None
            if anchor is None
            else [anchor.seq, anchor.after_seq, anchor.prompt_tokens],
        }
        head = _dumps({"format": FORMAT, "seq": fold.projection.last_seq, "counter": counter})
        return f'{head[:-1]},"items":[{",".join(self._chunks)}],{_dumps(rest)[1:]}'


def _entry_text(item: Item, tokens: int | None, altered: bool) -> str:
    """`_dumps` of the entry of `item` (`_entry`), remembered by the item's identity: a summary
    stays in the view compaction after compaction, and each checkpoint writes it again."""
    return _ENTRIES.get((item,), lambda: _dumps_entry(item, tokens, altered), (tokens, altered))


def _dumps_entry(item: Item, tokens: int | None, altered: bool) -> str:
    entry = _entry(item, tokens, altered)
    if len(entry) == 2 or not isinstance(item.ledger, LedgerParts):
        return _dumps(entry)
    # The ledger in parts, each part's text remembered: the parts of the newest summary are
    # mostly those of the one before it, by reference, and together they span the session.
    # A JSON list is its items' texts joined by ",", so the text is the one `_dumps` gives.
    ledger = ",".join(_leaf_text(leaf) for leaf in item.ledger.leaves())
    return f"{_dumps(entry[:-1])[:-1]},[{ledger}]]"


def _leaf_text(leaf: Mapping[str, Any]) -> str:
    return _LEAVES.get((leaf,), lambda: _dumps(dict(leaf)))


def _entry(item: Item, tokens: int | None, altered: bool) -> list[Any]:
    """The entry of `item` in a checkpoint; a ledger kept in parts is left for the caller."""
    if item.kind == "message" and item.covers is None and not altered:
        return [item.id, tokens]
    covers = list(item.covers) if item.covers is not None else None
    message = item.message.to_dict()
    # A masked result's original is its own event's message: referred to, not copied.
    masked = item.original is not None
    held = list(item.identifiers) if item.identifiers is not None else None
    ledger = dict(item.ledger) if isinstance(item.ledger, Mapping) else None
    return [item.id, tokens, item.kind, item.key, covers, message, masked, held, ledger]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# Items and recorded ledger parts are immutable: their text never goes stale.
_ENTRIES: IdentityMemo[str] = IdentityMemo(maxsize=4_096)
_LEAVES: IdentityMemo[str] = IdentityMemo(maxsize=16_384)


def load(store: StoreBase, session_id: str) -> Fold | None:
    """The session's state as of its checkpoint, or None when there is none or it cannot be
    used (see the module docstring)."""
    found = store.load_snapshot(session_id)
    if found is None:
        return None
    seq, data = found
    try:
        return _restore(store, session_id, seq, data)
    except (InvalidInputError, ValueError, TypeError, KeyError, IndexError, RecursionError) as exc:
        log.info("ctxfold: not using the checkpoint of %r at seq %s: %s", session_id, seq, exc)
        return None


def _restore(store: StoreBase, session_id: str, seq: int, data: str) -> Fold:
    last = store.last_seq(session_id)
    if seq > last:
        raise InvalidInputError(f"it reflects seq {seq}, beyond the log's last seq {last}")
    raw = json.loads(data)
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        got = raw.get("format") if isinstance(raw, dict) else type(raw).__name__
        raise InvalidInputError(f"format {got!r} is not {FORMAT}")
    if raw.get("seq") != seq:
        raise InvalidInputError(f"it says seq {raw.get('seq')!r}, the store says {seq}")
    counter = raw.get("counter")
    if counter is not None and not isinstance(counter, str):
        raise InvalidInputError(f"counter {counter!r} is not a name")
    entries = raw.get("items")
    if not isinstance(entries, list):
        raise InvalidInputError("items is not a list")
    originals = _Originals(store, session_id, seq)
    message_of = originals.message
    # The projection's columns are gathered here, while each item is at hand: a pass over a
    # hundred thousand items afterwards would wait on memory more than it computes.
    built: list[Item | None] = []
    ids: list[int] = []
    keys: list[int] = []
    messages: list[Message] = []
    counts: dict[int, int] = {}
    altered: set[int] = set()
    key = 0
    for entry in entries:
        # A reference to an original message event, ``[seq, tokens]``: checked inline, without
        # a call per item, since a cold start reads a hundred thousand of them.
        if type(entry) is list and len(entry) == 2 and type(entry[0]) is int:
            item_id = item_key = entry[0]
            message = message_of(item_id)
            item = None
        else:
            item = _item(entry, seq, message_of)
            item_id, item_key, message = item.id, item.key, item.message
            if item.kind == "message":
                altered.add(item_id)
        if item_key <= key:
            raise InvalidInputError(f"item {item_id} is out of order")
        key = item_key
        built.append(item)
        ids.append(item_id)
        keys.append(key)
        messages.append(message)
        tokens = entry[1]
        if tokens is not None:
            if type(tokens) is not int or tokens < 0:  # `_count`, inline
                raise InvalidInputError(f"item {item_id} has a count of {tokens!r}")
            counts[item_id] = tokens
    pins = raw.get("pins")
    projected = set(ids) if pins else set()
    if not isinstance(pins, list) or not all(_seq(p) and p in projected for p in pins):
        raise InvalidInputError(f"pins {pins!r} are not projected items")
    # The items of original messages are made together, after the reading: side by side in
    # memory, as the items a log's fold makes are, so every later pass over them is quick.
    items = [
        original_item(i, m) if item is None else item
        for item, i, m in zip(built, ids, messages, strict=True)
    ]
    fold = Fold(Projection.of_columns(items, ids, keys, messages, seq, pins))
    fold.last_edit_seq = _field(raw, "last_edit", seq)
    fold.overflows = _field(raw, "overflows", None)
    fold.anchor = _anchor(raw.get("anchor"), seq)
    fold.altered = altered
    if counter is not None:
        fold.known, fold.known_counter = counts, counter
    return fold


class _Originals:
    """The messages of original events, asked for in ascending seqs up to `seq`, reading little
    else: a stream opens at the first one asked for, and goes on across gaps shorter than a
    page; a longer gap (what a compaction covers) opens a new one past it."""

    def __init__(self, store: StoreBase, session_id: str, seq: int) -> None:
        self._store = store
        self._session_id = session_id
        self._seq = seq
        self._asked = 0
        self._rows: Iterator[tuple[int, str, Any]] = iter(())
        self._read = -PAGE_SIZE  # the last seq read: none yet, so the first ask opens a stream

    def message(self, want: int) -> Message:
        """The message of the event at seq `want`; refuses a seq that is not after the last
        one asked for, is beyond `seq`, or is not a message event in the log."""
        if not self._asked < want <= self._seq:
            raise InvalidInputError("its references are not ascending seqs within the log")
        self._asked = want
        if want - self._read > PAGE_SIZE:
            self._rows = self._store.stream_data(self._session_id, after=want - 1)
        for event_seq, event_type, data in self._rows:
            self._read = event_seq
            if event_seq < want:
                continue
            message = data.get("message") if event_type == MESSAGE else None
            if event_seq > want or not isinstance(message, dict):
                raise InvalidInputError(f"event {want} is not a message event")
            return Message.from_dict(message)
        raise InvalidInputError(f"event {want} is missing from the log")


def _item(entry: object, seq: int, original_of: Callable[[int], Message]) -> Item:
    """An item stored whole: ``[id, tokens, kind, key, covers, message, masked, identifiers,
    ledger]``, where `masked` says the item's original is the message of its own event."""
    if not isinstance(entry, list) or len(entry) != 9:
        raise InvalidInputError(f"item {entry!r:.80} has the wrong shape")
    item_id, _, kind, key, covers, message, masked, held, ledger = entry
    if not _seq(item_id) or item_id > seq or kind not in KINDS or not _seq(key):
        raise InvalidInputError(f"item {entry!r:.80} has the wrong shape")
    if not isinstance(masked, bool) or (masked and kind != "message"):
        raise InvalidInputError(f"item {item_id} says masked={masked!r}")
    if held is not None and (
        not isinstance(held, list) or not all(isinstance(h, str) for h in held)
    ):
        raise InvalidInputError(f"item {item_id} holds identifiers {held!r:.80}")
    span: tuple[int, int] | None = None
    if covers is not None:
        if not isinstance(covers, list) or len(covers) != 2 or not all(map(_seq, covers)):
            raise InvalidInputError(f"item {item_id} covers {covers!r}")
        span = (covers[0], covers[1])
    if not isinstance(message, dict):
        raise InvalidInputError(f"item {item_id} has no message")
    if isinstance(ledger, list) and ledger and all(isinstance(part, dict) for part in ledger):
        ledger = LedgerParts(tuple(ledger)) if len(ledger) > 1 else ledger[0]
    elif ledger is not None and not isinstance(ledger, dict):
        raise InvalidInputError(f"item {item_id} has a ledger of {ledger!r:.80}")
    original = original_of(item_id) if masked else None
    identifiers = tuple(held) if held is not None else None
    message_value = Message.from_dict(message)
    return Item(item_id, message_value, kind, key, span, original, identifiers, ledger)


def _anchor(value: object, seq: int) -> Anchor | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 3 or not all(map(_count, value)):
        raise InvalidInputError(f"anchor {value!r} has the wrong shape")
    at, after, prompt = value
    if at > seq:
        raise InvalidInputError(f"anchor {value!r} is beyond seq {seq}")
    return Anchor(at, after, prompt)


def _field(raw: dict[str, Any], key: str, most: int | None) -> int:
    value = raw.get(key)
    if not _count(value) or (most is not None and value > most):
        raise InvalidInputError(f"{key} is {value!r}")
    return value


def _seq(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


__all__ = ["FORMAT", "encode", "load"]
