"""LangChain messages to ctxfold messages and back, losslessly.

Each LangChain message is stored whole, in LangChain's own serialized form
(``message_to_dict``), under ``extra["langchain"]``: message ids, `ToolMessage.status`,
`artifact`, `tool_call_id`, content blocks (thinking included), `additional_kwargs` and
`response_metadata` all come back as they went in. The ctxfold fields (role, text, tool calls)
are derived from it, so that counts, strategies and summaries read the conversation.

Images, files and audio in the content blocks (LangChain's standard blocks, or OpenAI's or
Anthropic's, which LangChain reads as standard ones) are never text: they are measured, and
what they cost (their size, not their data) recorded as the message's media
(`ctxfold.messages.media.with_media`), in a tool message as anywhere else, while the stored
message still carries them to the model. They are priced by the rules of the provider of the
chat model the message is sent to, when the caller knows it (`to_message`'s `sent_to`: the
middleware passes the agent's model, `model_provider`). Else by what the message says of itself
(`_written_for`): an AI message names the model that wrote it, and a message whose media blocks
are written in Anthropic's shape (a ``source``) is written for Claude, one in OpenAI's
(``image_url``, ``input_audio``) for OpenAI. A message that says neither (a human or tool message
in LangChain's standard blocks, which any chat model takes) converted with no model to tell is
priced as OpenAI bills it.

Going back, a message whose text is unchanged is the stored message itself; a tool message whose
content a compaction cleared keeps everything but the content; a summary or note becomes a plain
`HumanMessage`, `AIMessage` or `SystemMessage`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    message_to_dict,
    messages_from_dict,
)

from ctxfold._unicode import is_well_formed, well_formed, well_formed_data
from ctxfold.errors import InvalidInputError
from ctxfold.messages import Message, ToolCall
from ctxfold.messages._values import Role
from ctxfold.messages.media import MediaFacts, MediaKind, Provider, media_part, with_media
from ctxfold.tokens.attachments import measure, media_provider

NAMESPACE = "langchain"

_ROLES: dict[str, Role] = {
    "human": "user",
    "ai": "assistant",
    "AIMessageChunk": "assistant",
    "HumanMessageChunk": "user",
    "system": "system",
    "SystemMessageChunk": "system",
    "tool": "tool",
    "ToolMessageChunk": "tool",
}
_CHAT_ROLES: dict[str, Role] = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "system": "system",
    "developer": "system",
}


SentTo = Callable[[], Provider | None]
"""Where a message is sent, as whose rules price its media (`model_provider` of the chat model
called); asked only when a message holds media."""


def to_message(message: Any, *, index: int, sent_to: SentTo | None = None) -> Message:
    """One LangChain message as a ctxfold `Message` (its serialized form kept in extra).

    `sent_to` gives the provider of the chat model the message is sent to (`model_provider` of
    the agent's model), asked only when the message holds media, which it then prices; when it
    is None or gives None, the message's media is priced by what the message says of itself.

    Raises `InvalidInputError` naming the message (position and id) when it cannot be carried:
    not a LangChain message, a type ctxfold cannot give a role, a field that is not JSON
    (an `artifact` holding an object, say).
    """
    where = f"message {index}"
    if not isinstance(message, BaseMessage):
        raise InvalidInputError(
            f"{where} is a {type(message).__name__}, not a LangChain message: {message!r:.80}"
        )
    where += f" ({message.type}, id {message.id!r})"
    stored = message_to_dict(message)
    try:
        dumped = json.dumps(stored, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{where} cannot be stored as JSON: {exc}") from exc
    media = _media(message)
    if not is_well_formed(dumped):
        stored = _replace_surrogates(stored)
        media = _replace_surrogates(media)
    role = _role(message, where)
    tool_calls: tuple[ToolCall, ...] = ()
    if isinstance(message, AIMessage):
        tool_calls = tuple(
            ToolCall(str(call["id"]), call["name"], json.dumps(call["args"], sort_keys=True))
            for call in message.tool_calls
            if call.get("id")
        )
    tool_call_id = getattr(message, "tool_call_id", None) if role == "tool" else None
    if role == "tool" and not tool_call_id:
        raise InvalidInputError(f"{where} is a tool message without a tool_call_id")
    text = _replace_surrogates(str(message.text))
    converted = Message(
        role,
        text if text or not tool_calls else None,
        tool_calls=_replace_surrogates(tool_calls),
        tool_call_id=_replace_surrogates(tool_call_id),
        name=_replace_surrogates(message.name),
        extra={NAMESPACE: stored},
    )
    return with_media(converted, media, provider=_priced_by(message, sent_to) if media else None)


def _replace_surrogates(value: Any) -> Any:
    """`value` made `well_formed_data` (a model may answer with half an emoji; no store can
    hold it), tool calls included."""
    if isinstance(value, ToolCall):
        return ToolCall(
            well_formed(value.id),
            well_formed(value.name),
            well_formed(value.arguments),
            value.extra,
        )
    if isinstance(value, (list, tuple)):
        return type(value)(_replace_surrogates(v) for v in value)
    return well_formed_data(value)


def from_message(message: Message) -> AnyMessage:
    """The LangChain message a projected ctxfold message stands for."""
    return converted(message)[0]


def unchanged(message: Message) -> bool:
    """True when `message` is a logged LangChain message whose text no strategy changed, so
    `from_message` gives back the stored message itself; cheap for plain-text content."""
    stored = kept(message)
    if stored is None:
        return False
    content = stored.get("data", {}).get("content")
    if isinstance(content, str):
        return (content if content or not message.tool_calls else None) == message.content
    return converted(message)[1]


def converted(message: Message) -> tuple[AnyMessage, bool]:
    """`from_message`, and whether it is the stored message itself (no strategy changed it)."""
    stored = kept(message)
    if stored is not None:
        original = cast(AnyMessage, messages_from_dict([dict(stored)])[0])
        if _text(original, message) == message.content:
            return original, True
        if message.role == "tool":
            data = dict(stored["data"], content=message.text)
            cleared = messages_from_dict([{"type": stored["type"], "data": data}])[0]
            return cast(AnyMessage, cleared), False
    # A summary or a note (or text a strategy rewrote): a plain message in its role.
    if message.role == "assistant":
        return AIMessage(content=message.text), False
    if message.role == "system":
        return SystemMessage(content=message.text), False
    return HumanMessage(content=message.text), False


def logged_with(message: BaseMessage, content: Any) -> bool:
    """Whether `message` holds `content` (the content of its stored form, as a store gives it
    back) as `to_message` stores it: lone surrogates made U+FFFD, tuples read back as lists,
    content blocks as plain data. False when its content is not JSON (it differs from anything
    logged)."""
    try:
        held = _as_stored(message_to_dict(message)["data"].get("content"))
        return bool(held == _as_stored(content))
    except (TypeError, ValueError):
        return False


def _as_stored(value: Any) -> Any:
    return json.loads(json.dumps(well_formed_data(value), ensure_ascii=False))


def kept(message: Message) -> Mapping[str, Any] | None:
    stored = message.extra.get(NAMESPACE)
    return cast(Mapping[str, Any], stored) if isinstance(stored, Mapping) else None


def from_messages(messages: Sequence[Message]) -> list[AnyMessage]:
    return [from_message(m) for m in messages]


def _text(original: BaseMessage, message: Message) -> str | None:
    text = str(original.text)
    return text if text or not message.tool_calls else None


_MEDIA_KINDS: dict[str, MediaKind] = {"image": "image", "file": "document", "audio": "audio"}


def _media(message: BaseMessage) -> list[MediaFacts]:
    """The images, files and audio in the message's content blocks, measured from the part
    `media_part` builds for each (video has no price, and is left out)."""
    content = message.content
    if isinstance(content, str) or all(
        isinstance(block, str) or block.get("type") == "text" for block in content
    ):
        return []  # nothing to read: the common case, without LangChain's block conversion
    try:
        blocks = message.content_blocks
    except (KeyError, TypeError, ValueError):
        # A block LangChain cannot read (a legacy one missing its data): the message is carried
        # as it is, as before, and LangChain says what is wrong with it if it is ever sent.
        return []
    out: list[MediaFacts] = []
    for standard in blocks:
        block = cast(Mapping[str, Any], standard)
        if block.get("type") == "non_standard" and isinstance(block.get("value"), Mapping):
            block = _openai_image(block["value"])
        kind = _MEDIA_KINDS.get(str(block.get("type")))
        url, data, file_id = (_field(block, k) for k in ("url", "base64", "file_id"))
        if kind is None or not (url or data or file_id):
            continue
        extras = block.get("extras")
        extras = extras if isinstance(extras, Mapping) else {}
        part = media_part(
            kind,
            url=url,
            data=data,
            media_type=_field(block, "mime_type"),
            file_id=file_id,
            detail=_field(extras, "detail"),
            filename=_field(block, "filename") or _field(extras, "filename"),
        )
        out.append(measure(part))
    return out


def model_provider(model: Any) -> Provider | None:
    """Whose rules price media sent to `model`, a LangChain chat model (`ModelRequest.model`),
    from the names it reports: its ``model_name``, ``model`` or ``model_id`` attribute (ChatOpenAI
    names its model in the first, ChatAnthropic in the second, Bedrock's models in the third),
    else the LangSmith tracing params every chat model fills (``ls_model_name``, and
    ``ls_provider``: "anthropic", "openai"). None when none of them names a model or a provider
    `ctxfold.tokens.attachments.media_provider` knows (a Gemini model, a fake model).
    """
    try:
        names = [
            getattr(model, attribute, None) for attribute in ("model_name", "model", "model_id")
        ]
        found = media_provider(*(name for name in names if isinstance(name, str)))
        if found is None and callable(getattr(model, "_get_ls_params", None)):
            params = model._get_ls_params()
            names = [params.get("ls_model_name"), params.get("ls_provider")]
            found = media_provider(*(name for name in names if isinstance(name, str)))
    except Exception:
        # Best effort, and never worth failing the agent's call for: a configurable model builds
        # a model to answer an attribute, a subclass's tracing params may fail. The media is then
        # priced by what its message says.
        return None
    return found


def _priced_by(message: BaseMessage, sent_to: SentTo | None) -> Provider | None:
    """Whose rules price `message`'s media: the chat model's it is sent to, when known, wins
    over what the message says of itself (`_written_for`), which only stands in for it. The
    bill comes from the provider that receives the request, whichever model wrote the message
    (a thread's earlier answers may be another model's) and whichever API's shape its blocks are
    in (LangChain reads Anthropic's and OpenAI's as its standard blocks, which any chat model
    takes)."""
    called = sent_to() if sent_to is not None else None
    return called if called is not None else _written_for(message)


def _written_for(message: BaseMessage) -> Provider | None:
    """The provider `message` says it is written for: the one whose model wrote it (an AI
    message's ``response_metadata``, as the provider's chat model fills it in), else the one
    whose shape its media blocks are written in; None when it says neither, or both."""
    if isinstance(message, AIMessage):
        meta = message.response_metadata
        names = (meta.get(key) for key in ("model_name", "model", "model_provider"))
        found = media_provider(*(name for name in names if isinstance(name, str)))
        if found is not None:
            return found
    blocks = message.content if isinstance(message.content, list) else []
    shapes = {
        shape
        for block in blocks
        if isinstance(block, Mapping) and (shape := _shape(block)) is not None
    }
    return shapes.pop() if len(shapes) == 1 else None


def _shape(block: Mapping[str, Any]) -> Provider | None:
    """Whose API a media block is written for: Anthropic's image and document blocks hold a
    ``source``, OpenAI's parts are typed after their field; None for LangChain's standard
    blocks (a ``url``, ``base64`` or ``file_id`` of their own) and for text."""
    kind = block.get("type")
    if kind in ("image", "document") and isinstance(block.get("source"), Mapping):
        return "anthropic"
    if kind in _OPENAI_SHAPES or (kind == "file" and isinstance(block.get("file"), Mapping)):
        return "openai"
    return None


_OPENAI_SHAPES = frozenset({"image_url", "input_audio", "input_image", "input_file"})


def _openai_image(value: Mapping[str, Any]) -> Mapping[str, Any]:
    """An OpenAI image part LangChain leaves as it is (its url a bare string, or the Responses
    API's ``input_image``) as a standard image block; any other value as it is."""
    if value.get("type") == "image_url" and isinstance(value.get("image_url"), str):
        return {"type": "image", "url": value["image_url"]}
    if value.get("type") == "input_image":
        return {
            "type": "image",
            "url": value.get("image_url"),
            "file_id": value.get("file_id"),
            "extras": {"detail": value.get("detail")},
        }
    return value


def _field(block: Mapping[str, Any], key: str) -> str | None:
    value = block.get(key)
    return value if isinstance(value, str) and value else None


def _role(message: BaseMessage, where: str) -> Role:
    if message.type == "chat":
        role = _CHAT_ROLES.get(str(getattr(message, "role", "")))
        if role is None:
            raise InvalidInputError(
                f"{where} is a chat message with role {getattr(message, 'role', None)!r}; "
                "expected user, assistant, system or developer"
            )
        return role
    role = _ROLES.get(message.type)
    if role is None:
        raise InvalidInputError(
            f"{where} has type {message.type!r}, which ctxfold cannot carry; expected a human, "
            "ai, system, tool or chat message"
        )
    return role
