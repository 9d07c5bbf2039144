"""The values every layer shares: `ToolCall` and `Message`.

They are frozen, and their constructors refuse a field of the wrong type with `InvalidInputError`
naming the field and the value, so that a value that exists can be written, counted, validated
and stored. `tool_calls` given as a list is kept as a tuple.

They are hashable: the hash covers every field but `extra`, which holds dicts. Two equal values
have equal `extra` too, so the hash agrees with `==`; values that differ only in `extra` share a
hash and still compare unequal.

`extra` carries provider fields that ctxfold does not interpret, so that a message read from one
format and written back to it is the same message. Nothing in ctxfold mutates `extra`; treat it as
read-only.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn, cast

from ctxfold.errors import InvalidInputError
from ctxfold.messages._show import show

# The values are built field by field with `object.__setattr__` (they are frozen), held here
# once: a replay builds hundreds of thousands of messages, and a cold start reads as many back.
# A value read back from stored JSON skips the constructor's checks, which `from_dict` made.
_new = object.__new__
_set = object.__setattr__

Role = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})


@dataclass(frozen=True, init=False)
class ToolCall:
    """One call an assistant message makes: an id, a tool name and its arguments as JSON text.

    `arguments` is kept as the provider sent it (a string), never re-serialized, so that counts
    and round trips are exact. `extra` holds fields ctxfold does not interpret (None: none).

    The id and the name must be non-empty strings, `arguments` a string and `extra` a mapping;
    anything else raises `InvalidInputError` naming the field and the value.

    >>> ToolCall("call_1", "read_file", '{"path": "a.py"}').name
    'read_file'
    """

    id: str
    name: str
    arguments: str = "{}"
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __init__(
        self,
        id: str,
        name: str,
        arguments: str = "{}",
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        if extra is None:
            extra = {}
        _check_call(id, name, arguments, extra)
        _set(self, "id", id)
        _set(self, "name", name)
        _set(self, "arguments", arguments)
        _set(self, "extra", extra)

    def __post_init__(self) -> None:
        # Only a dataclass subclass's generated `__init__` calls this: check what it set.
        _check_call(self.id, self.name, self.arguments, self.extra)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.extra:
            out["extra"] = dict(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCall:
        """Read ctxfold's own JSON shape (the inverse of `to_dict`); a field of the wrong type
        raises `InvalidInputError` naming it, in the constructor's words."""
        if type(data) is not dict and not isinstance(data, Mapping):
            raise InvalidInputError(f"a tool call must be an object, not {show(data)}")
        call_id, name = data.get("id"), data.get("name")
        arguments = data.get("arguments", "{}")
        _check_call(call_id, name, arguments, _NO_EXTRA)
        extra = data.get("extra")
        extra_value = {} if extra is None else _extra(extra, f"call {call_id!r}")
        if cls is not ToolCall:
            return cls(cast(str, call_id), cast(str, name), arguments, extra_value)
        call = _new(ToolCall)
        _set(call, "id", call_id)
        _set(call, "name", name)
        _set(call, "arguments", arguments)
        _set(call, "extra", extra_value)
        return call


