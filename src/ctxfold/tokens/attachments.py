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
  size at a low bitrate (32 kbit/s, so that compressed audio is not undercounted).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from ctxfold.messages import Message
from ctxfold.messages.media import Attachment, attachments
from ctxfold.tokens._media_data import (
    decoded_size,
    image_size,
    pdf_pages,
    source_data,
    split_data_url,
    wav_seconds,
)

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
    if attachment.kind == "image_url":
        return _openai_image(part.get("image_url"))
    if attachment.kind == "image":
        return _anthropic_image(part.get("source"))
    if attachment.kind == "input_audio":
        return _audio(part.get("input_audio"))
    if attachment.kind == "file":
        return _openai_file(part.get("file"))
    if attachment.kind == "document":
        return _anthropic_document(part.get("source"), count_text)
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


def _openai_image(spec: Any) -> int:
    url = spec.get("url") if isinstance(spec, Mapping) else spec
    detail = spec.get("detail") if isinstance(spec, Mapping) else None
    if detail == "low":
        return OPENAI_LOW_DETAIL
    inline = split_data_url(url) if isinstance(url, str) else None
    size = image_size(inline[1]) if inline is not None else None
    return OPENAI_UNKNOWN_IMAGE if size is None else openai_image_tokens(*size)


def _anthropic_image(source: Any) -> int:
    inline = source_data(source)
    size = image_size(inline[1]) if inline is not None else None
    return ANTHROPIC_MAX_IMAGE if size is None else anthropic_image_tokens(*size)


def _audio(spec: Any) -> int:
    data = spec.get("data") if isinstance(spec, Mapping) else None
    if not isinstance(data, str):
        return 0
    seconds = wav_seconds(data)
    if seconds is None:
        seconds = decoded_size(data) / AUDIO_BYTES_PER_SECOND
    return math.ceil(seconds * AUDIO_TOKENS_PER_SECOND)


def _openai_file(spec: Any) -> int:
    data = spec.get("file_data") if isinstance(spec, Mapping) else None
    inline = split_data_url(data) if isinstance(data, str) else None
    if inline is None:
        return UNSEEN_DOCUMENT_TOKENS
    return _pdf_tokens(inline[1])


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
    return _pdf_tokens(inline[1])


def _pdf_tokens(data: str) -> int:
    pages = pdf_pages(data)
    if pages is None:
        pages = max(1, math.ceil(decoded_size(data) / BYTES_PER_PAGE))
    return pages * PAGE_TOKENS
