"""Events: the entries of a session's append-only log, and the typed payloads ctxfold reads back.

An `Event` is what a store returns (it has a seq); a `NewEvent` is what a caller appends (the store
assigns the seq). Each event type ctxfold reads has a frozen payload class with `to_data()` (the
JSON object stored as the event's data) and `from_data()` (its inverse, which also reads every log
an earlier version wrote):

- ``message``: one `Message`, stored as ``{"message": {...}}``;
- ``compaction`` (`Compaction`): replaces the contiguous run of projected items from `first` to
  `last` (item ids) with one message, where the run stood;
- ``mask`` (`Mask`): replaces the content of tool results (keeping their call ids) or of user
  messages;
- ``retraction`` (`Retraction`): takes the newest item (or the newest whole step) back out of the
  projection, as a framework's ``pop_item`` does;
- ``reset`` (`Reset`): empties the projection, as a framework's ``clear_session`` does; later
  messages project after it as usual, and pins are cleared;
- ``pin`` / ``unpin`` (`Pin`, `Unpin`): keep items out of every strategy's reach, or release them;
- ``usage`` (`Usage`): the provider's prompt-token count for the request sent after a seq;
- ``overflow`` (`Overflow`): the provider refused the request sent after a seq as too long.

Every other type (``turn``, ``app/...``) is stored and returned, never read. Nothing is ever
deleted from a log: a retraction or a reset changes what is projected, not what is kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeAlias, TypeGuard

from ctxfold.errors import InvalidInputError
from ctxfold.messages import Message

MESSAGE = "message"
COMPACTION = "compaction"
MASK = "mask"
RETRACTION = "retraction"
RESET = "reset"
PIN = "pin"
UNPIN = "unpin"
USAGE = "usage"
OVERFLOW = "overflow"

EDITS = frozenset({COMPACTION, MASK, RETRACTION, RESET})
"""Types that change items already projected (not just add one at the end)."""
PROJECTED = frozenset({MESSAGE}) | EDITS
"""Types the projection folds into its items."""
RESHAPING = EDITS | {PIN, UNPIN}
"""Types that change what a compaction planned earlier may touch: after one of them, a plan
must be made again from the log as it now stands."""

CompactionKind = Literal["summary", "note"]

LEDGER_PARTS = 2
"""The `version` of a compaction's ledger data that lists its parts (see `Compaction`)."""


@dataclass(frozen=True, eq=False)
class LedgerParts:
    """A recorded work ledger kept as the parts it is the merge of, in log order: data of the
    ledger of a run of original messages, or the recorded ledger of an item a compaction
    replaced (itself data, or parts).

    A summary that takes in summaries or notes holds their ledgers by reference. Recording, and
    holding, a copy of them each time made a long session's log and its projection grow with
    the square of its length. Merging is for the layers that know ledgers
    (`ctxfold.pipeline.ledgers`); `leaves` gives the data of every part, in order."""

    parts: tuple[Mapping[str, Any] | LedgerParts, ...]

    def leaves(self) -> list[Mapping[str, Any]]:
        """The data of every part, nested parts opened, in order (a loop, not recursion: parts
        nest as deep as a session has compactions)."""
        out: list[Mapping[str, Any]] = []
        stack: list[Mapping[str, Any] | LedgerParts] = [self]
        while stack:
            node = stack.pop()
            if isinstance(node, LedgerParts):
                stack.extend(reversed(node.parts))
            else:
                out.append(node)
        return out


RecordedLedger: TypeAlias = Mapping[str, Any] | LedgerParts
"""A ledger as a compaction's item holds it: data, or parts."""