@dataclass(frozen=True, init=False)
class Message:
    """One chat message in ctxfold's provider-neutral shape.

    - `role`: "system", "user", "assistant" or "tool".
    - `content`: the text (parts joined), or None when an assistant message only calls tools.
    - `tool_calls`: the calls an assistant message makes, in order: a tuple of `ToolCall`s (a
      list is taken too, and kept as a tuple).
    - `tool_call_id`: on a tool message, the id of the call it answers.
    - `name`: an optional author or tool name.
    - `extra`: provider fields kept for lossless round trips (for example the original list of
      content parts, or Anthropic thinking blocks), and the media record of a message made
      outside the adapters (``"media"``, see `ctxfold.messages.media.with_media`); None or left
      out: none.

    A field of the wrong type (content that is not a string or None, tool calls that are not
    `ToolCall`s, an `extra` that is not a mapping...) raises `InvalidInputError` naming the
    field and the value, as do a tool message without `tool_call_id` and tool calls on a
    message that is not the assistant's.

    >>> Message("user", "fix the failing test in tests/test_io.py").role
    'user'
    """

    role: Role
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __init__(
        self,
        role: Role,
        content: str | None = None,
        tool_calls: tuple[ToolCall, ...] | list[ToolCall] = (),
        tool_call_id: str | None = None,
        name: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        if extra is None:
            extra = {}
        _set(self, "role", role)
        _set(self, "content", content)
        _set(self, "tool_calls", _checked(role, content, tool_calls, tool_call_id, name, extra))
        _set(self, "tool_call_id", tool_call_id)
        _set(self, "name", name)
        _set(self, "extra", extra)

    def __post_init__(self) -> None:
        # Only a dataclass subclass's generated `__init__` calls this: check what it set.
        calls = _checked(
            self.role, self.content, self.tool_calls, self.tool_call_id, self.name, self.extra
        )
        _set(self, "tool_calls", calls)

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
            # A subclass builds itself; a message that breaks a rule of the constructor is
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


_NO_EXTRA: Mapping[str, Any] = {}


def check_fields(message: Message) -> None:
    """Raise `InvalidInputError` naming the first field of `message`, or of one of its tool
    calls, that the constructor would refuse: for a value whose fields were set past it
    (``object.__setattr__`` on a frozen value), which a store must not take."""
    _checked(
        message.role,
        message.content,
        message.tool_calls,
        message.tool_call_id,
        message.name,
        message.extra,
    )
    for call in message.tool_calls:
        _check_call(call.id, call.name, call.arguments, call.extra)


def plain_fields(message: object) -> bool:
    """True when `message` is a `Message` (not a subclass) that its constructor takes as it is,
    every field of exactly its declared type (a str, not a subclass of it; a tuple of `ToolCall`
    values), with an empty `extra` dict, its calls' included: a message JSON gives back equal.

    False says no more than that: `check_fields` then says whether the constructor refuses it.
    One pass over the fields, for the append of a message, where a check and then a look at
    each type cost two."""
    if type(message) is not Message:
        return False
    role, content, calls = message.role, message.content, message.tool_calls
    call_id, name, extra = message.tool_call_id, message.name, message.extra
    if not (
        type(role) is str
        and role in ROLES
        and (content is None or type(content) is str)
        and (call_id is None or type(call_id) is str)
        and (name is None or type(name) is str)
        and type(extra) is dict
        and not extra
        and type(calls) is tuple
        and (call_id or role != "tool")
    ):
        return False
    if calls:
        if role != "assistant":
            return False
        for call in calls:
            if not (
                type(call) is ToolCall
                and type(call.id) is str
                and call.id
                and type(call.name) is str
                and call.name
                and type(call.arguments) is str
                and type(call.extra) is dict
                and not call.extra
            ):
                return False
    return True


def _checked(
    role: object,
    content: object,
    calls: object,
    call_id: object,
    name: object,
    extra: object,
) -> tuple[ToolCall, ...]:
    """The tool calls of a message whose fields are all right (a list made a tuple); raises
    `InvalidInputError` naming the first field that is not.

    The common case costs one `type(...) is` test per field: a replay builds hundreds of
    thousands of messages, and `isinstance` is asked only of what is not exactly a str, a dict
    or a tuple (a subclass passes, as it always did)."""
    if type(calls) is not tuple:
        if isinstance(calls, list):
            calls = tuple(calls)
        elif not isinstance(calls, tuple):
            _refuse_message(role, content, calls, call_id, name, extra)
    if not (
        (type(role) is str or isinstance(role, str))
        and role in ROLES
        and (content is None or type(content) is str or isinstance(content, str))
        and (call_id is None or type(call_id) is str or isinstance(call_id, str))
        and (name is None or type(name) is str or isinstance(name, str))
        and (type(extra) is dict or isinstance(extra, Mapping))
        and (call_id or role != "tool")
        and (not calls or (role == "assistant" and _all_calls(calls)))
    ):
        _refuse_message(role, content, calls, call_id, name, extra)
    return cast("tuple[ToolCall, ...]", calls)


def _all_calls(calls: tuple[object, ...]) -> bool:
    for call in calls:
        if type(call) is not ToolCall and not isinstance(call, ToolCall):
            return False
    return True


def _refuse_message(
    role: object, content: object, calls: object, call_id: object, name: object, extra: object
) -> NoReturn:
    """Raise the `InvalidInputError` that names the first field of a message that is wrong."""
    if not isinstance(role, str) or role not in ROLES:
        raise InvalidInputError(
            f"unknown role {show(role)}; expected one of system, user, assistant, tool"
        )
    for key, value in (("content", content), ("tool_call_id", call_id), ("name", name)):
        if value is not None and not isinstance(value, str):
            raise InvalidInputError(
                f"Message {key} must be a string or None, not {type(value).__name__} {show(value)}"
            )
    if not isinstance(extra, Mapping):
        raise InvalidInputError(
            f"Message extra must be a mapping (a dict), not {type(extra).__name__} {show(extra)}"
        )
    if not isinstance(calls, (tuple, list)):
        raise InvalidInputError(
            f"Message tool_calls must be a tuple or a list of ToolCall values, not "
            f"{type(calls).__name__} {show(calls)}"
        )
    if role == "tool" and not call_id:
        raise InvalidInputError("a tool message needs the tool_call_id of the call it answers")
    if calls and role != "assistant":
        raise InvalidInputError(f"only assistant messages may carry tool calls, not {role!r}")
    # What is left: a call that is not a `ToolCall`.
    position, call = next(
        ((i, c) for i, c in enumerate(calls) if not isinstance(c, ToolCall)), (0, calls)
    )
    hint = "; ToolCall.from_dict reads one held as a dict" if isinstance(call, Mapping) else ""
    raise InvalidInputError(
        f"Message tool_calls[{position}] must be a ToolCall, not "
        f"{type(call).__name__} {show(call)}{hint}"
    )


def _check_call(call_id: object, name: object, arguments: object, extra: object) -> None:
    """Raise `InvalidInputError` naming the first field of a tool call that is wrong."""
    if (
        (type(call_id) is str or isinstance(call_id, str))
        and call_id
        and (type(name) is str or isinstance(name, str))
        and name
        and (type(arguments) is str or isinstance(arguments, str))
        and (type(extra) is dict or isinstance(extra, Mapping))
    ):
        return
    if not isinstance(call_id, str) or not call_id:
        raise InvalidInputError(f"a tool call needs a non-empty string id, got {show(call_id)}")
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"call {call_id!r} needs a non-empty string name, got {show(name)}")
    if not isinstance(arguments, str):
        raise InvalidInputError(
            f"call {call_id!r}: arguments must be a JSON string, not {show(arguments)}"
        )
    raise InvalidInputError(
        f"extra of call {call_id!r} must be a mapping (a dict), not "
        f"{type(extra).__name__} {show(extra)}"
    )
