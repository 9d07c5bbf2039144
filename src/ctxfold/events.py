"""Events: the entries of a session's append-only log, and the payloads ctxfold reads back.

An `Event` is what a store returns (it has a seq); a `NewEvent` is what a caller appends (the store
assigns the seq). Types the projection reads:

- ``message``: ``{"message": <Message.to_dict()>}``;
- ``compaction``: ``{"first": id, "last": id, "message": {...}, "kind": "summary" | "note",
  "strategy": name, "tokens_before": n, "tokens_after": n, "replaced": [seq, ...], ...}`` replaces
  the contiguous run of projected items from ``first`` to ``last`` (item ids) with one message;
- ``mask``: ``{"items": [{"id": id, "content": placeholder}, ...], "strategy": name}`` replaces the
  content of tool results, keeping their call ids;
- ``usage``: ``{"after_seq": seq, "prompt_tokens": n, ...}`` the provider's count for the request
  that followed ``after_seq``.

Every other type (``turn``, ``app/...``) is stored and returned, never projected.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ctxfold.errors import InvalidInputError
from ctxfold.messages import Message

MESSAGE = "message"
COMPACTION = "compaction"
MASK = "mask"
USAGE = "usage"
PROJECTED = frozenset({MESSAGE, COMPACTION, MASK})


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
        return Message.from_dict(self.data["message"])