def joined_ledger(
    data: Mapping[str, Any] | None, replaced: Sequence[RecordedLedger | None]
) -> RecordedLedger | None:
    """The ledger of the item a compaction puts in place, from its `data` and the ledgers of
    the items it replaces, in order: `data` itself, or, for data that lists parts
    (`LEDGER_PARTS`), those parts with each ``{"item": k}`` taken from ``replaced[k]``. A part
    that names no replaced item holding a ledger (a log edited by hand) is left out: the
    ledger is derived data, and loses entries rather than the compaction."""
    if data is None or data.get("version") != LEDGER_PARTS:
        return data
    listed = data.get("parts")
    parts: list[RecordedLedger] = []
    for part in listed if isinstance(listed, list) else ():
        if not isinstance(part, Mapping):
            continue
        if "item" not in part:
            parts.append(part)
            continue
        k = part["item"]
        found = replaced[k] if _is_int(k) and 0 <= k < len(replaced) else None
        if found is not None:
            parts.append(found)
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else LedgerParts(tuple(parts))


@dataclass(frozen=True)
class NewEvent:
    """An event to append; the store gives it a seq and a time."""

    type: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Whether `data` is JSON is checked once, when a store encodes the batch, before it
        # writes anything.
        if not self.type or not isinstance(self.type, str):
            raise InvalidInputError(f"an event needs a non-empty string type, not {self.type!r}")

    @classmethod
    def message(cls, message: Message) -> NewEvent:
        return cls(MESSAGE, {"message": message.to_dict()})

    @classmethod
    def of(cls, payload: Payload) -> NewEvent:
        """The event that stores `payload`: ``NewEvent.of(Pin((12,)))``."""
        return cls(payload.type, payload.to_data())


@dataclass(frozen=True)
class FreshEvent(NewEvent):
    """A `NewEvent` whose data nothing else holds and that is plain JSON already: dicts with
    string keys, lists, strings, numbers (no NaN), booleans and None, nothing else (no tuple,
    no other mapping).

    A store hands such data back as the stored event's data, rather than decoding the JSON
    text it has just written: the two are equal, and the caller cannot change the log through
    either. The session layer makes these for the messages it builds the data of itself
    (`Message.to_dict` of a message without `extra`); anything else should append a plain
    `NewEvent`, whose data the store gives back as a copy."""


@dataclass(frozen=True)
class Event:
    """One stored entry of a session's log. `seq` is 1, 2, 3 … contiguous per session;
    `created_at` is seconds since the epoch (UTC)."""

    session_id: str
    seq: int
    type: str
    data: Mapping[str, Any]
    created_at: float

    @property
    def message(self) -> Message:
        """The message of a ``message`` event (or the replacement message of a ``compaction``)."""
        if self.type not in (MESSAGE, COMPACTION):
            raise InvalidInputError(f"event {self.seq} is a {self.type!r} event, not a message")
        return Message.from_dict(_get(self.data, "message", Mapping, self.type))

    @property
    def payload(self) -> Payload | None:
        """The typed payload of a type ctxfold reads; None for messages and for any other type."""
        kind = PAYLOADS.get(self.type)
        return kind.from_data(self.data) if kind is not None else None


