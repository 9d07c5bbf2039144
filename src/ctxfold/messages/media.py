"""The attachments a message carries: images, documents, audio and files kept in its `extra`.

A message's `content` holds only its text. When it came from a provider with image or document
parts, the adapters keep those parts in `extra` so that writing the message back sends them
again. They cost tokens too, and far more than their share of the text: a counter asks
`attachments` what a message would send, and prices each part (see `ctxfold.tokens`).

Only parts that would really be sent are returned: once a strategy has replaced a message's
text, the adapters no longer write its stale parts, and neither are they counted.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ctxfold.errors import InvalidInputError
from ctxfold.messages._values import Message
from ctxfold.messages.anthropic import sent_blocks
from ctxfold.messages.openai import message_to_openai

Provider = Literal["openai", "anthropic"]

_OPENAI_MEDIA = frozenset({"image_url", "input_audio", "file"})
_ANTHROPIC_MEDIA = frozenset({"image", "document"})


@dataclass(frozen=True)
class Attachment:
    """One media part of a message, as the provider's API shapes it.

    - `provider`: whose shape `part` is in ("openai" or "anthropic"), which is also whose
      pricing applies.
    - `kind`: the part's type: "image_url", "input_audio", "file" (OpenAI), "image",
      "document" (Anthropic).
    - `part`: the part itself (for example ``{"type": "image", "source": {...}}``).
    """

    provider: Provider
    kind: str
    part: Mapping[str, Any]


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
    return out


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
