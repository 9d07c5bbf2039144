"""The attachments a message carries: images, documents, audio and files kept in its `extra`.

A message's `content` holds only its text. When it came from a provider with image or document
parts, the adapters keep those parts in `extra` so that writing the message back sends them
again. They cost tokens too, and far more than their share of the text: a counter asks
`attachments` what a message would send, and prices each part (see `ctxfold.tokens`).

A message made outside the adapters (the framework integrations make them from a LangChain,
pydantic-ai or Agents SDK message) keeps its media where its maker sends it from, in a shape
ctxfold does not read. Its maker records under ``extra["media"]`` (`with_media`) what pricing
needs of that media, not the media: each part's kind and size, measured once
(`ctxfold.tokens.attachments.measure`: an image's width and height, a PDF's pages, audio's
seconds, the byte count of inline data), and, when its maker could tell where the message is
sent, that provider, whose rules then price it; else it is priced as OpenAI bills it. The record
holds no data, so the log keeps each image once, where its maker sends it from; it is only read
here, never sent.

Only parts that would really be sent are returned: once a strategy has replaced a message's
text, the adapters no longer write its stale parts, and neither are they counted; nor is a
media record once the text it was recorded with is gone.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from ctxfold.errors import InvalidInputError
from ctxfold.messages._show import show
from ctxfold.messages._values import Message
from ctxfold.messages.anthropic import sent_blocks
from ctxfold.messages.openai import message_to_openai

Provider = Literal["openai", "anthropic"]

MediaKind = Literal["image", "document", "audio"]

MEDIA = "media"
"""The key in `Message.extra` of a media record (`with_media`)."""
MEASURED = "measured"
"""The `Attachment.kind` of a part of a media record: its measured facts (`MediaFacts`)."""

_MEDIA_KINDS = frozenset({"image", "document", "audio"})
_OPENAI_MEDIA = frozenset({"image_url", "input_audio", "file"})
_DATA_URL = re.compile(r"data:([^;,]*)(?:;[^;,]*)*;base64,", re.IGNORECASE)
_AUDIO_FORMATS = {"mpeg": "mp3", "x-wav": "wav", "wave": "wav", "x-mp3": "mp3"}
_ANTHROPIC_MEDIA = frozenset({"image", "document"})
_PROVIDERS = frozenset({"openai", "anthropic"})


@dataclass(frozen=True)
class Attachment:
    """One media part of a message, as the provider's API shapes it.

    - `provider`: whose shape `part` is in ("openai" or "anthropic"), which is also whose
      pricing applies.
    - `kind`: the part's type: "image_url", "input_audio", "file" (OpenAI), "image",
      "document" (Anthropic); or "measured" (`MEASURED`) for a part of a media record
      (`with_media`), which is not a part but what it costs, and whose `provider` is the one
      its facts name (`priced_by`).
    - `part`: the part itself (for example ``{"type": "image", "source": {...}}``), or a media
      record's `MediaFacts`.
    """

    provider: Provider
    kind: str
    part: Mapping[str, Any]


class _Kind(TypedDict):
    type: MediaKind


class MediaFacts(_Kind, total=False):
    """What pricing needs of one image, document or audio clip, measured once from its data
    (`ctxfold.tokens.attachments.measure`): one part of a media record (`with_media`). A fact
    that could not be measured is left out, and the documented default of
    `ctxfold.tokens.attachments` prices it.

    - `type`: "image", "document" or "audio".
    - `bytes`: the size of its data, when it was given inline (base64); left out when it was
      given by reference.
    - `url`, `file_id`: what names it, when it was given by reference (an http(s) URL, whole;
      a provider's file id). Never a ``data:`` URL.
    - `width`, `height`: an image's size in pixels, when its header could be read.
    - `detail`: an image's detail ("low", "high", "auto"), as given.
    - `pages`: a document's pages, when it is a PDF whose pages could be counted.
    - `seconds`: the length of audio whose header (WAV) gives it.
    - `provider`: whose rules price it ("openai" or "anthropic"), when its maker could tell
      where it is sent; left out when it could not, and OpenAI's rules apply (`priced_by`).
    """

    bytes: int
    url: str
    file_id: str
    width: int
    height: int
    detail: str
    pages: int
    seconds: float
    provider: Provider


def attachments(message: Message) -> list[Attachment]:
    """The media parts `message` would send, in order; [] for a text-only message.

    >>> from ctxfold.messages import from_openai
    >>> [m] = from_openai([{"role": "user", "content": [
    ...     {"type": "text", "text": "what is this?"},
    ...     {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]}])
    >>> [a.kind for a in attachments(m)]
    ['image_url']
    """
    out: list[Attachment] = []
    if not message.extra:  # the common case, kept cheap: counters ask for every message
        return out
    openai, anthropic = message.extra.get("openai"), message.extra.get("anthropic")
    if _holds(openai, "parts", _OPENAI_MEDIA):
        content = message_to_openai(message).get("content")
        for part in content if isinstance(content, list) else ():
            if isinstance(part, Mapping) and _kind(part) in _OPENAI_MEDIA:
                out.append(Attachment("openai", _kind(part), part))
    if _holds(anthropic, "blocks", _ANTHROPIC_MEDIA) or _holds(
        anthropic, "block", _ANTHROPIC_MEDIA
    ):
        for block in _anthropic_blocks(message):
            out.append(Attachment("anthropic", _kind(block), block))
    recorded = message.extra.get(MEDIA)
    if isinstance(recorded, Mapping) and _DIGEST in recorded:
        current = recorded[_DIGEST] == _digest(message.content)
        parts = recorded.get("parts") if current else None
        for part in parts if isinstance(parts, list) else ():
            if isinstance(part, Mapping) and _kind(part) in _MEDIA_KINDS:
                out.append(Attachment(priced_by(part), MEASURED, part))
    return out


def priced_by(facts: Mapping[str, Any]) -> Provider:
    """Whose rules price one part of a media record: the provider its facts name, else OpenAI
    (a record whose maker could not tell, or made before ctxfold recorded it, or a value that
    names neither provider).

    >>> priced_by({"type": "image", "provider": "anthropic"}), priced_by({"type": "image"})
    ('anthropic', 'openai')
    """
    return "anthropic" if facts.get("provider") == "anthropic" else "openai"


def with_media(
    message: Message, media: Iterable[Mapping[str, Any]], *, provider: Provider | None = None
) -> Message:
    """`message` with what its media costs recorded under ``extra["media"]``, so that it is
    counted while its text stays as it is now; `message` itself when there is none.

    `media` holds the measured facts of each image, document or audio clip (`MediaFacts`;
    `ctxfold.tokens.attachments.measure` reads them from the part `media_part` builds); anything
    else, a content part included, raises `InvalidInputError`: it would never be counted.
    `provider` is where the message is sent, when its maker can tell
    (`ctxfold.tokens.attachments.media_provider`): every part records it, and is priced by its
    rules. None, when the maker cannot tell, records nothing more, and the parts are priced as
    OpenAI bills them (unless their own facts name a provider).

    The record is ``{"text_digest": ..., "parts": [facts, ...]}``, JSON that holds no data: a
    logged message keeps an inline image once, where its maker sends it from, and the record of
    a 1024 x 1024 screenshot takes some 130 bytes. It holds a digest of the text it was made
    with (BLAKE2b, 128 bits), not the text: once a strategy replaces the message's text (a
    cleared tool result, a summary), the media it recorded is no longer sent, and `attachments`
    no longer returns it.

    >>> m = with_media(Message("user", "what is this?"),
    ...                [{"type": "image", "width": 1024, "height": 1024, "bytes": 301_234}])
    >>> [a.kind for a in attachments(m)], attachments(m.replace(content="[cleared]"))
    (['measured'], [])
    """
    if provider is not None and provider not in _PROVIDERS:
        raise InvalidInputError(
            f"with_media takes provider 'openai', 'anthropic' or None, not {show(provider)}"
        )
    parts: list[dict[str, Any]] = []
    for facts in media:
        if not (isinstance(facts, Mapping) and _kind(facts) in _MEDIA_KINDS):
            raise InvalidInputError(
                f"with_media takes the measured facts of media (type image, document or audio),"
                f" not {show(facts)}; measure a content part with"
                f" ctxfold.tokens.attachments.measure first"
            )
        parts.append(dict(facts) if provider is None else {**facts, "provider": provider})
    if not parts:
        return message
    record = {_DIGEST: _digest(message.content), "parts": parts}
    return message.replace(extra={**message.extra, MEDIA: record})


def media_part(
    kind: MediaKind,
    *,
    url: str | None = None,
    data: str | None = None,
    media_type: str | None = None,
    detail: str | None = None,
    filename: str | None = None,
    file_id: str | None = None,
) -> dict[str, Any]:
    """One image, document or audio clip as the Chat Completions content part it is priced as
    (`ctxfold.tokens.attachments.measure` reads its `MediaFacts` from it).

    Give its `url` (an http(s) URL or a ``data:`` URL), or its base64 `data` and `media_type`,
    or only the `file_id` a provider stored it under. An image keeps its `detail`, a document
    its `filename`. What cannot be seen is priced by the documented defaults of
    `ctxfold.tokens.attachments`: an image of unknown size, a document of unseen pages, and
    audio given only by reference, which OpenAI does not take, as nothing.

    >>> media_part("image", data="iVBO", media_type="image/png", detail="low")
    {'type': 'image_url', 'image_url': {'url': 'data:image/png;base64,iVBO', 'detail': 'low'}}
    >>> media_part("document", file_id="file-1", filename="a.pdf")
    {'type': 'file', 'file': {'file_id': 'file-1', 'filename': 'a.pdf'}}
    """
    if kind == "audio":
        inline = _split(url) if data is None and url is not None else (media_type, data)
        if inline[1] is None:  # by reference: nothing to measure, and OpenAI takes no such audio
            return {"type": "input_audio", "input_audio": _given(url=url, file_id=file_id)}
        subtype = (inline[0] or "").rpartition("/")[2].lower()
        audio = {"data": inline[1], "format": _AUDIO_FORMATS.get(subtype, subtype)}
        return {"type": "input_audio", "input_audio": audio}
    if data is not None:
        url = f"data:{media_type or 'application/octet-stream'};base64,{data}"
    if kind == "image":
        return {"type": "image_url", "image_url": _given(url=url, file_id=file_id, detail=detail)}
    if url is not None and url.startswith("data:"):
        file = _given(file_data=url, filename=filename)
    else:
        file = _given(file_url=url, file_id=file_id, filename=filename)
    return {"type": "file", "file": file}


_DIGEST = "text_digest"


def _digest(text: str | None) -> str | None:
    """What a media record keeps of the text it was made with, to see whether a message still
    has it: BLAKE2b (128 bits, hex) of its UTF-8; None for no content."""
    if text is None:
        return None
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def _given(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def _split(url: str) -> tuple[str | None, str | None]:
    """(media type, base64 data) of a ``data:`` URL; (None, None) for any other URL."""
    found = _DATA_URL.match(url)
    return (found.group(1), url[found.end() :]) if found else (None, None)


def _anthropic_blocks(message: Message) -> Iterator[Mapping[str, Any]]:
    try:
        sent = sent_blocks(message)
    except InvalidInputError:
        return  # the message cannot be written for Anthropic at all, so it sends nothing
    for block in _walk(sent):
        if _kind(block) in _ANTHROPIC_MEDIA:
            yield block


def _walk(blocks: Any) -> Iterator[Mapping[str, Any]]:
    """Blocks and, inside tool results, the blocks of their content."""
    for block in blocks if isinstance(blocks, list) else ():
        if not isinstance(block, Mapping):
            continue
        yield block
        if block.get("type") == "tool_result":
            yield from _walk(block.get("content"))


def _holds(kept: Any, key: str, kinds: frozenset[str]) -> bool:
    """Whether the kept parts under `key` hold any media at all (a cheap test, so text-only
    messages pay nothing)."""
    if not isinstance(kept, Mapping) or key not in kept:
        return False
    stack = [kept[key]]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, Mapping):
            if _kind(item) in kinds:
                return True
            if _kind(item) == "tool_result":
                stack.append(item.get("content"))
    return False


def _kind(part: Mapping[str, Any]) -> str:
    kind = part.get("type")
    return kind if isinstance(kind, str) else ""