# -- payloads ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class IdentifierCounts:
    """How the identifier check went for one summary: identifiers found in it (`kept`), added to
    it because the summarizer left them out (`added`), and left out for lack of room.

    `held` lists the identifiers of the stretch the summary holds verbatim (None in logs written
    before it was recorded). A later summary that combines this one accounts for exactly these,
    whatever the summary's format (`identifiers-survive`)."""

    kept: int = 0
    added: int = 0
    left_out: tuple[str, ...] = ()
    held: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Compaction:
    """One message in place of the contiguous run of items `first` … `last` (item ids).

    - `message`: what the run becomes; a plain message (no tool call, no tool result).
    - `kind`: "summary" (a summarizer wrote it) or "note" (it says what was dropped).
    - `strategy`: the strategy that made it ("summarize", "sliding_window", "callback", ...).
    - `replaced`: every item id of the run, when given; the append is refused unless the run is
      exactly these items, so an edit planned on another history cannot land.
    - `covers`: the first and last original seqs the message stands for (for recall).
    - `tokens_before`, `tokens_after`: the run's tokens and the message's, in the compactor's
      counter units.
    - `tier`, `identifiers`, `summarizer`: for summaries, the round of the ladder that asked
      ("turns", "summaries", "steps", "task-summaries", "range"; "ledger" for a summary put
      back with its work ledger section taken out or made smaller, which no summarizer
      wrote), how the identifier check went, and the summarizer's model.
    - `dropped`, `turns`: for notes, how many items and user turns were dropped.
    - `range`: for a callback's range, the `[start, stop)` positions it named.
    - `ledger`: the work ledger of what the message stands for, as JSON data
      (`ctxfold.summarizers.ledger.to_data`), so that a later compaction over it merges ledgers
      rather than reading the summary's prose; None in logs written before it was recorded.
      Data of version `LEDGER_PARTS` lists the parts the ledger is the merge of: the data of
      a run of originals, or ``{"item": k}`` for the recorded ledger of the k-th item replaced
      (`joined_ledger`), so that a summary taking in summaries does not copy their ledgers.
    - `counter`: the name of the counter `tokens_before` and `tokens_after` were counted with; a
      session whose tally counts with a counter of that name takes the message's tokens from
      `tokens_after` instead of counting it again.
    """

    type: ClassVar[str] = COMPACTION

    first: int
    last: int
    message: Message
    kind: CompactionKind = "summary"
    strategy: str = ""
    replaced: tuple[int, ...] | None = None
    covers: tuple[int, int] | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    tier: str | None = None
    identifiers: IdentifierCounts | None = None
    summarizer: str | None = None
    dropped: int | None = None
    turns: int | None = None
    range: tuple[int, int] | None = None
    counter: str | None = None
    ledger: Mapping[str, Any] | None = field(default=None, compare=False)

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "first": self.first,
            "last": self.last,
            "message": self.message.to_dict(),
            "kind": self.kind,
            "strategy": self.strategy,
        }
        if self.replaced is not None:
            data["replaced"] = list(self.replaced)
        if self.covers is not None:
            data["covers"] = list(self.covers)
        if self.identifiers is not None:
            ids = self.identifiers
            data["identifiers"] = {
                "kept": ids.kept,
                "added": ids.added,
                "left_out": list(ids.left_out),
            }
            if ids.held is not None:
                data["identifiers"]["held"] = list(ids.held)
        for key in (
            "tokens_before",
            "tokens_after",
            "tier",
            "summarizer",
            "dropped",
            "turns",
            "counter",
        ):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        if self.range is not None:
            data["range"] = list(self.range)
        if self.ledger is not None:
            data["ledger"] = dict(self.ledger)
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Compaction:
        what = COMPACTION
        first, last = data.get("first"), data.get("last")
        if not _is_int(first) or not _is_int(last):
            raise InvalidInputError(
                f"a compaction needs integer 'first' and 'last' item ids, got {first!r}, {last!r}"
            )
        replaced = data.get("replaced")
        identifiers = _opt(data, "identifiers", Mapping, what)
        return cls(
            first=first,
            last=last,
            message=Message.from_dict(_get(data, "message", Mapping, what)),
            # The first format treated every kind but "note" as a summary.
            kind="note" if data.get("kind") == "note" else "summary",
            strategy=_opt(data, "strategy", str, what) or "",
            replaced=None if replaced is None else _ints(replaced, "replaced", what),
            covers=_pair(data, "covers", what),
            tokens_before=_opt(data, "tokens_before", int, what),
            tokens_after=_opt(data, "tokens_after", int, what),
            tier=_opt(data, "tier", str, what),
            identifiers=None if identifiers is None else _identifier_counts(identifiers),
            summarizer=_opt(data, "summarizer", str, what),
            dropped=_opt(data, "dropped", int, what),
            turns=_opt(data, "turns", int, what),
            range=_pair(data, "range", what),
            ledger=_opt(data, "ledger", Mapping, what),
            counter=_opt(data, "counter", str, what),
        )


