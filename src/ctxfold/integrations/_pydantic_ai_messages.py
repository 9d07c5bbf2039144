"""pydantic-ai messages to ctxfold messages and back, losslessly.

A `ModelResponse` becomes one assistant `Message`: its text parts are the text, its tool calls
the calls, and the whole response (thinking, native tool calls and returns, files, provider
fields) rides in ``extra["pydantic_ai"]``.

A `ModelRequest` is split into messages, one per part that speaks in the conversation: a system
prompt, a user prompt, a tool return (answering its call), retry feedback. `RetryPromptPart`
becomes a tool message when it answers a tool call and a user message when it does not. Parts
that only carry settings (deltas, instruction baselines, compactions) ride along with the next
speaking part of the same request. Each message keeps the request's own fields and its parts,
so consecutive messages from one request are regrouped into that request on the way back.

Images, documents and audio (`BinaryContent`, `ImageUrl`, `DocumentUrl`, `AudioUrl`,
`UploadedFile`, in a prompt, a tool return or a response's file) are never text: they are
measured, and what they cost (their size, not their data) recorded as the message's media
(`ctxfold.messages.media.with_media`), while the kept parts still carry them to the model; video
has no price and only leaves the text. They are priced by the rules of the provider whose model
they go to: the model called, when the caller knows it (the `sent_to` of `to_messages` and
`to_messages_at`: the capability passes the request's model, `model_provider`); else the one the
history tells of (`_answered_by`): a response names its model, and a request goes to the model
of the response that answers it, else of the one before it. A request converted with neither
(on its own, or before any model has answered, with no model called to tell) is priced as
OpenAI bills it. A tool return that is only an image has the text "". (An earlier ctxfold put
such a return's JSON, data and all, in the text; a message it logged that way still gives back
its parts.)

Lone surrogates (half a UTF-16 pair, which a model's answer may hold) become U+FFFD: the log
stores UTF-8.

A tool message whose content a compaction cleared gets the placeholder as the content of its
part; a summary or note becomes a request with one user (or system) prompt part, or a response
with one text part.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    UserPromptPart,
)
from pydantic_ai.models.fallback import FallbackModel

from ctxfold._unicode import well_formed_data
from ctxfold.errors import InvalidInputError
from ctxfold.integrations._common import KEY
from ctxfold.messages import Message, ToolCall
from ctxfold.messages._values import Role
from ctxfold.messages.media import MediaFacts, MediaKind, Provider, media_part, with_media
from ctxfold.tokens.attachments import measure, media_provider

NAMESPACE = "pydantic_ai"

SPEAKING = frozenset(
    {
        "system-prompt",
        "user-prompt",
        "tool-return",
        "retry-prompt",
        "retry-feedback",
        "tool-search-return",
        "capability-load-return",
    }
)
"""Request parts that say something in the conversation; every other request part only carries
settings and rides along with one of these."""
CALLS = frozenset({"tool-call", "tool-search-call", "capability-load-call"})
"""Response parts whose answer comes back as a request part with the same tool_call_id."""
MEDIA_KINDS = frozenset(
    {"binary", "image-url", "document-url", "audio-url", "video-url", "uploaded-file"}
)
"""Kinds of content that are media, never text."""
_URL_KINDS: dict[str, MediaKind] = {
    "image-url": "image",
    "document-url": "document",
    "audio-url": "audio",
}
SentTo = Callable[[], Provider | None]
"""Where messages are sent, as whose rules price their media (`model_provider`, or what the
history tells); asked only when a message holds media."""


def to_messages(
    message: Any, *, index: int, sourced: bool = False, sent_to: SentTo | None = None
) -> list[Message]:
    """One pydantic-ai message as ctxfold messages (one for a response, one per speaking part
    of a request). Raises `InvalidInputError` naming the message for a shape that cannot be
    carried. `sourced` and `sent_to`: as for `to_messages_at`, `index` the position."""
    (converted,) = to_messages_at([message], [0], names=[index], sourced=sourced, sent_to=sent_to)
    return converted


def to_messages_at(
    history: Sequence[Any],
    positions: Sequence[int],
    *,
    names: Sequence[int] | None = None,
    sourced: bool = False,
    sent_to: SentTo | None = None,
) -> list[list[Message]]:
    """`to_messages` of the history's messages at `positions`, serialized in one pass (a run's
    new prompt and response are logged together). An error names the message by its position,
    or by its entry in `names`. `sourced`: each message carries its key in the log,
    ``["m", position, part]`` under ``extra["ctxfold"]`` (`with_source`), made with it rather
    than copied to add it. `sent_to` gives the provider of the model the messages are sent to
    (`model_provider` of the request's model), asked only when a message holds media, which it
    then prices; when it is None or gives None, the history tells (`_answered_by`)."""
    if not positions:
        return []
    messages = [history[p] for p in positions]
    named = list(positions if names is None else names)
    for index, message in zip(named, messages, strict=True):
        if not isinstance(message, (ModelRequest, ModelResponse)):
            raise InvalidInputError(
                f"message {index} is a {type(message).__name__}, not a pydantic-ai ModelRequest "
                f"or ModelResponse: {message!r:.80}"
            )
    try:
        # JSON mode gives JSON types only (str keys, NaN as null, bytes as text) and raises for a
        # value it cannot represent, so the data needs no second pass through json.dumps.
        dumped = ModelMessagesTypeAdapter.dump_python(messages, mode="json")
    except Exception as exc:  # pydantic raises several kinds for a value it cannot serialize
        # The error of a batch names no message: name the first that fails on its own.
        index, message = next(
            ((i, m) for i, m in zip(named, messages, strict=True) if not _serializable(m)),
            (named[0], messages[0]),
        )
        raise InvalidInputError(
            f"message {index} ({message.kind}) cannot be stored as JSON: {exc}"
        ) from exc
    dumped = well_formed_data(dumped)
    out: list[list[Message]] = []
    for index, position, message, data in zip(named, positions, messages, dumped, strict=True):
        parts: list[dict[str, Any]] = data.pop("parts")
        source = index if sourced else None
        if message.kind == "response":
            made_by = _first(sent_to, functools.partial(_answered_by, message))
            out.append([_response(data, parts, source, made_by)])
        else:
            goes_to = _first(sent_to, _sent_to(history, position))
            out.append(_request(data, parts, index, source, goes_to))
    return out


def counted_form(message: Any) -> list[Message] | None:
    """What `to_messages` would give for the token count (roles, texts; no `extra`), made
    without serializing, for a request of plain-text prompts alone; None for anything else.

    A run's first request is judged against the budget on the event loop before it is
    logged; its full conversion waits for the worker thread that logs it."""
    if not isinstance(message, ModelRequest) or not message.parts:
        return None
    out: list[Message] = []
    for part in message.parts:
        # Exact types: a subclass may serialize differently.
        if type(part) is UserPromptPart and type(part.content) is str:
            out.append(Message("user", part.content))
        elif type(part) is SystemPromptPart and type(part.content) is str:
            out.append(Message("system", part.content))
        else:
            return None
    return out


def group_key(message: Message) -> Any:
    """Messages with the same key (not None) came from one request and regroup into it."""
    kept = message.extra.get(NAMESPACE)
    return kept.get("group") if isinstance(kept, Mapping) else None


def faithful(message: Message) -> bool:
    """True when `message` is a logged piece as it came, its text unchanged by any strategy:
    `to_model_message` would give back exactly the parts it was made from."""
    kept = message.extra.get(NAMESPACE)
    if not isinstance(kept, Mapping) or "header" not in kept:
        return False
    parts = kept["parts"]
    if message.role == "assistant":
        return _response_content(parts) == message.content
    return _has_request_text(parts, message.content)


def to_model_message(message: Message) -> ModelMessage:
    """One projected message as a pydantic-ai message (a request holding only its own parts)."""
    kept = message.extra.get(NAMESPACE)
    if isinstance(kept, Mapping) and "header" in kept:
        parts = [dict(p) for p in kept["parts"]]
        if message.role == "assistant":
            if _response_content(parts) != message.content:
                return _plain(message)
        elif not _has_request_text(parts, message.content):
            if message.role != "tool":
                return _plain(message)
            for part in parts:
                if part.get("part_kind") in SPEAKING:
                    part["content"] = message.text
        return ModelMessagesTypeAdapter.validate_python([{**kept["header"], "parts": parts}])[0]
    return _plain(message)


def regroup(pieces: Sequence[tuple[Any, ModelMessage]]) -> list[ModelMessage]:
    """Join consecutive requests of one group back into the request they were split from."""
    out: list[ModelMessage] = []
    last_key: Any = None
    for key, piece in pieces:
        previous = out[-1] if out else None
        if key is not None and key == last_key and isinstance(previous, ModelRequest):
            out[-1] = dataclasses.replace(previous, parts=[*previous.parts, *piece.parts])
        else:
            out.append(piece)
        last_key = key
    return out


def model_provider(model: Any) -> Provider | None:
    """Whose rules price media sent to `model`, a pydantic-ai `Model` (the request's, or the
    run's): its ``model_name``, else its ``system`` (the provider: "anthropic", "openai"), as
    `ctxfold.tokens.attachments.media_provider` reads them; a `FallbackModel` by its first model,
    which every request tries first. Wrapper models report the model they wrap. None when
    neither names a model or provider it knows (a Gemini model; `TestModel` and `FunctionModel`
    unless given a ``model_name``)."""
    while isinstance(model, FallbackModel) and model.models:
        model = model.models[0]
    names = (getattr(model, "model_name", None), getattr(model, "system", None))
    return media_provider(*(name for name in names if isinstance(name, str)))


# -- internals -------------------------------------------------------------------------------
def _first(called: SentTo | None, told: SentTo) -> SentTo:
    """Where the model called (`called`) is known, it prices the media; else what the history
    tells (`told`). The model called wins: the provider that receives the request bills its
    media, whichever model answered this request before (a run may call another model than
    the last run did), and the capability converts with the model each request goes to."""
    if called is None:
        return told

    def find() -> Provider | None:
        provider = called()
        return provider if provider is not None else told()

    return find


def _answered_by(response: ModelResponse) -> Provider | None:
    """The provider whose model wrote `response`, as pydantic-ai records it."""
    return media_provider(
        response.model_name, getattr(response, "model_id", None), response.provider_name
    )


def _sent_to(history: Sequence[Any], position: int) -> Callable[[], Provider | None]:
    """Where the request at `position` goes, worked out only when it holds media: to the model
    of the response that answers it, else (a request not answered yet) of the newest response
    before it; None when the history holds neither."""

    def find() -> Provider | None:
        later = range(position + 1, len(history))
        for at in (*later, *range(position - 1, -1, -1)):
            if isinstance(history[at], ModelResponse):
                return _answered_by(history[at])
        return None

    return find


def _serializable(message: ModelMessage) -> bool:
    try:
        ModelMessagesTypeAdapter.dump_python([message], mode="json")
    except Exception:  # pydantic raises several kinds for a value it cannot serialize
        return False
    return True


def _extra(kept: dict[str, Any], source: int | None, part: int) -> dict[str, Any]:
    if source is None:
        return {NAMESPACE: kept}
    return {NAMESPACE: kept, KEY: {"source": ["m", source, part]}}


def _response(
    header: dict[str, Any],
    parts: list[dict[str, Any]],
    source: int | None,
    answered_by: Callable[[], Provider | None],
) -> Message:
    calls = tuple(
        ToolCall(str(p["tool_call_id"]), str(p.get("tool_name") or p["part_kind"]), _args(p))
        for p in parts
        if p.get("part_kind") in CALLS and p.get("tool_call_id")
    )
    message = Message(
        "assistant",
        _response_content(parts),
        tool_calls=calls,
        extra=_extra({"header": header, "parts": parts}, source, 0),
    )
    media = _media(p.get("content") for p in parts if p.get("part_kind") == "file")
    return with_media(message, media, provider=answered_by() if media else None)


def _request(
    header: dict[str, Any],
    parts: list[dict[str, Any]],
    index: int,
    source: int | None,
    sent_to: Callable[[], Provider | None],
) -> list[Message]:
    chunks: list[list[dict[str, Any]]] = []
    riders: list[dict[str, Any]] = []
    for part in parts:
        riders.append(part)
        if part.get("part_kind") in SPEAKING:
            chunks.append(riders)
            riders = []
    if riders:
        # Settings parts after the last speaking part ride with it (or stand alone).
        if chunks:
            chunks[-1].extend(riders)
        else:
            chunks.append(riders)
    media = [_media(p.get("content") for p in c if p.get("part_kind") in SPEAKING) for c in chunks]
    provider = sent_to() if any(media) else None
    return [
        with_media(
            Message(
                *_role_and_id(chunk, index),
                extra=_extra({"header": header, "parts": chunk, "group": index}, source, part),
            ),
            found,
            provider=provider,
        )
        for part, (chunk, found) in enumerate(zip(chunks, media, strict=True))
    ]


def _role_and_id(
    chunk: list[dict[str, Any]], index: int
) -> tuple[Role, str | None, tuple[()], str | None]:
    speaking = next((p for p in chunk if p.get("part_kind") in SPEAKING), None)
    text = _request_text(chunk)
    if speaking is None:
        return "system", text, (), None
    kind = speaking["part_kind"]
    call_id = speaking.get("tool_call_id")
    if kind in ("tool-return", "tool-search-return", "capability-load-return") or (
        kind == "retry-prompt" and speaking.get("tool_name") and call_id
    ):
        if not isinstance(call_id, str) or not call_id:
            raise InvalidInputError(
                f"message {index}: a {kind!r} part has no tool_call_id to answer: {speaking!r:.120}"
            )
        return "tool", text, (), call_id
    return ("system" if kind == "system-prompt" else "user"), text, (), None


def _request_text(parts: Sequence[Mapping[str, Any]], *, earlier: bool = False) -> str:
    texts = [
        _content_text(p.get("content"), earlier=earlier)
        for p in parts
        if p.get("part_kind") in SPEAKING
    ]
    return "\n".join(t for t in texts if t)


def _has_request_text(parts: Sequence[Mapping[str, Any]], text: str | None) -> bool:
    """Whether `text` is the text of these request parts: as this version reads them, or as an
    earlier one did, which put media (data and all) in the text."""
    return _request_text(parts) == text or _request_text(parts, earlier=True) == text


def _response_content(parts: Sequence[Mapping[str, Any]]) -> str | None:
    # None only when the response makes calls and says nothing, as a chat message would be.
    texts = [p["content"] for p in parts if p.get("part_kind") == "text" and p.get("content")]
    if texts:
        return "\n".join(texts)
    return None if any(p.get("part_kind") in CALLS for p in parts) else ""


def _content_text(content: Any, *, earlier: bool = False) -> str:
    if isinstance(content, str):
        return content
    if not earlier and _is_media(content):
        return ""
    if not earlier and isinstance(content, list) and any(_is_media(c) for c in content):
        content = [c for c in content if not _is_media(c)]
        if not content:
            return ""
    if isinstance(content, list) and all(isinstance(c, str) for c in content):
        return "\n".join(content)
    if isinstance(content, list):
        texts = [c for c in content if isinstance(c, str)]
        if texts:
            return "\n".join(texts)
    return "" if content is None else json.dumps(content, sort_keys=True, separators=(",", ":"))


def _is_media(content: Any) -> bool:
    return isinstance(content, Mapping) and content.get("kind") in MEDIA_KINDS


def _media(contents: Iterable[Any]) -> list[MediaFacts]:
    """The images, documents and audio in these contents (each one item or a list of them),
    measured from the part `media_part` builds for each."""
    out: list[MediaFacts] = []
    for content in contents:
        for item in content if isinstance(content, list) else [content]:
            if _is_media(item):
                found = _media_part(item)
                if found is not None:
                    out.append(measure(found))
    return out


def _media_part(item: Mapping[str, Any]) -> dict[str, Any] | None:
    kind, media_type = item["kind"], _field(item, "media_type")
    vendor = item.get("vendor_metadata")
    detail = _field(vendor, "detail") if isinstance(vendor, Mapping) else None
    if kind in _URL_KINDS:
        return media_part(_URL_KINDS[kind], url=_field(item, "url"), detail=detail)
    prefix = (media_type or "").partition("/")[0]
    if prefix == "video" or kind == "video-url":
        return None  # no price: left out of the text, and not counted
    kind_of: MediaKind = (
        "image" if prefix == "image" else "audio" if prefix == "audio" else "document"
    )
    if kind == "binary":
        return media_part(kind_of, data=_field(item, "data"), media_type=media_type, detail=detail)
    return media_part(kind_of, file_id=_field(item, "file_id"), detail=detail)


def _field(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) and value else None


def _args(part: Mapping[str, Any]) -> str:
    args = part.get("args")
    if isinstance(args, str):
        return args
    return json.dumps(args if args is not None else {}, sort_keys=True, separators=(",", ":"))


def _plain(message: Message) -> ModelMessage:
    if message.role == "assistant":
        return ModelResponse(parts=[TextPart(message.text)])
    if message.role == "system":
        return ModelRequest(parts=[SystemPromptPart(message.text)])
    return ModelRequest(parts=[UserPromptPart(message.text)])
