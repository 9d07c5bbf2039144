"""The values every layer shares: `ToolCall` and `Message`.

They are frozen. `extra` carries provider fields that ctxfold does not interpret, so that a message
read from one format and written back to it is the same message. Nothing in ctxfold mutates
`extra`; treat it as read-only.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from ctxfold.errors import InvalidInputError
from ctxfold.messages._show import show

# A value read back from stored JSON is built field by field, as the dataclass's own
# `__init__` does, once `from_dict` has checked every rule `__post_init__` checks: a cold start
# reads a hundred thousand messages, and the generated `__init__` looks `object.__setattr__` up
# again for each field, then runs checks already made.
_new = object.__new__
_set = object.__setattr__

Role = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})


@dataclass(frozen=True)
class ToolCall:
    """One call an assistant message makes: an id, a tool name and its arguments as JSON text.

    `arguments` is kept as the provider sent it (a string), never re-serialized, so that counts
    and round trips are exact. `extra` holds fields ctxfold does not interpret.
    """

    id: str
    name: str
    arguments: str = "{}"
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.extra:
            out["extra"] = dict(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCall:
        """Read ctxfold's own JSON shape (the inverse of `to_dict`); a field of the wrong type
        raises `InvalidInputError` naming it."""
        if type(data) is not dict and not isinstance(data, Mapping):
            raise InvalidInputError(f"a tool call must be an object, not {show(data)}")
        call_id, name = data.get("id"), data.get("name")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidInputError(f"a tool call needs a non-empty string id, got {show(call_id)}")
        if not isinstance(name, str) or not name:
            raise InvalidInputError(
                f"call {call_id!r} needs a non-empty string name, got {show(name)}"
            )
        arguments = data.get("arguments", "{}")
        if not isinstance(arguments, str):
            raise InvalidInputError(
                f"call {call_id!r}: arguments must be a JSON string, not {show(arguments)}"
            )
        extra = data.get("extra")
        extra_value = {} if extra is None else _extra(extra, f"call {call_id!r}")
        if cls is not ToolCall:
            return cls(call_id, name, arguments, extra_value)
        call = _new(ToolCall)
        _set(call, "id", call_id)
        _set(call, "name", name)
        _set(call, "arguments", arguments)
        _set(call, "extra", extra_value)
        return call
        return call


@dataclass(frozen=True)
class Message:
    """One chat message in ctxfold's provider-neutral shape.

    - `role`: "system", "user", "assistant" or "tool".
    - `content`: the text (parts joined), or None when an assistant message only calls tools.
    - `tool_calls`: the calls an assistant message makes, in order.
    - `tool_call_id`: on a tool message, the id of the call it answers.
    - `name`: an optional author or tool name.
    - `extra`: provider fields kept for lossless round trips (for example the original list of
      content parts, or Anthropic thinking blocks).

    >>> Message("user", "fix the failing test in tests/test_io.py").role
    'user'
    """

    role: Role
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.role, str) or self.role not in ROLES:
            raise InvalidInputError(
                f"unknown role {show(self.role)}; expected one of system, user, assistant, tool"
            )
        if self.role == "tool" and not self.tool_call_id:
            raise InvalidInputError("a tool message needs the tool_call_id of the call it answers")
        if self.tool_calls and self.role != "assistant":
            raise InvalidInputError(
                f"only assistant messages may carry tool calls, not {self.role!r}"
            )

    @property
    def text(self) -> str:
        """The content as text ("" when there is none)."""
        return self.content or ""

    def replace(self, **changes: Any) -> Message:
        """A copy with some fields changed (messages are frozen)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """ctxfold's own JSON shape, used inside the event log (empty keys left out)."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        if self.extra:
            out["extra"] = dict(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """Read ctxfold's own JSON shape (the inverse of `to_dict`).

        Any field of the wrong type raises `InvalidInputError` naming the field and the value.
        """
        # `type(...) is dict` first: what a store decodes is a dict, and the ABC check costs
        # more than the rest of a small message.
        if type(data) is not dict and not isinstance(data, Mapping):
            raise InvalidInputError(f"a message must be an object, not {show(data)}")
        role = data.get("role")
        if not isinstance(role, str) or role not in ROLES:
            raise InvalidInputError(
                f"unknown role {show(role)}; expected one of system, user, assistant, tool"
            )
        content = data.get("content")
        if content is not None and not isinstance(content, str):
            raise InvalidInputError(
                f"content must be a string or null, not {type(content).__name__}"
            )
        raw_calls = data.get("tool_calls") or ()
        if not isinstance(raw_calls, (list, tuple)):
            raise InvalidInputError(f"tool_calls must be a list, not {show(raw_calls)}")
        call_id, name = data.get("tool_call_id"), data.get("name")
        if not (call_id is None or isinstance(call_id, str)) or not (
            name is None or isinstance(name, str)
        ):
            for key, value in (("tool_call_id", call_id), ("name", name)):
                if value is not None and not isinstance(value, str):
                    raise InvalidInputError(f"{key} must be a string or null, not {show(value)}")
        calls = tuple([ToolCall.from_dict(c) for c in raw_calls]) if raw_calls else ()
        extra = data.get("extra")
        extra_value = {} if extra is None else _extra(extra, "the message")
        if (
            cls is not Message
            or (role == "tool" and not call_id)
            or (calls and role != "assistant")
        ):
            # A subclass builds itself; a message that breaks a rule of `__post_init__` is
            # refused there, in its words.
            return cls(cast(Role, role), content, calls, call_id, name, extra_value)
        message = _new(Message)
        _set(message, "role", role)
        _set(message, "content", content)
        _set(message, "tool_calls", calls)
        _set(message, "tool_call_id", call_id)
        _set(message, "name", name)
        _set(message, "extra", extra_value)
        return message

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))


def _extra(value: object, owner: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"extra of {owner} must be an object, not {show(value)}")
    return dict(value)