@dataclass(frozen=True)
class MaskedItem:
    """One tool result or user message whose content a mask replaces with `content` (a
    placeholder, or a shortened text); `tokens`, when known, is the masked message's count in
    the units of the mask's `counter`."""

    id: int
    content: str
    tokens: int | None = None


@dataclass(frozen=True)
class Mask:
    """New content for tool results or user messages, in place; roles and call ids stay, so the
    history stays valid.

    `tokens_saved` is what the masked items gave up, in the compactor's counter units; `counter`
    names that counter (see `Compaction.counter`)."""

    type: ClassVar[str] = MASK

    items: tuple[MaskedItem, ...]
    strategy: str = ""
    tokens_saved: int | None = None
    counter: str | None = None

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "items": [_masked_data(i) for i in self.items],
            "strategy": self.strategy,
        }
        if self.tokens_saved is not None:
            data["tokens_saved"] = self.tokens_saved
        if self.counter is not None:
            data["counter"] = self.counter
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Mask:
        entries = data.get("items")
        if not isinstance(entries, list) or not entries:
            raise InvalidInputError("a mask needs a non-empty list of {id, content} items")
        items = []
        for entry in entries:
            item_id = entry.get("id") if isinstance(entry, Mapping) else None
            content = entry.get("content") if isinstance(entry, Mapping) else None
            if not _is_int(item_id) or not isinstance(content, str):
                raise InvalidInputError(
                    f"a mask item needs an integer id and text content, not {entry!r}"
                )
            tokens = entry.get("tokens")
            items.append(MaskedItem(item_id, content, tokens if _is_int(tokens) else None))
        return cls(
            tuple(items),
            strategy=_opt(data, "strategy", str, MASK) or "",
            tokens_saved=_opt(data, "tokens_saved", int, MASK),
            counter=_opt(data, "counter", str, MASK),
        )


def _masked_data(item: MaskedItem) -> dict[str, Any]:
    data: dict[str, Any] = {"id": item.id, "content": item.content}
    if item.tokens is not None:
        data["tokens"] = item.tokens
    return data


@dataclass(frozen=True)
class Retraction:
    """Take item `id` back out of the projection (a framework's ``pop_item``).

    Only what leaves a valid history may be retracted: the newest item, or the assistant message
    of the newest step, which takes the step's results with it. The item may be a summary or a
    note; its originals then leave the projection too (they stay in the log). An item already
    inside a compaction is no longer projected and cannot be named: the append is refused with
    `InvalidHistoryError` and nothing is written. A pin on a retracted item goes with it.
    """

    type: ClassVar[str] = RETRACTION

    id: int

    def to_data(self) -> dict[str, Any]:
        return {"id": self.id}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Retraction:
        return cls(_get(data, "id", int, RETRACTION))


@dataclass(frozen=True)
class Reset:
    """Empty the projection (a framework's ``clear_session``): every item and every pin goes;
    messages appended afterwards project as in a new session. The log keeps everything."""

    type: ClassVar[str] = RESET

    def to_data(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Reset:
        return cls()


@dataclass(frozen=True)
class Pin:
    """Keep the items `ids` out of every strategy's reach, until unpinned."""

    type: ClassVar[str] = PIN

    ids: tuple[int, ...]

    def to_data(self) -> dict[str, Any]:
        return {"ids": list(self.ids)}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Pin:
        return cls(_ints(data.get("ids", []), "ids", PIN))


@dataclass(frozen=True)
class Unpin:
    """Release the items `ids` from an earlier pin."""

    type: ClassVar[str] = UNPIN

    ids: tuple[int, ...]

    def to_data(self) -> dict[str, Any]:
        return {"ids": list(self.ids)}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Unpin:
        return cls(_ints(data.get("ids", []), "ids", UNPIN))


@dataclass(frozen=True)
class Usage:
    """The provider read `prompt_tokens` tokens for the request sent after seq `after_seq`."""

    type: ClassVar[str] = USAGE

    after_seq: int
    prompt_tokens: int
    completion_tokens: int | None = None
    model: str | None = None

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"after_seq": self.after_seq, "prompt_tokens": self.prompt_tokens}
        if self.completion_tokens is not None:
            data["completion_tokens"] = self.completion_tokens
        if self.model is not None:
            data["model"] = self.model
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Usage:
        return cls(
            after_seq=_count(_opt(data, "after_seq", int, USAGE) or 0, "after_seq", USAGE),
            prompt_tokens=_count(_get(data, "prompt_tokens", int, USAGE), "prompt_tokens", USAGE),
            completion_tokens=_count(
                _opt(data, "completion_tokens", int, USAGE), "completion_tokens", USAGE
            ),
            model=_opt(data, "model", str, USAGE),
        )


