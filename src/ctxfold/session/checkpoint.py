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

import dataclasses
import json
import logging
from collections.abc import Mapping
from typing import Any, TypeGuard

from ctxfold._memo import IdentityMemo
from ctxfold.errors import InvalidInputError
from ctxfold.events import LedgerParts
from ctxfold.messages import Message
from ctxfold.session.fold import Anchor, Fold
from ctxfold.session.originals import logged_messages
from ctxfold.session.projection import Item, Projection, original_item
from ctxfold.storage.base import StoreBase
from ctxfold.tokens.tally import Tally

log = logging.getLogger("ctxfold.session")

FORMAT = 4
"""The checkpoint layout this version writes; it reads `READABLE`, and ignores any other.
Format 2 keeps each summary's and note's recorded work ledger (`Item.ledger`) too; format 3
writes a ledger kept in parts (`LedgerParts`) as the list of their data; format 4 writes a run
of originals with consecutive seqs as one entry, ``[first seq, [count, count, ...]]``, where
format 3 wrote ``[seq, count]`` for each (a cold start then reads one list of counts, not ten
thousand small lists)."""

READABLE = (3, 4)
"""The formats `load` reads: a format 3 checkpoint differs only in writing each original
apart, which this version reads too."""

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
        """The text of the entries written so far, before the open run, in pieces."""
        # The open run: the originals from `_first` up to `_next` (excluded), the last entries
        # written, whose counts' text is `_counts` in pieces. Appends go on extending it.
        self._first = 0
        self._next = 0
        self._counts: list[str] = []

    def encode(self, fold: Fold) -> str:
        """The checkpoint of `fold`, as JSON text: the same text `encode` gives."""
        items = fold.projection.items
        basis = (fold, fold.tally, fold.known_counter, fold.reshapes)
        if (
            self._basis is None
            or any(a is not b for a, b in zip(self._basis, basis, strict=True))
            or self._done > len(items)
        ):
            self._basis, self._done, self._chunks, self._counts = basis, 0, [], []
            self._first = self._next = 0
        new = items[self._done :]
        if new:
            tally = fold.tally
            known = fold.known
            altered = fold.altered
            parts: list[str] = []
            run, first, following = self._counts, self._first, self._next
            counts: list[str] = []  # the open run's counts met in this call
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
                    if item.id != following or not (run or counts):
                        if run or counts:
                            parts.append(_run_text(first, run, counts))
                        run, counts, first = [], [], item.id
                    counts.append("null" if tokens is None else str(tokens))
                    following = item.id + 1
                else:
                    if run or counts:
                        parts.append(_run_text(first, run, counts))
                        run, counts = [], []
                    parts.append(_entry_text(item, tokens, item.id in altered))
            if parts:
                self._chunks.append(",".join(parts))
            if counts:
                run = [*run, ",".join(counts)]
            self._counts, self._first, self._next = run, first, following
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
        entries = self._chunks
        if self._counts:
            entries = [*entries, _run_text(self._first, self._counts, [])]
        return f'{head[:-1]},"items":[{",".join(entries)}],{_dumps(rest)[1:]}'


def _run_text(first: int, pieces: list[str], counts: list[str]) -> str:
    """The entry of a run of originals from seq `first`, whose counts' text is `pieces` and then
    `counts`."""
    text = ",".join([*pieces, ",".join(counts)] if counts else pieces)
    return f"[{first},[{text}]]"


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
    if not isinstance(raw, dict) or raw.get("format") not in READABLE:
        got = raw.get("format") if isinstance(raw, dict) else type(raw).__name__
        raise InvalidInputError(f"format {got!r} is not one of {READABLE}")
    if raw.get("seq") != seq:
        raise InvalidInputError(f"it says seq {raw.get('seq')!r}, the store says {seq}")
    counter = raw.get("counter")
    if counter is not None and not isinstance(counter, str):
        raise InvalidInputError(f"counter {counter!r} is not a name")
    entries = raw.get("items")
    if not isinstance(entries, list):
        raise InvalidInputError("items is not a list")
    # The projection's columns are gathered here, while each item is at hand: a pass over a
    # hundred thousand items afterwards would wait on memory more than it computes. The logged
    # messages the entries refer to (an original's, a masked result's before its mask) are
    # read afterwards, in one go (`ctxfold.session.originals`).
    built: list[Item | None] = []
    ids: list[int] = []
    keys: list[int] = []
    counts: dict[int, int] = {}
    altered: set[int] = set()
    wanted: list[int] = []
    masked: list[int] = []
    key = 0
    for entry in entries:
        # References to original message events: a run ``[first seq, [tokens, ...]]`` (format
        # 4) or one ``[seq, tokens]`` (format 3), checked inline, without a call per item, since
        # a cold start reads a hundred thousand of them.
        if type(entry) is list and len(entry) == 2 and type(entry[0]) is int:
            item_id = item_key = entry[0]
            tail = entry[1]
            if type(tail) is list:
                size = len(tail)
                if item_id <= key or not size:
                    raise InvalidInputError(f"the run of items from {item_id} is out of order")
                if not all(t is None or (type(t) is int and t >= 0) for t in tail):
                    raise InvalidInputError(f"the run of items from {item_id} has a bad count")
                run = range(item_id, item_id + size)
                wanted.extend(run)
                ids.extend(run)
                keys.extend(run)
                built.extend([None] * size)
                if None in tail:
                    counts.update((i, t) for i, t in zip(run, tail, strict=True) if t is not None)
                else:
                    counts.update(zip(run, tail, strict=True))
                key = run[-1]
                continue
            wanted.append(item_id)
            item = None
        else:
            item, masks = _item(entry, seq)
            item_id, item_key = item.id, item.key
            if item.kind == "message":
                altered.add(item_id)
            if masks:
                wanted.append(item_id)
                masked.append(len(built))
        if item_key <= key:
            raise InvalidInputError(f"item {item_id} is out of order")
        key = item_key
        built.append(item)
        ids.append(item_id)
        keys.append(key)
        tokens = entry[1]
        if tokens is not None:
            if type(tokens) is not int or tokens < 0:  # `_count`, inline
                raise InvalidInputError(f"item {item_id} has a count of {tokens!r}")
            counts[item_id] = tokens
    logged = logged_messages(store, session_id, seq, wanted)
    if not masked and len(logged) == len(built):
        messages = logged  # every item an original: the usual checkpoint
    else:
        messages = _merged(built, logged, masked)
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


def _item(entry: object, seq: int) -> tuple[Item, bool]:
    """An item stored whole: ``[id, tokens, kind, key, covers, message, masked, identifiers,
    ledger]``, and `masked`, which says the item's original is the message of its own event
    (the caller reads it, and sets it)."""
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
    identifiers = tuple(held) if held is not None else None
    message_value = Message.from_dict(message)
    return Item(item_id, message_value, kind, key, span, None, identifiers, ledger), masked


def _merged(built: list[Item | None], logged: list[Message], masked: list[int]) -> list[Message]:
    """The projection's messages, `logged` standing in order for the originals (None in
    `built`) and for the items at `masked`, which get theirs as `original`."""
    messages: list[Message] = []
    read = iter(logged)
    masks = set(masked)
    for index, item in enumerate(built):
        if item is None:
            messages.append(next(read))
            continue
        if index in masks:
            item = built[index] = dataclasses.replace(item, original=next(read))
        messages.append(item.message)
    return messages


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


__all__ = ["FORMAT", "READABLE", "encode", "load"]
