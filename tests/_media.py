"""One image (and one PDF) as the integration tests send it through each framework, and what
the same content costs through the OpenAI adapter, the reference each integration is held to.

The image is a real 1024 x 1024 PNG carrying 300 KB of ancillary data, so that its base64
counted as text would be a hundred times its price as an image.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections.abc import Sequence
from typing import Any

from ctxfold.messages import Message, from_anthropic, from_openai
from ctxfold.messages.media import MEDIA, attachments
from ctxfold.tokens import counter


def png(width: int, height: int, padding: int = 0) -> bytes:
    """A valid PNG of one colour; `padding` bytes of ancillary data make it as large as asked."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    rows = zlib.compress(b"".join(b"\x00" + b"\x80" * width for _ in range(height)))
    extra = chunk(b"tEXt", b"Comment\x00" + b"x" * padding) if padding else b""
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + extra
        + chunk(b"IDAT", rows)
        + chunk(b"IEND", b"")
    )


PNG = png(1024, 1024, padding=300_000)
B64 = base64.b64encode(PNG).decode()
DATA_URL = f"data:image/png;base64,{B64}"
HTTPS_URL = "https://example.com/cat.png"
URLS = [DATA_URL, HTTPS_URL]
URL_IDS = ["data-url", "https-url"]

PDF = b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n2 0 obj << /Type /Page >> endobj\n%%EOF\n"
PDF_URL = "data:application/pdf;base64," + base64.b64encode(PDF).decode()

QUESTION = "what is in this picture?"
CALL_ID = "call_shot"


def count(messages: Sequence[Message]) -> int:
    """Tokens of `messages` by the counter an application gets by default."""
    tokens = counter("auto")
    return sum(tokens.count_message(m) for m in messages)


def openai_user(url: str, text: str = QUESTION) -> Message:
    """The user message the OpenAI adapter reads from a question and an image."""
    parts = [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": url}}]
    return from_openai([{"role": "user", "content": parts}])[0]


def openai_tool(url: str, call_id: str = CALL_ID) -> Message:
    """The tool message the OpenAI adapter reads from a result that is one image."""
    part = {"type": "image_url", "image_url": {"url": url}}
    return from_openai([{"role": "tool", "tool_call_id": call_id, "content": [part]}])[0]


def openai_pdf(text: str = QUESTION) -> Message:
    parts: list[dict[str, Any]] = [
        {"type": "text", "text": text},
        {"type": "file", "file": {"file_data": PDF_URL, "filename": "a.pdf"}},
    ]
    return from_openai([{"role": "user", "content": parts}])[0]


def assert_counted_like(got: Sequence[Message], reference: Message) -> None:
    """`got` (an integration's conversion) costs what `reference` (the same content through
    the OpenAI adapter) costs, within 2%: far more than its text alone, and nowhere near the
    image's base64 read as text (400,000 tokens), which is in no message's text."""
    tokens, expected = count(got), count([reference])
    text_only = count([m.replace(extra={}) for m in got])
    assert attachments(reference)
    assert abs(tokens - expected) <= expected * 0.02, (tokens, expected)
    assert tokens >= text_only + 700, (tokens, text_only)
    assert all(B64[:1000] not in m.text for m in got)


def assert_logged_once(logged: Sequence[Message]) -> None:
    """The log holds the image in `logged` once, where the framework's own message keeps it:
    their JSON is the image's base64 and less than 2 KB more, and each media record is under
    1 KB (it holds the image's size, not its data)."""
    size = sum(len(json.dumps(m.to_dict())) for m in logged)
    assert len(B64) < size < len(B64) + 2_000, (size, len(B64))
    assert any(MEDIA in m.extra for m in logged)
    assert all(len(json.dumps(m.extra.get(MEDIA))) < 1_000 for m in logged)


def anthropic_user(text: str = QUESTION) -> Message:
    """The user message the Anthropic adapter reads from a question and the image (inline):
    the reference for media an integration sends to a Claude model (a 1024 x 1024 image: 1,399
    tokens)."""
    source = {"type": "base64", "media_type": "image/png", "data": B64}
    blocks = [{"type": "text", "text": text}, {"type": "image", "source": source}]
    return from_anthropic([{"role": "user", "content": blocks}])[0]
