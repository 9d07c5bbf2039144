"""What an attachment's bytes say about its size: image dimensions, PDF pages, audio seconds.

Only headers are decoded: the first few kilobytes of an image's base64 data hold its width and
height (PNG, GIF, WebP; JPEG may need to skip metadata segments first). Nothing here raises on
bad data: an unreadable header gives None, and the caller falls back to a documented default.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from collections.abc import Mapping
from typing import Any

_PREFIX_CHARS = 4 * 16_384
"""Base64 characters decoded to find an image header: 48 KiB of bytes."""

_MAX_DECODE_CHARS = 4 * 8 * 1024 * 1024
"""Most base64 characters ever decoded for one attachment (24 MiB of bytes)."""

_DATA_URL = re.compile(r"^data:(?P<type>[^;,]*)(?:;[^,]*)?,", re.IGNORECASE)


def split_data_url(url: str) -> tuple[str, str] | None:
    """``("image/png", base64 data)`` for a ``data:`` URL with base64 data; None otherwise.

    >>> split_data_url("data:image/png;base64,iVBORw0KGgo=")
    ('image/png', 'iVBORw0KGgo=')
    """
    found = _DATA_URL.match(url)
    if found is None or ";base64" not in url[: found.end()].lower():
        return None
    return found.group("type").lower(), url[found.end() :]


def decoded_size(data: str) -> int:
    """Bytes that `data` (base64) decodes to, without decoding it."""
    text = data.strip()
    return max(0, len(text) * 3 // 4 - text[-2:].count("="))


def decode(data: str, chars: int | None = None) -> bytes:
    """The bytes of the first `chars` characters of base64 `data` (all of it when None, up to a
    bound); b"" when it is not base64."""
    text = data if chars is None else data[:chars]
    text = text[:_MAX_DECODE_CHARS]
    if any(c in text for c in "\n\r \t"):
        text = "".join(text.split())
    text = text.replace("-", "+").replace("_", "/")
    text = text[: len(text) - len(text) % 4]
    try:
        return base64.b64decode(text, validate=False)
    except (binascii.Error, ValueError):
        return b""


def image_size(data: str) -> tuple[int, int] | None:
    """Width and height in pixels of a base64 PNG, JPEG, GIF or WebP image; None when unknown.

    >>> png = base64.b64encode(b"\\x89PNG\\r\\n\\x1a\\n" + b"\\x00\\x00\\x00\\rIHDR"
    ...                        + (640).to_bytes(4, "big") + (480).to_bytes(4, "big")).decode()
    >>> image_size(png)
    (640, 480)
    """
    head = decode(data, _PREFIX_CHARS)
    size = _image_size(head)
    if size is None and head.startswith(b"\xff\xd8") and len(data) > _PREFIX_CHARS:
        # A JPEG's frame header can sit behind large metadata segments (EXIF, ICC profiles).
        size = _jpeg_size(decode(data))
    return size


def _image_size(head: bytes) -> tuple[int, int] | None:
    if head.startswith(b"\x89PNG\r\n\x1a\n") and head[12:16] == b"IHDR":
        return _positive(*struct.unpack(">II", head[16:24])) if len(head) >= 24 else None
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        return _positive(*struct.unpack("<HH", head[6:10]))
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return _webp_size(head)
    if head.startswith(b"\xff\xd8"):
        return _jpeg_size(head)
    return None


def _webp_size(head: bytes) -> tuple[int, int] | None:
    chunk = head[12:16]
    if chunk == b"VP8X" and len(head) >= 30:
        width = 1 + int.from_bytes(head[24:27], "little")
        height = 1 + int.from_bytes(head[27:30], "little")
        return _positive(width, height)
    if chunk == b"VP8 " and len(head) >= 30:
        width, height = struct.unpack("<HH", head[26:30])
        return _positive(width & 0x3FFF, height & 0x3FFF)
    if chunk == b"VP8L" and len(head) >= 25:
        bits = int.from_bytes(head[21:25], "little")
        return _positive((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    return None


# Start-of-frame markers: baseline, progressive and the rarer coding processes (not DHT, JPG,
# DAC, which share the range).
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 4 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length field
            at += 2
            continue
        length = int.from_bytes(data[at + 2 : at + 4], "big")
        if marker in _SOF and at + 9 <= len(data):
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return _positive(width, height)
        if length < 2:
            return None
        at += 2 + length
    return None


def _positive(width: int, height: int) -> tuple[int, int] | None:
    return (width, height) if width > 0 and height > 0 else None


_PDF_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")
_PDF_COUNT = re.compile(rb"/Count\s+(\d{1,6})")


def pdf_pages(data: str) -> int | None:
    """Pages of a base64 PDF: the page objects it declares, or the largest page count of its
    page tree; None when neither can be seen (for example inside compressed object streams)."""
    raw = decode(data)
    if not raw.startswith(b"%PDF"):
        return None
    pages = len(_PDF_PAGE.findall(raw))
    counts = [int(n) for n in _PDF_COUNT.findall(raw)]
    best = max([pages, *counts])
    return best or None


def wav_seconds(data: str) -> float | None:
    """Duration of a base64 WAV file from its header; None for anything else."""
    head = decode(data, 4 * 64)
    if head[:4] != b"RIFF" or head[8:12] != b"WAVE" or len(head) < 32:
        return None
    byte_rate = int.from_bytes(head[28:32], "little")
    return decoded_size(data) / byte_rate if byte_rate > 0 else None


def source_data(source: Any) -> tuple[str, str] | None:
    """``(media_type, base64 data)`` of an Anthropic ``source`` of type base64; None else."""
    if not isinstance(source, Mapping) or source.get("type") != "base64":
        return None
    data, media = source.get("data"), source.get("media_type")
    if not isinstance(data, str):
        return None
    return (media if isinstance(media, str) else ""), data
