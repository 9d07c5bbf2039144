"""OpenAI Agents SDK items (Responses API input items) to ctxfold messages and back, losslessly.

The rules:

- a run of assistant-side items (reasoning, assistant messages, tool calls, hosted tool calls and
  any item type ctxfold does not know) becomes one assistant `Message`; the raw items ride in
  ``extra["agents"]["items"]``, so reasoning is kept but never shown to a summarizer as text;
- a tool output (``function_call_output`` and the other ``*_call_output`` items that answer a
  call) becomes a tool message answering the call's ``call_id``;
- a user, system or developer message becomes a message of that role.

Going back, a message whose text still matches its raw items gives those items back exactly as
they came. A tool message whose content a compaction replaced (a cleared result) keeps its item
with the new ``output``; a summary or note becomes a plain input message.

The message text is what token counts and summarizers read, so an opaque item contributes its
compact JSON to the text of its group; only reasoning, whose text the model never sees again as
written, contributes nothing.

Images, files and audio are never text: an ``input_image``, ``input_file`` or ``input_audio`` part
(of a message or of a tool output), a computer call's screenshot and the image an image
generation call made are measured, and what they cost (their size, not their data) recorded as
the message's media (`ctxfold.messages.media.with_media`), while their items still carry them to
the model. A tool output that is only an image has the text "". (An earlier ctxfold put such an
output's JSON, data and all, in the text; a message it logged that way still gives back its
items.)

Media is priced by the rules of the provider whose model the batch names (`_sent_to`): the SDK's
Chat Completions and LiteLLM models write the model on each item they return
(``provider_data.model``, such as ``"anthropic/claude-sonnet-4-5"``), so a tool's image that
answers a Claude model's call is priced as Anthropic bills it. Items name no model otherwise (the
Responses API's, and the user's input, which the SDK stores in a batch of its own): their media
is priced as OpenAI bills it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

from ctxfold._unicode import is_well_formed, well_formed, well_formed_data
from ctxfold.errors import InvalidInputError
from ctxfold.messages import Message, ToolCall
from ctxfold.messages._values import Role
from ctxfold.messages.media import MediaFacts, Provider, media_part, with_media
from ctxfold.tokens.attachments import measure, media_provider

NAMESPACE = "agents"

# Call items whose answer always arrives as a separate "<type>_output" item with the same call_id:
# ctxfold pairs them, so no compaction ever separates a call from its output.
PAIRED_CALLS = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "computer_call",
        "local_shell_call",
        "shell_call",
        "apply_patch_call",
    }
)
OUTPUTS = frozenset(f"{kind}_output" for kind in PAIRED_CALLS)
_USER_ROLES: dict[str, Role] = {"user": "user", "system": "system", "developer": "system"}
# Keys that differ between the item the SDK stores and the one it replays to the model.
_VOLATILE = frozenset({"id", "status", "created_by"})


def items_to_messages(items: Sequence[Any], *, first_index: int = 0) -> list[Message]:
    """Convert a batch of items (as `Session.add_items` receives them) to messages.

    Raises `InvalidInputError` naming the item (its index in the batch plus `first_index`) for a
    shape that cannot be carried: not a JSON object, a key that is not a string, no ``type`` or
    ``role``, a message with an unknown role, a call or output without a ``call_id``. A lone
    surrogate in a string is stored as U+FFFD.
    """
    batch = [_checked(raw, first_index + position) for position, raw in enumerate(items)]
    messages: list[Message] = []
    group: list[dict[str, Any]] = []
    for position, item in enumerate(batch):
        kind = item_kind(item)
        if kind == "assistant":
            group.append(item)
            continue
        if group:
            messages.append(_assistant(group, batch, position - 1))
            group = []
        if kind == "output":
            messages.append(_tool_output(item, batch, position))
        else:
            content = item.get("content")
            text = content if isinstance(content, str) else _parts_text(content)
            role = _USER_ROLES[item["role"]]
            message = Message(role, text, extra={NAMESPACE: {"items": [item]}})
            messages.append(_with_media(message, [item], batch, position))
    if group:
        messages.append(_assistant(group, batch, len(batch) - 1))
    return messages


def message_to_items(message: Message) -> list[dict[str, Any]]:
    """The items a projected message stands for, as the Agents SDK sends them to the model."""
    kept = raw_items(message)
    if kept and (
        _text_of(message, kept) == message.content
        or _text_of(message, kept, earlier=True) == message.content
    ):
        return [dict(item) for item in kept]
    if message.role == "tool":
        base: dict[str, Any] = dict(kept[0]) if kept else {"type": "function_call_output"}
        base["call_id"] = message.tool_call_id
        base["output"] = message.text
        return [base]
    # A summary or a note (or text a strategy rewrote): a plain input message in its role.
    return [{"type": "message", "role": message.role, "content": message.text}]


def raw_items(message: Message) -> list[dict[str, Any]]:
    """The raw items kept with a message ([] for a summary or a note)."""
    kept = message.extra.get(NAMESPACE)
    items = kept.get("items") if isinstance(kept, Mapping) else None
    return [cast(dict[str, Any], i) for i in items] if isinstance(items, list) else []


def item_kind(item: Mapping[str, Any]) -> str:
    """ "message" (user, system, developer), "output" (answers a call) or "assistant"."""
    kind = item.get("type")
    if kind in OUTPUTS:
        return "output"
    if (kind is None or kind == "message") and item.get("role") in _USER_ROLES:
        return "message"
    return "assistant"


def fingerprint(item: Mapping[str, Any]) -> str:
    """A key that is equal for an item as stored and as the SDK replays it to the model."""
    kept = {k: v for k, v in item.items() if k not in _VOLATILE and not k.startswith("_")}
    if "type" not in kept and "role" in kept:
        kept["type"] = "message"
    text = json.dumps(kept, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)
    # The log holds U+FFFD where the Runner's copy of an item may still hold a lone surrogate.
    return well_formed(text)


def flatten(messages: Sequence[Message]) -> Iterator[dict[str, Any]]:
    for message in messages:
        yield from message_to_items(message)


# -- internals -------------------------------------------------------------------------------
def _checked(raw: Any, index: int) -> dict[str, Any]:
    where = f"item {index}"
    if hasattr(raw, "model_dump") and not isinstance(raw, Mapping):
        raw = raw.model_dump(exclude_unset=True)
    if not isinstance(raw, Mapping):
        raise InvalidInputError(
            f"{where} is a {type(raw).__name__}, not an input item (a JSON object): {raw!r:.80}"
        )
    item = dict(raw)
    try:
        text = json.dumps(item, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:  # nested too deep: RecursionError
        raise InvalidInputError(
            f"{where} ({item.get('type') or item.get('role')!r}) cannot be stored as JSON: {exc}"
        ) from exc
    _check_keys(item, where)
    if not is_well_formed(text):
        # A model can stream half an emoji; the SDK's own sessions store such text, so store it
        # too, with U+FFFD in place of each lone surrogate, rather than lose the answer.
        item = cast(dict[str, Any], well_formed_data(item))
    kind, role = item.get("type"), item.get("role")
    if not isinstance(kind, str) and not isinstance(role, str):
        raise InvalidInputError(f"{where} has neither a 'type' nor a 'role': {item!r:.120}")
    if kind in (None, "message") and role not in (*_USER_ROLES, "assistant"):
        raise InvalidInputError(
            f"{where} is a message with role {role!r}; expected user, system, developer or "
            "assistant"
        )
    if (kind in PAIRED_CALLS or kind in OUTPUTS) and not (
        isinstance(item.get("call_id"), str) and item["call_id"]
    ):
        raise InvalidInputError(f"{where} is a {kind!r} item without a call_id: {item!r:.120}")
    return item


def _check_keys(item: Mapping[str, Any], where: str) -> None:
    """Refuse a key that is not a string: JSON would give ``{1: "x"}`` back as ``{"1": "x"}``."""
    stack: list[Any] = [item]
    while stack:
        value = stack.pop()
        children = value.values() if isinstance(value, Mapping) else value
        if isinstance(value, Mapping):
            for key in value:
                if not isinstance(key, str):
                    raise InvalidInputError(
                        f"{where} ({item.get('type') or item.get('role')!r}) has the key "
                        f"{key!r:.40}, which is not a string; JSON would give it back as "
                        f"{json.dumps(str(key))[:40]}: use string keys"
                    )
        stack.extend(c for c in children if isinstance(c, (Mapping, list, tuple)))


def _assistant(
    items: list[dict[str, Any]], batch: Sequence[Mapping[str, Any]], last: int
) -> Message:
    calls = tuple(
        ToolCall(item["call_id"], _call_name(item), _call_arguments(item))
        for item in items
        if item.get("type") in PAIRED_CALLS
    )
    text = _group_text(items)
    message = Message(
        "assistant",
        text if text or not calls else None,
        tool_calls=calls,
        extra={NAMESPACE: {"items": items}},
    )
    return _with_media(message, items, batch, last)


def _tool_output(item: dict[str, Any], batch: Sequence[Mapping[str, Any]], at: int) -> Message:
    message = Message(
        "tool",
        _output_text(item),
        tool_call_id=item["call_id"],
        extra={NAMESPACE: {"items": [item]}},
    )
    return _with_media(message, [item], batch, at)


def _with_media(
    message: Message,
    items: Sequence[Mapping[str, Any]],
    batch: Sequence[Mapping[str, Any]],
    at: int,
) -> Message:
    """`message` with the media of its `items` recorded, priced for where the batch says it is
    sent (`_sent_to`, looked up only when there is media)."""
    media = _media(items)
    return with_media(message, media, provider=_sent_to(batch, at) if media else None)


def _sent_to(batch: Sequence[Mapping[str, Any]], at: int) -> Provider | None:
    """The provider of the model named by the item at `at` or the nearest before it in the batch
    that names one (``provider_data.model``: for a tool output, the call it answers), else the
    nearest after it; None when no item of the batch names a model."""
    for position in (*range(at, -1, -1), *range(at + 1, len(batch))):
        data = batch[position].get("provider_data")
        model = data.get("model") if isinstance(data, Mapping) else None
        if isinstance(model, str) and model:
            return media_provider(model)
    return None


def _text_of(
    message: Message, items: Sequence[Mapping[str, Any]], *, earlier: bool = False
) -> str | None:
    """The text `items_to_messages` gives these items, to see whether a message still has it
    (`earlier`: the text an earlier ctxfold gave them, media data and all)."""
    if message.role == "tool":
        return _output_text(items[0], earlier=earlier)
    if message.role == "assistant":
        text = _group_text(items, earlier=earlier)
        return text if text or not message.tool_calls else None
    content = items[0].get("content")
    return content if isinstance(content, str) else _parts_text(content)


def _group_text(items: Sequence[Mapping[str, Any]], *, earlier: bool = False) -> str:
    texts: list[str] = []
    for item in items:
        kind = item.get("type")
        if kind in (None, "message"):
            content = item.get("content")
            texts.append(content if isinstance(content, str) else _parts_text(content) or "")
        elif kind in PAIRED_CALLS or kind == "reasoning":
            continue
        else:
            if not earlier and _generated_image(item) is not None:
                item = {k: v for k, v in item.items() if k != "result"}  # the image's data
            texts.append(json.dumps(item, sort_keys=True, separators=(",", ":")))
    return "\n".join(t for t in texts if t)


def _output_text(item: Mapping[str, Any], *, earlier: bool = False) -> str:
    output = item.get("output")
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        text = _parts_text(output)
        if text is not None:
            return text
        if not earlier:
            output = [part for part in output if _media_part(part) is None]
            if not output:
                return ""
    elif not earlier and _media_part(output) is not None:
        return ""  # a screenshot
    return json.dumps(output, sort_keys=True, separators=(",", ":"))


def _media(items: Sequence[Mapping[str, Any]]) -> list[MediaFacts]:
    """The images, files and audio these items send, measured: in a message's content or a
    tool's output (a list of parts, or a screenshot), and the image an image generation call
    made."""
    out: list[MediaFacts] = []
    for item in items:
        generated = _generated_image(item)
        if generated is not None:
            image_format = _text_field(item, "output_format") or "png"
            image = media_part("image", data=generated, media_type=f"image/{image_format}")
            out.append(measure(image))
            continue
        kind = item_kind(item)
        if kind == "assistant":
            continue  # an opaque item's JSON is its text, whatever it holds
        parts = item.get("content") if kind == "message" else item.get("output")
        for part in parts if isinstance(parts, list) else [parts]:
            found = _media_part(part)
            if found is not None:
                out.append(measure(found))
    return out


def _media_part(part: Any) -> dict[str, Any] | None:
    """The media part (`media_part`) for one input content part or screenshot; None for text,
    and for anything that is no image, file or audio."""
    if not isinstance(part, Mapping):
        return None
    kind = part.get("type")
    url, file_id = _text_field(part, "image_url"), _text_field(part, "file_id")
    if kind in ("input_image", "computer_screenshot") and (url or file_id):
        return media_part("image", url=url, file_id=file_id, detail=_text_field(part, "detail"))
    if kind == "input_file":
        data = _text_field(part, "file_data")
        inline = data is not None and not data.startswith("data:")
        return media_part(
            "document",
            url=None if inline else data or _text_field(part, "file_url"),
            data=data if inline else None,
            file_id=file_id,
            filename=_text_field(part, "filename"),
        )
    audio = part.get("input_audio") if kind == "input_audio" else None
    if isinstance(audio, Mapping) and isinstance(audio.get("data"), str):
        audio_format = _text_field(audio, "format")
        media_type = f"audio/{audio_format}" if audio_format else None
        return media_part("audio", data=audio["data"], media_type=media_type)
    return None


def _generated_image(item: Mapping[str, Any]) -> str | None:
    """The base64 data of the image an image generation call made (its ``result``)."""
    return _text_field(item, "result") if item.get("type") == "image_generation_call" else None


def _text_field(part: Mapping[str, Any], key: str) -> str | None:
    value = part.get(key)
    return value if isinstance(value, str) and value else None


def _parts_text(parts: Any) -> str | None:
    if not isinstance(parts, list):
        return None
    texts: list[str] = []
    for part in parts:
        if isinstance(part, Mapping):
            text = part.get("text") or part.get("refusal")
            if isinstance(text, str):
                texts.append(text)
    return "\n".join(texts) if texts else None


def _call_name(item: Mapping[str, Any]) -> str:
    name = item.get("name")
    return name if isinstance(name, str) and name else str(item["type"])


def _call_arguments(item: Mapping[str, Any]) -> str:
    for key in ("arguments", "input"):
        if isinstance(item.get(key), str):
            return cast(str, item[key])
    rest = {k: v for k, v in item.items() if k not in ("type", "id", "call_id", "status")}
    return json.dumps(rest, sort_keys=True, separators=(",", ":"))
