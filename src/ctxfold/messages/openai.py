"""Read and write the OpenAI Chat Completions message format.

`from_openai` turns a list of chat message dicts into `Message` values and `to_openai` turns them
back. Everything ctxfold does not interpret (a list of content parts, the `developer` role, a key
it does not know) is kept under `extra["openai"]`, so `to_openai(from_openai(rows)) == rows`.

Kept fields are only used while they still describe the message: when a strategy replaces the
content of a message that came as a list of parts, the new text is written as a plain string
rather than the stale parts.

A message read from the Anthropic format is written with its images and PDFs as content parts
(`carried_to_openai`, by the rules of `ctxfold.messages.convert`); a block with no Chat
Completions equivalent raises `InvalidInputError` naming the message, never vanishes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from ctxfold.errors import InvalidInputError
from ctxfold.messages._given import given_messages, given_rows
from ctxfold.messages._show import show
from ctxfold.messages._values import Message, Role, ToolCall
from ctxfold.messages.convert import carried_to_openai

OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool")

# Keys each role reads into Message fields; any other key is kept verbatim in extra.
_KNOWN_KEYS: dict[str, frozenset[str]] = {
    "system": frozenset({"role", "content", "name"}),
    "developer": frozenset({"role", "content", "name"}),
    "user": frozenset({"role", "content", "name"}),
    "assistant": frozenset({"role", "content", "name", "tool_calls"}),
    "tool": frozenset({"role", "content", "name", "tool_call_id"}),
}
_CALL_KEYS = frozenset({"id", "type", "function"})
_FUNCTION_KEYS = frozenset({"name", "arguments"})


def from_openai(rows: Iterable[Mapping[str, Any]] | Mapping[str, Any]) -> list[Message]:
    """Read Chat Completions messages (a list of dicts, or one dict) into `Message` values.

    Raises `InvalidInputError` naming the (0-based) message index and the bad value: an unknown
    role, a tool message without `tool_call_id`, `tool_calls` that is not a list, arguments that
    are not a string, and so on; and naming what it got when that is no list at all (None).

    >>> [m.role for m in from_openai([{"role": "developer", "content": "be brief"},
    ...                               {"role": "user", "content": "hi"}])]
    ['system', 'user']
    """
    out: list[Message] = []
    for index, row in enumerate(given_rows(rows, "from_openai")):
        try:
            out.append(message_from_openai(row))
        except InvalidInputError as exc:
            raise InvalidInputError(f"message {index}: {exc}") from exc
    return out


def to_openai(messages: Iterable[Message] | Message) -> list[dict[str, Any]]:
    """Write `Message` values as Chat Completions messages (the inverse of `from_openai`).

    One `Message` is taken as a list of one; anything but messages raises `InvalidInputError`,
    and so does a message read from Anthropic that holds a block with no Chat Completions
    equivalent (the error names its 0-based index; see `ctxfold.messages.convert`).
    """
    out: list[dict[str, Any]] = []
    for index, message in enumerate(given_messages(messages, "to_openai")):
        try:
            out.append(message_to_openai(message))
        except InvalidInputError as exc:
            raise InvalidInputError(f"message {index}: {exc}") from None
    return out


def message_from_openai(row: Mapping[str, Any]) -> Message:
    """Read one Chat Completions message; errors name the value but not the position."""
    if not isinstance(row, Mapping):
        raise InvalidInputError(f"expected a JSON object, got {type(row).__name__}: {show(row)}")
    role = row.get("role")
    if not isinstance(role, str) or role not in _KNOWN_KEYS:
        raise InvalidInputError(
            f"unknown role {show(role)}; expected one of {', '.join(OPENAI_ROLES)}"
        )
    kept: dict[str, Any] = {}
    if role == "developer":
        kept["role"] = "developer"
    fields = {k: v for k, v in row.items() if k not in _KNOWN_KEYS[role]}
    tool_calls: tuple[ToolCall, ...] = ()
    raw_calls = row.get("tool_calls")
    if role == "assistant" and raw_calls:
        tool_calls = _calls_from_openai(raw_calls)
    elif role == "assistant" and "tool_calls" in row:
        if not isinstance(raw_calls, (list, type(None))):
            raise InvalidInputError(f"tool_calls must be a list, not {show(raw_calls)}")
        # An empty list or null carries no call; keep it so the message is written back the same.
        fields["tool_calls"] = raw_calls
    if fields:
        kept["fields"] = fields

    if "content" not in row:
        kept["no_content"] = True
    content = row.get("content")
    if isinstance(content, list):
        for position, part in enumerate(content):
            if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
                raise InvalidInputError(
                    f"content[{position}] must be a part object with a string type, "
                    f"not {show(part)}"
                )
            if part["type"] == "text" and not isinstance(part.get("text"), str):
                raise InvalidInputError(
                    f"content[{position}] is a text part, so its text must be a string, "
                    f"not {show(part.get('text'))}"
                )
        kept["parts"] = content
        content = parts_text(content)
    elif content is not None and not isinstance(content, str):
        raise InvalidInputError(
            f"content must be a string, a list of parts or null, not {show(content)}"
        )

    name = row.get("name")
    if name is not None and not isinstance(name, str):
        raise InvalidInputError(f"name must be a string, not {show(name)}")
    tool_call_id = None
    if role == "tool":
        tool_call_id = row.get("tool_call_id")
        if not isinstance(tool_call_id, str) or not tool_call_id:
            raise InvalidInputError(
                f"a tool message needs a non-empty string tool_call_id, got {show(tool_call_id)}"
            )
    return Message(
        role=cast(Role, "system" if role == "developer" else role),
        content=content,
        tool_calls=tool_calls,
        tool_call_id=tool_call_id,
        name=name,
        extra={"openai": kept} if kept else {},
    )


def message_to_openai(message: Message) -> dict[str, Any]:
    """Write one `Message` as a Chat Completions message; raises `InvalidInputError` for what
    `carried_to_openai` cannot carry."""
    message = carried_to_openai(message)
    kept = _kept(message.extra)
    role = kept.get("role", message.role) if message.role == "system" else message.role
    out: dict[str, Any] = {"role": role}
    parts = kept.get("parts")
    if isinstance(parts, list) and parts_text(parts) == message.content:
        out["content"] = parts
    elif message.content is not None or not kept.get("no_content"):
        out["content"] = message.content
    if message.name is not None:
        out["name"] = message.name
    if message.tool_calls:
        out["tool_calls"] = [_call_to_openai(c) for c in message.tool_calls]
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id
    for key, value in (kept.get("fields") or {}).items():
        out.setdefault(key, value)
    return out


def parts_text(parts: Sequence[Any]) -> str | None:
    """The text of a list of content parts, joined by newlines; None when no part is text."""
    texts = [
        p["text"]
        for p in parts
        if isinstance(p, Mapping) and p.get("type") == "text" and isinstance(p.get("text"), str)
    ]
    return "\n".join(texts) if texts else None


def _kept(extra: Mapping[str, Any]) -> Mapping[str, Any]:
    kept = extra.get("openai")
    return kept if isinstance(kept, Mapping) else {}


def _calls_from_openai(raw: Any) -> tuple[ToolCall, ...]:
    if not isinstance(raw, list):
        raise InvalidInputError(f"tool_calls must be a list, not {show(raw)}")
    return tuple(_call_from_openai(call, position) for position, call in enumerate(raw))


def _call_from_openai(call: Any, position: int) -> ToolCall:
    where = f"tool_calls[{position}]"
    if not isinstance(call, Mapping):
        raise InvalidInputError(f"{where} must be an object, not {show(call)}")
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidInputError(f"{where} needs a non-empty string id, got {show(call_id)}")
    kind = call.get("type", "function")
    if kind != "function":
        raise InvalidInputError(f"{where} ({call_id}) has type {show(kind)}; expected 'function'")
    function = call.get("function")
    if not isinstance(function, Mapping):
        raise InvalidInputError(
            f"{where} ({call_id}) needs a function object, got {show(function)}"
        )
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"{where} ({call_id}) needs a function name, got {show(name)}")
    arguments = function.get("arguments", "")
    if not isinstance(arguments, str):
        raise InvalidInputError(
            f"{where} ({call_id}) arguments must be a JSON string, not {show(arguments)}"
        )
    kept: dict[str, Any] = {}
    if "type" not in call:
        kept["no_type"] = True
    if "arguments" not in function:
        kept["no_arguments"] = True
    fields = {k: v for k, v in call.items() if k not in _CALL_KEYS}
    function_fields = {k: v for k, v in function.items() if k not in _FUNCTION_KEYS}
    if fields:
        kept["fields"] = fields
    if function_fields:
        kept["function_fields"] = function_fields
    return ToolCall(call_id, name, arguments, extra={"openai": kept} if kept else {})


def _call_to_openai(call: ToolCall) -> dict[str, Any]:
    kept = _kept(call.extra)
    function: dict[str, Any] = {"name": call.name}
    if call.arguments or not kept.get("no_arguments"):
        function["arguments"] = call.arguments
    for key, value in (kept.get("function_fields") or {}).items():
        function.setdefault(key, value)
    out: dict[str, Any] = {"id": call.id}
    if not kept.get("no_type"):
        out["type"] = "function"
    out["function"] = function
    for key, value in (kept.get("fields") or {}).items():
        out.setdefault(key, value)
    return out
