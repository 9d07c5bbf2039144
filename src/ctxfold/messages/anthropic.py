"""Read and write the Anthropic Messages API format.

One API message may become several `Message` values: a user message's `tool_result` blocks each
become a role "tool" message (ctxfold pairs results with calls one message at a time), and the
blocks between them a user message. An assistant message stays one `Message`: its text blocks are
joined into `content`, its `tool_use` blocks become `ToolCall`s whose arguments are the JSON text
of `input`.

Summaries and notes that ctxfold wrote (recognised by their frame, see `ctxfold.messages.frames`)
are placed where the API accepts them whatever role they were projected with: one written as a
system message is sent as a user message (the `system` parameter keeps the real system prompt
only), and one written as an assistant message that would open the conversation is sent as a
user message too. `anthropic_role` says which role a message is sent with, and the validator
checks that role.

Call ids are sent as the API takes them: a tool_use id (and the tool_use_id of its result) must
match ``^[a-zA-Z0-9_-]+$``, so an id from another provider that does not (``functions.bash:0``)
is sent as `anthropic_id` maps it: its other characters made ``_`` and a short hash of the
original added, the same every time (prompt caches keep working) and for the call and its
result alike. The messages themselves keep their ids. Tool names are sent as they are: the API
takes any name of 1 to 200 characters in a history (the stricter pattern applies to tool
definitions, which the application sends), and a new name would not match them. A call whose
arguments are not a JSON object cannot be a tool_use `input`: `tool_use_input` refuses it, and
`validate(messages, "anthropic")` reports it with the same words.

A message read from the OpenAI format is written with its images and PDFs as blocks, and an
assistant's refusal as its text (`carried_to_anthropic`, by the rules of
`ctxfold.messages.convert`); a part with no Messages API equivalent (audio, say) raises
`InvalidInputError` naming the message, never vanishes.

What ctxfold does not interpret (thinking and redacted_thinking blocks, images, `cache_control`,
`is_error`, the original blocks) is kept under `extra["anthropic"]` so that
`to_anthropic(from_anthropic(msgs, system))` gives back `(system, msgs)`. Kept blocks are written
back only while they still describe the message; when a strategy changed its text or calls, the
message is rebuilt from its fields, keeping thinking blocks first as the API expects.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from ctxfold.errors import InvalidInputError
from ctxfold.messages._given import given_messages, given_rows
from ctxfold.messages._show import show
from ctxfold.messages._values import Message, Role, ToolCall
from ctxfold.messages.convert import carried_to_anthropic
from ctxfold.messages.frames import frame_kind

SystemPrompt = str | list[dict[str, Any]] | None
_MESSAGE_KEYS = frozenset({"role", "content"})
_TOOL_USE_KEYS = frozenset({"type", "id", "name", "input"})
_SENDABLE_ID = re.compile(r"[a-zA-Z0-9_-]+")
_NOT_IN_ID = re.compile(r"[^a-zA-Z0-9_-]")


def from_anthropic(
    messages: Iterable[Mapping[str, Any]] | Mapping[str, Any],
    system: str | Sequence[Mapping[str, Any]] | None = None,
) -> list[Message]:
    """Read Messages API messages (a list of dicts, or one dict) and the `system` parameter into
    `Message` values.

    Raises `InvalidInputError` naming the (0-based) message index and the bad value, or naming
    what it got when that is no list at all (None).

    >>> msgs = from_anthropic([
    ...     {"role": "user", "content": "list the files"},
    ...     {"role": "assistant", "content": [
    ...         {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"path": "."}}]},
    ...     {"role": "user", "content": [
    ...         {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}]},
    ... ], system="be brief")
    >>> [(m.role, m.content) for m in msgs]
    [('system', 'be brief'), ('user', 'list the files'), ('assistant', None), ('tool', 'a.py')]
    """
    rows = given_rows(messages, "from_anthropic")
    out: list[Message] = []
    if system is not None:
        out.append(system_from_anthropic(system))
    for index, row in enumerate(rows):
        try:
            out.extend(messages_from_anthropic(row))
        except InvalidInputError as exc:
            raise InvalidInputError(f"message {index}: {exc}") from exc
    return out


def system_from_anthropic(system: Any) -> Message:
    """Read the `system` parameter (a string or a list of text blocks) as one system message."""
    if isinstance(system, str):
        return Message("system", system)
    if isinstance(system, list):
        blocks = [_block(b, f"system[{i}]") for i, b in enumerate(system)]
        return Message("system", blocks_text(blocks), extra=_extra(blocks=blocks))
    raise InvalidInputError(f"system must be a string or a list of blocks, not {show(system)}")


def messages_from_anthropic(row: Mapping[str, Any]) -> list[Message]:
    """Read one API message; errors name the value but not the position."""
    if not isinstance(row, Mapping):
        raise InvalidInputError(f"expected a JSON object, got {type(row).__name__}: {show(row)}")
    role = row.get("role")
    if role not in ("user", "assistant"):
        raise InvalidInputError(f"unknown role {show(role)}; expected user or assistant")
    fields = {k: v for k, v in row.items() if k not in _MESSAGE_KEYS}
    content = row.get("content")
    if isinstance(content, str):
        out = [Message(cast(Role, role), content)]
    elif not isinstance(content, list):
        raise InvalidInputError(
            f"content must be a string or a list of blocks, not {show(content)}"
        )
    else:
        blocks = [_block(b, f"content[{i}]") for i, b in enumerate(content)]
        out = _assistant(blocks) if role == "assistant" else _user(blocks)
    # The first message of each API message says so, with the keys ctxfold does not read, so
    # that writing back starts a new API message exactly where the input had one.
    first = out[0]
    marks = {"first": True, **({"fields": fields} if fields else {})}
    out[0] = first.replace(extra={"anthropic": {**_kept(first.extra), **marks}})
    return out


def to_anthropic(
    messages: Iterable[Message] | Message,
) -> tuple[SystemPrompt, list[dict[str, Any]]]:
    """Write `Message` values (or one `Message`) as `(system, messages)` for the Messages API.

    Leading system messages become `system` (a string, or a list of blocks when they had blocks
    or are several). Tool results go into one user message, followed by any user text that came
    right after them. ctxfold's own summaries and notes are sent with `anthropic_role`, and call
    ids with `anthropic_id`. Messages read from OpenAI carry their images, PDFs and refusals
    across (`carried_to_anthropic`). Any other system message after the conversation started, a
    part with no Messages API equivalent (audio), and a call whose arguments are not a JSON
    object (`tool_use_input`), cannot be expressed and raise `InvalidInputError`.
    """
    system_parts: list[Message] = []
    groups: list[list[Message]] = []
    for index, message in enumerate(given_messages(messages, "to_anthropic")):
        role = anthropic_role(message, started=bool(groups))
        if role != message.role:
            message = message.replace(role=role)
        try:
            message = carried_to_anthropic(message)
        except InvalidInputError as exc:
            raise InvalidInputError(f"message {index}: {exc}") from None
        if message.role == "system":
            if groups:
                raise InvalidInputError(
                    f"message {index}: a system message after the conversation started; the "
                    "Messages API takes system text only in the system parameter"
                )
            system_parts.append(message)
        elif _starts_message(message, groups[-1] if groups else None):
            groups.append([message])
        else:
            groups[-1].append(message)
    return _system_to_anthropic(system_parts), [_group_to_anthropic(g) for g in groups]


def sent_blocks(message: Message) -> list[dict[str, Any]]:
    """The content blocks `message` contributes when written for the Messages API: its kept
    blocks while they still describe it, else blocks rebuilt from its fields. Raises
    `InvalidInputError` when the message cannot be written (arguments that are not JSON, a part
    with no Messages API equivalent)."""
    message = carried_to_anthropic(message)
    if message.role != "assistant":
        return _user_blocks(message)
    content = _assistant_content(message)
    if isinstance(content, list):
        return content
    return [{"type": "text", "text": content}] if content else []


def anthropic_role(message: Message, *, started: bool) -> Role:
    """The role `message` is sent with to the Messages API, once the conversation has `started`
    (a user or assistant message came before it) or not.

    That is its own role, except for ctxfold's own summaries and notes: a system one is sent as a
    user message, and so is an assistant one that would open the conversation.

    >>> note = Message("system", "[ctxfold: earlier history dropped: 4 messages ...]")
    >>> anthropic_role(note, started=False), anthropic_role(Message("system", "Be brief."),
    ...                                                     started=False)
    ('user', 'system')
    """
    if frame_kind(message) is None:
        return message.role
    if message.role == "system" or (message.role == "assistant" and not started):
        return "user"
    return message.role


def anthropic_id(call_id: str) -> str:
    """The id a call (and its result) is sent with: `call_id` itself when the Messages API takes
    it (``^[a-zA-Z0-9_-]+$``), else the same with every other character made ``_`` and the first
    12 hex digits of its SHA-256 added, so that two ids never become one.

    >>> anthropic_id("toolu_01A"), anthropic_id("functions.bash:0")
    ('toolu_01A', 'functions_bash_0_8497fe9cce69')
    """
    if _SENDABLE_ID.fullmatch(call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{_NOT_IN_ID.sub('_', call_id)}_{digest}"


def tool_use_input(call: ToolCall) -> dict[str, Any]:
    """The `input` object `call` is sent with as a tool_use block: its arguments read as JSON
    (blank arguments are ``{}``). Raises `InvalidInputError` naming the call when they are not
    JSON, or not an object: the API takes only an object there.

    >>> tool_use_input(ToolCall("c1", "ls", '{"path": "."}'))
    {'path': '.'}
    """
    try:
        value = json.loads(call.arguments) if call.arguments.strip() else {}
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            f"call {call.id!r} ({call.name}): arguments are not JSON ({exc.msg}), so they cannot "
            f"be sent as a tool_use input: {show(call.arguments)}"
        ) from exc
    if not isinstance(value, dict):
        raise InvalidInputError(
            f"call {call.id!r} ({call.name}): arguments must be a JSON object to be a tool_use "
            f"input, not {show(call.arguments)}"
        )
    return value


def blocks_text(blocks: Sequence[Mapping[str, Any]]) -> str | None:
    """The text of a list of blocks, joined by newlines; None when no block is text."""
    texts = [
        b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    return "\n".join(texts) if texts else None


def _kept(extra: Mapping[str, Any]) -> dict[str, Any]:
    kept = extra.get("anthropic")
    return dict(kept) if isinstance(kept, Mapping) else {}


def _extra(**kept: Any) -> dict[str, Any]:
    kept = {k: v for k, v in kept.items() if v is not None}
    return {"anthropic": kept} if kept else {}


def _block(block: Any, where: str) -> dict[str, Any]:
    if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
        raise InvalidInputError(f"{where} must be a block object with a type, not {show(block)}")
    if block["type"] == "text" and not isinstance(block.get("text"), str):
        raise InvalidInputError(
            f"{where} is a text block, so its text must be a string, not {show(block.get('text'))}"
        )
    return dict(block)


def _user(blocks: list[dict[str, Any]]) -> list[Message]:
    """Split a user message into tool messages and runs of other blocks, in order."""
    out: list[Message] = []
    run: list[dict[str, Any]] = []
    for position, block in enumerate(blocks):
        if block["type"] != "tool_result":
            run.append(block)
            continue
        if run:
            out.append(Message("user", blocks_text(run), extra=_extra(blocks=run)))
            run = []
        out.append(_tool_result(block, position))
    if run or not out:
        out.append(Message("user", blocks_text(run), extra=_extra(blocks=run)))
    return out


def _tool_result(block: Mapping[str, Any], position: int) -> Message:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidInputError(
            f"content[{position}]: a tool_result needs a non-empty tool_use_id, got {show(call_id)}"
        )
    content = block.get("content")
    if isinstance(content, list):
        inner = [_block(b, f"content[{position}].content[{i}]") for i, b in enumerate(content)]
        text = blocks_text(inner)
    elif content is None or isinstance(content, str):
        text = content
    else:
        raise InvalidInputError(
            f"content[{position}]: tool_result content must be a string or a list of blocks, "
            f"not {show(content)}"
        )
    return Message("tool", text, tool_call_id=call_id, extra=_extra(block=dict(block)))


def _assistant(blocks: list[dict[str, Any]]) -> list[Message]:
    calls = tuple(
        _tool_use(b, position) for position, b in enumerate(blocks) if b["type"] == "tool_use"
    )
    return [Message("assistant", blocks_text(blocks), calls, extra=_extra(blocks=blocks))]


def _tool_use(block: Mapping[str, Any], position: int) -> ToolCall:
    where = f"content[{position}]"
    call_id, name, value = block.get("id"), block.get("name"), block.get("input", {})
    if not isinstance(call_id, str) or not call_id:
        raise InvalidInputError(
            f"{where}: a tool_use needs a non-empty string id, got {show(call_id)}"
        )
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"{where} ({call_id}): a tool_use needs a name, got {show(name)}")
    if not isinstance(value, Mapping):
        raise InvalidInputError(
            f"{where} ({call_id}): tool_use input must be an object, not {show(value)}"
        )
    fields = {k: v for k, v in block.items() if k not in _TOOL_USE_KEYS}
    try:
        arguments = json.dumps(value, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError) as exc:
        # Only reachable through the Python API: JSON read from text always dumps back.
        raise InvalidInputError(
            f"{where} ({call_id}): tool_use input cannot be written as JSON ({exc})"
        ) from None
    return ToolCall(call_id, name, arguments, extra=_extra(fields=fields or None))


def _starts_message(message: Message, current: list[Message] | None) -> bool:
    if current is None or message.role == "assistant" or current[0].role == "assistant":
        return True
    if _kept(message.extra).get("first"):
        return True
    # Tool results join the user message they are in; user text joins results it follows. A
    # user message after a user message stays its own, as the API accepts and the input had it.
    return message.role == "user" and current[-1].role != "tool"


def _system_to_anthropic(parts: list[Message]) -> SystemPrompt:
    if not parts:
        return None
    if len(parts) == 1 and _current_blocks(parts[0]) is None:
        return parts[0].text
    blocks: list[dict[str, Any]] = []
    for message in parts:
        blocks.extend(_user_blocks(message))
    return blocks


def _group_to_anthropic(group: list[Message]) -> dict[str, Any]:
    first = group[0]
    out: dict[str, Any] = {"role": "assistant" if first.role == "assistant" else "user"}
    if first.role == "assistant":
        out["content"] = _assistant_content(first)
    elif len(group) == 1 and first.role == "user" and _current_blocks(first) is None:
        out["content"] = first.text
    else:
        out["content"] = [b for m in group for b in _user_blocks(m)]
    for key, value in (_kept(first.extra).get("fields") or {}).items():
        out.setdefault(key, value)
    return out


def _current_blocks(message: Message) -> list[dict[str, Any]] | None:
    """The kept blocks of a user or system message, if they still match its text."""
    blocks = _kept(message.extra).get("blocks")
    if isinstance(blocks, list) and blocks_text(blocks) == message.content:
        return blocks
    return None


def _user_blocks(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [_tool_result_block(message)]
    blocks = _current_blocks(message)
    if blocks is not None:
        return blocks
    return [{"type": "text", "text": message.content}] if message.content else []


def _tool_result_block(message: Message) -> dict[str, Any]:
    call_id = anthropic_id(message.tool_call_id or "")
    kept = _kept(message.extra).get("block")
    if isinstance(kept, Mapping):
        if kept.get("tool_use_id") == message.tool_call_id:
            inner = kept.get("content")
            text = blocks_text(inner) if isinstance(inner, list) else inner
            if text == message.content:
                return {**kept, "tool_use_id": call_id}
        # Changed (for example masked): keep flags such as is_error, write the new text.
        block = {k: v for k, v in kept.items() if k != "content"}
    else:
        block = {"type": "tool_result"}
    block["tool_use_id"] = call_id
    if message.content is not None:
        block["content"] = message.content
    return block


def _assistant_content(message: Message) -> str | list[dict[str, Any]]:
    kept = _kept(message.extra).get("blocks")
    if isinstance(kept, list):
        try:
            parsed = _assistant(kept)[0]
            if (parsed.content, parsed.tool_calls) == (message.content, message.tool_calls):
                return _sendable_ids(kept)
        except InvalidInputError:
            pass
        # Thinking and other blocks ctxfold does not read stay, in front, as the API wants them.
        blocks = [b for b in kept if b.get("type") not in ("text", "tool_use")]
    elif not message.tool_calls:
        return message.text
    else:
        blocks = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    blocks.extend(_tool_use_block(call) for call in message.tool_calls)
    return blocks


def _sendable_ids(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Kept assistant blocks, with any tool_use id the API would refuse mapped (`anthropic_id`):
    the list itself when there is none, as there is none in what the API sent."""
    if all(b.get("type") != "tool_use" or _SENDABLE_ID.fullmatch(str(b.get("id"))) for b in blocks):
        return blocks
    return [
        {**b, "id": anthropic_id(b["id"])} if b.get("type") == "tool_use" else b for b in blocks
    ]


def _tool_use_block(call: ToolCall) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_use",
        "id": anthropic_id(call.id),
        "name": call.name,
        "input": tool_use_input(call),
    }
    for key, kept in (_kept(call.extra).get("fields") or {}).items():
        block.setdefault(key, kept)
    return block
