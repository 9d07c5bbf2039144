"""Tokens of images, documents and audio, priced as the providers bill them.

A message's attachments are never counted as text: a 400 KB base64 image is not 100,000 tokens
of characters, nor the handful of tokens of its caption. Each part is priced by the rule of the
API whose shape it is in (`ctxfold.messages.media`), from the part's own size when its data is
inline, else from a documented conservative default.

OpenAI images (the tile rule of the GPT-4o family and the o-series):
  ``detail: "low"`` costs 85 tokens. Otherwise the image is scaled to fit 2,048 x 2,048, then
  so that its shorter side is at most 768 px, and costs 85 + 170 per 512-px tile. ``"auto"``
  and a missing detail are priced as high, the larger of the two. Unknown dimensions (an image
  by URL) cost the most this rule can charge: 85 + 170 x 8 = 1,445.

Anthropic images:
  ``width * height / 750`` tokens, after the API's own downscaling of images whose long edge
  exceeds 1,568 px; never more than 1,600 (the API scales larger images down to about that).
  Unknown dimensions cost 1,600.

Documents (Anthropic ``document`` blocks, OpenAI ``file`` parts):
  a PDF is sent as the text and an image of each page, 1,500 to 3,000 tokens a page by
  Anthropic's account; ctxfold charges the upper figure, 3,000 per page. Pages are read from
  the PDF; when they cannot be seen, one page per 50 KB of data; a document by URL or file id
  is charged `UNSEEN_DOCUMENT_TOKENS`. A plain-text document counts as its text.

Audio (OpenAI ``input_audio``):
  about 10 tokens per second of sound; the length comes from a WAV header, else from the data
  size at a low bitrate (32 kbit/s, so that compressed audio is not undercounted). Audio given
  only by reference costs nothing: OpenAI takes none.

One rule for both ways a message holds media: an OpenAI part kept by the adapters is first
`measure`d (its image's size, its PDF's pages, its audio's seconds, the size of its data), and
those facts are priced by `measured_tokens`; the media record the integrations keep
(`ctxfold.messages.media.with_media`) holds the same facts, measured once when it was made, and
is priced by the same `measured_tokens`. A record's facts are read as untrusted: a fact of the
wrong type or out of range is ignored, and the default for what it would have said applies.

A record's facts also say whose rules price them (``"provider": "anthropic"``) when the
integration that made them could tell where the message is sent (`media_provider` reads that
from the model names a framework reports). Only an image's price depends on it: documents are
priced by the one rule above whoever reads them, and audio by OpenAI's, the only one of the two
that takes it. Facts that do not say, which is every record made before ctxfold recorded it,
are priced by OpenAI's rules, as they always were.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, Literal

from ctxfold.errors import InvalidInputError
from ctxfold.messages import Message
from ctxfold.messages._show import show
from ctxfold.messages.media import (
    MEASURED,
    Attachment,
    MediaFacts,
    Provider,
    attachments,
    priced_by,
)
from ctxfold.tokens._media_data import (
    decoded_size,
    image_size,
    pdf_pages,
    source_data,
    split_data_url,
    wav_seconds,
)
from ctxfold.tokens.catalog import lookup

OPENAI_LOW_DETAIL = 85
"""Tokens of an OpenAI image at ``detail: "low"``, and the base of a high-detail one."""
OPENAI_TILE = 170
"""Tokens per 512-px tile of a high-detail OpenAI image."""
OPENAI_UNKNOWN_IMAGE = OPENAI_LOW_DETAIL + OPENAI_TILE * 8
"""Tokens of an OpenAI image of unknown size: the most the tile rule can charge (1,445)."""

ANTHROPIC_PIXELS_PER_TOKEN = 750
"""Anthropic charges one token per 750 pixels of an image."""
ANTHROPIC_LONG_EDGE = 1_568
"""Anthropic scales an image down until its long edge is at most this many pixels."""
ANTHROPIC_MAX_IMAGE = 1_600
"""Most tokens one Anthropic image costs, and the price of one of unknown size."""

PAGE_TOKENS = 3_000
"""Tokens charged per page of a PDF (text plus the page's image; the upper figure)."""
BYTES_PER_PAGE = 50_000
"""Bytes of PDF data assumed per page when the page count cannot be read."""
UNSEEN_DOCUMENT_TOKENS = 10 * PAGE_TOKENS
"""Tokens of a document whose data ctxfold cannot see (a URL, a file id): ten pages."""

AUDIO_TOKENS_PER_SECOND = 10
"""Tokens per second of audio input."""
AUDIO_BYTES_PER_SECOND = 4_000
"""Bytes per second assumed for audio of unknown format (32 kbit/s)."""


def attachment_tokens(message: Message, count_text: Callable[[str], int]) -> int:
    """Tokens of every attachment `message` would send (0 for a text-only message).

    `count_text` counts the text of a plain-text document with the caller's own counter.

    >>> from ctxfold.messages import from_anthropic
    >>> [m] = from_anthropic([{"role": "user", "content": [
    ...     {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}]}])
    >>> attachment_tokens(m, len)
    1600
    """
    return sum(part_tokens(a, count_text) for a in attachments(message))


def part_tokens(attachment: Attachment, count_text: Callable[[str], int]) -> int:
    """Tokens of one attachment, by the rule of its provider and kind (see the module)."""
    part = attachment.part
    if attachment.kind == MEASURED:
        return measured_tokens(part)
    if attachment.kind in _OPENAI_PARTS:
        return measured_tokens(measure(part))
    if attachment.kind == "image":
        return _image("anthropic", None, _source_size(part.get("source")))
    if attachment.kind == "document":
        return _anthropic_document(part.get("source"), count_text)
    return 0


def measure(part: Mapping[str, Any]) -> MediaFacts:
    """What pricing needs of one Chat Completions media part (``image_url``, ``file`` or
    ``input_audio``; `ctxfold.messages.media.media_part` builds them), read from its data:
    the facts a media record holds in its place (`ctxfold.messages.media.with_media`).

    Only headers are decoded, except a PDF's, whose pages are counted over its data. A part of
    any other type raises `InvalidInputError`.

    >>> measure({"type": "image_url", "image_url": {"url": "https://example.com/a.png"}})
    {'type': 'image', 'url': 'https://example.com/a.png'}
    >>> measure({"type": "input_audio", "input_audio": {"data": "SUQzBAAA", "format": "mp3"}})
    {'type': 'audio', 'bytes': 6}
    """
    kind = part.get("type")
    if kind == "image_url":
        return _image_facts(part.get("image_url"))
    if kind == "file":
        return _file_facts(part.get("file"))
    if kind == "input_audio":
        return _audio_facts(part.get("input_audio"))
    raise InvalidInputError(
        f"measure takes an image_url, file or input_audio part, not one of type {show(kind)}"
    )


def measured_tokens(facts: Mapping[str, Any]) -> int:
    """Tokens of one image, document or audio clip from its measured facts (`measure`), by the
    rules of the provider they name (``"provider": "anthropic"``), else by OpenAI's (see the
    module); 0 for facts of no known type.

    >>> measured_tokens({"type": "image", "width": 1024, "height": 1024})
    765
    >>> measured_tokens({"type": "image", "width": 1024, "height": 1024, "provider": "anthropic"})
    1399
    >>> measured_tokens({"type": "document", "pages": "many"}) == UNSEEN_DOCUMENT_TOKENS
    True
    """
    kind = facts.get("type")
    if kind == "image":
        width, height = _whole(facts, "width", 1), _whole(facts, "height", 1)
        size = (width, height) if width is not None and height is not None else None
        return _image(priced_by(facts), facts.get("detail"), size)
    if kind == "document":
        return _document(_whole(facts, "pages", 1), _whole(facts, "bytes", 0))
    if kind == "audio":
        return _audio(_seconds(facts.get("seconds")), _whole(facts, "bytes", 0))
    return 0


def openai_image_tokens(width: int, height: int, detail: str = "high") -> int:
    """Tokens of a `width` x `height` image sent to OpenAI at `detail` (see the module).

    >>> openai_image_tokens(1024, 1024), openai_image_tokens(4096, 8192, "low")
    (765, 85)
    """
    if detail == "low":
        return OPENAI_LOW_DETAIL
    scale = min(1.0, 2048 / max(width, height))
    w, h = width * scale, height * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    tiles = math.ceil(w / 512) * math.ceil(h / 512)
    return OPENAI_LOW_DETAIL + OPENAI_TILE * tiles


def anthropic_image_tokens(width: int, height: int) -> int:
    """Tokens of a `width` x `height` image sent to Anthropic (see the module).

    >>> anthropic_image_tokens(1000, 1000), anthropic_image_tokens(8000, 8000)
    (1334, 1600)
    """
    scale = min(1.0, ANTHROPIC_LONG_EDGE / max(width, height))
    pixels = (width * scale) * (height * scale)
    return min(ANTHROPIC_MAX_IMAGE, math.ceil(pixels / ANTHROPIC_PIXELS_PER_TOKEN))


def media_provider(*names: str | None) -> Provider | None:
    """Whose rules price media sent to a model, from what a framework reports of it: model
    names (``"claude-sonnet-4-5-20250929"``, ``"anthropic/claude-3-5-sonnet"``, a Bedrock id)
    or a provider's name (``"anthropic"``, ``"openai"``), tried in order; the first that names a
    model the catalog knows (`ctxfold.tokens.catalog.lookup`), a Claude model or one of the two
    providers decides. None when none does (a Gemini model, a test model, nothing given): the
    media is then priced by OpenAI's rules, as before ctxfold could tell.

    >>> media_provider("claude-sonnet-4-5-20250929"), media_provider(None, "openai")
    ('anthropic', 'openai')
    >>> media_provider("gemini-2.5-pro", "openai") is None
    True
    """
    for name in names:
        if not name:
            continue
        info = lookup(name)
        if info is not None:  # a model the catalog knows decides, even one of neither provider
            return _PROVIDERS.get(info.provider)
        if "claude" in name.lower():  # a Claude model newer than the catalog, or a router's id
            return "anthropic"
        if name.strip().lower() in _PROVIDERS:
            return _PROVIDERS[name.strip().lower()]
    return None


def _image(provider: Provider, detail: Any, size: tuple[int, int] | None) -> int:
    """The one place an image is priced: by `provider`'s rule, at its size when known."""
    if provider == "anthropic":
        return ANTHROPIC_MAX_IMAGE if size is None else anthropic_image_tokens(*size)
    if detail == "low":
        return OPENAI_LOW_DETAIL
    return OPENAI_UNKNOWN_IMAGE if size is None else openai_image_tokens(*size)


def _source_size(source: Any) -> tuple[int, int] | None:
    """The size of the image in an Anthropic block's `source`, when its data is inline."""
    inline = source_data(source)
    return image_size(inline[1]) if inline is not None else None


def _document(pages: int | None, size: int | None) -> int:
    """A PDF's pages when they were counted, else one page per `BYTES_PER_PAGE` of its data
    (`size` bytes), else `UNSEEN_DOCUMENT_TOKENS` for a document whose data was not seen."""
    if pages is None and size is not None:
        pages = max(1, math.ceil(size / BYTES_PER_PAGE))
    return UNSEEN_DOCUMENT_TOKENS if pages is None else pages * PAGE_TOKENS


def _audio(seconds: float | None, size: int | None) -> int:
    """Audio's `seconds` when a header gave them, else those of `size` bytes at
    `AUDIO_BYTES_PER_SECOND`; 0 for audio whose data was not given."""
    if seconds is None:
        if size is None:
            return 0
        seconds = size / AUDIO_BYTES_PER_SECOND
    return math.ceil(seconds * AUDIO_TOKENS_PER_SECOND)


def _anthropic_document(source: Any, count_text: Callable[[str], int]) -> int:
    if isinstance(source, Mapping) and source.get("type") == "text":
        text = source.get("data")
        return count_text(text) if isinstance(text, str) else 0
    if isinstance(source, Mapping) and source.get("type") == "content":
        blocks = source.get("content")
        if isinstance(blocks, str):
            return count_text(blocks)
        texts = (
            [b.get("text") for b in blocks if isinstance(b, Mapping)]
            if isinstance(blocks, list)
            else []
        )
        return sum(count_text(t) for t in texts if isinstance(t, str))
    inline = source_data(source)
    if inline is None:
        return UNSEEN_DOCUMENT_TOKENS
    return _document(pdf_pages(inline[1]), decoded_size(inline[1]))


_OPENAI_PARTS = frozenset({"image_url", "file", "input_audio"})
_PROVIDERS: dict[str, Provider] = {"openai": "openai", "anthropic": "anthropic"}

_LARGEST = 2**53
"""The largest number a fact may hold: beyond it a float no longer holds every whole number,
and nothing real is that large (a PNG's sides are below 2**32)."""


def _image_facts(spec: Any) -> MediaFacts:
    """An ``image_url`` (its dict, or a bare URL) measured."""
    fields: Mapping[str, Any] = spec if isinstance(spec, Mapping) else {"url": spec}
    facts: MediaFacts = {"type": "image"}
    data = _inline(facts, fields.get("url"))
    if data is None:
        _name(facts, fields, "url", "url")
    _name(facts, fields, "file_id", "file_id")
    detail = fields.get("detail")
    if isinstance(detail, str):
        facts["detail"] = detail
    size = image_size(data) if data is not None else None
    if size is not None:
        facts["width"], facts["height"] = size
    return facts


def _file_facts(spec: Any) -> MediaFacts:
    """A ``file`` measured: only ``file_data`` that is a base64 ``data:`` URL is read."""
    fields: Mapping[str, Any] = spec if isinstance(spec, Mapping) else {}
    facts: MediaFacts = {"type": "document"}
    data = _inline(facts, fields.get("file_data"))
    _name(facts, fields, "file_url", "url")
    _name(facts, fields, "file_id", "file_id")
    pages = pdf_pages(data) if data is not None else None
    if pages is not None:
        facts["pages"] = pages
    return facts


def _audio_facts(spec: Any) -> MediaFacts:
    """An ``input_audio`` measured: its base64 ``data``, or what names it (`media_part`)."""
    fields: Mapping[str, Any] = spec if isinstance(spec, Mapping) else {}
    facts: MediaFacts = {"type": "audio"}
    data = fields.get("data")
    if isinstance(data, str):
        facts["bytes"] = decoded_size(data)
        seconds = wav_seconds(data)
        if seconds is not None:
            facts["seconds"] = seconds
    _name(facts, fields, "url", "url")
    _name(facts, fields, "file_id", "file_id")
    return facts


def _inline(facts: MediaFacts, url: Any) -> str | None:
    """The base64 data of a ``data:`` URL, its size noted in `facts`; None for anything else."""
    inline = split_data_url(url) if isinstance(url, str) else None
    if inline is None:
        return None
    facts["bytes"] = decoded_size(inline[1])
    return inline[1]


def _name(
    facts: MediaFacts, fields: Mapping[str, Any], key: str, fact: Literal["url", "file_id"]
) -> None:
    """Note `fields[key]` as the `fact` that names the media: a URL whole, however long, but
    never a ``data:`` URL, which is data (read by `_inline`, or unreadable)."""
    value = fields.get(key)
    if isinstance(value, str) and value and value[:5].lower() != "data:":
        facts[fact] = value


def _whole(facts: Mapping[str, Any], key: str, least: int) -> int | None:
    """`facts[key]` when it is a whole number from `least` to `_LARGEST`; None else."""
    value = facts.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and least <= value <= _LARGEST:
        return value
    return None


def _seconds(value: Any) -> float | None:
    """`value` when it is a length of time in seconds (a number from 0 to `_LARGEST`; not NaN,
    which fails the comparison); None else."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= _LARGEST:
        return float(value)
    return None