@dataclass(frozen=True)
class Overflow:
    """The provider refused the request sent after seq `after_seq`: the prompt was too long.

    The compactor counts these per session (`overflow-recovery`): the first is answered with the
    pipeline, every later one by clearing tool results too."""

    type: ClassVar[str] = OVERFLOW

    after_seq: int

    def to_data(self) -> dict[str, Any]:
        return {"after_seq": self.after_seq}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Overflow:
        return cls(_count(_opt(data, "after_seq", int, OVERFLOW) or 0, "after_seq", OVERFLOW))


Payload = Compaction | Mask | Retraction | Reset | Pin | Unpin | Usage | Overflow

PAYLOADS: dict[str, type[Payload]] = {
    kind.type: kind for kind in (Compaction, Mask, Retraction, Reset, Pin, Unpin, Usage, Overflow)
}


# -- reading JSON ------------------------------------------------------------------------------
def _is_int(value: object) -> TypeGuard[int]:
    # bool is an int subclass; True as an id is always a writer's mistake.
    return isinstance(value, int) and not isinstance(value, bool)


def _get(data: Mapping[str, Any], key: str, kind: type, what: str) -> Any:
    value = _opt(data, key, kind, what)
    if value is None:
        raise InvalidInputError(f"a {what} event needs {key!r}; its data is {dict(data)!r:.200}")
    return value


def _opt(data: Mapping[str, Any], key: str, kind: type, what: str) -> Any:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, kind) or (kind is int and not _is_int(value)):
        raise InvalidInputError(
            f"a {what} event's {key!r} must be {kind.__name__}, not {value!r:.200}"
        )
    return value


def _count(value: Any, key: str, what: str) -> Any:
    # A negative count or seq is no report a provider makes; read as one, it would pull every
    # later estimate below the truth.
    if value is not None and value < 0:
        raise InvalidInputError(f"a {what} event's {key!r} must be 0 or more, not {value!r}")
    return value


def _ints(value: object, key: str, what: str) -> tuple[int, ...]:
    if not isinstance(value, Sequence) or isinstance(value, str) or not all(map(_is_int, value)):
        raise InvalidInputError(f"a {what} event's {key!r} must be a list of item ids")
    return tuple(value)


def _pair(data: Mapping[str, Any], key: str, what: str) -> tuple[int, int] | None:
    value = data.get(key)
    if value is None:
        return None
    pair = _ints(value, key, what)
    if len(pair) != 2:
        raise InvalidInputError(f"a {what} event's {key!r} must be two integers, not {value!r}")
    return pair[0], pair[1]


def _identifier_counts(data: Mapping[str, Any]) -> IdentifierCounts:
    lists: dict[str, tuple[str, ...] | None] = {}
    for key in ("left_out", "held"):
        value = data.get(key)
        if value is not None and (
            not isinstance(value, list) or not all(isinstance(i, str) for i in value)
        ):
            raise InvalidInputError(f"a compaction's identifiers.{key} must be a list of strings")
        lists[key] = None if value is None else tuple(value)
    return IdentifierCounts(
        kept=_opt(data, "kept", int, COMPACTION) or 0,
        added=_opt(data, "added", int, COMPACTION) or 0,
        left_out=lists["left_out"] or (),
        held=lists["held"],
    )
