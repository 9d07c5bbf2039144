"""Carry content parts across the OpenAI and Anthropic formats, or refuse what cannot cross.

A message read from one provider keeps its content parts (OpenAI) or blocks (Anthropic) in
`extra`, and `content` holds only its text. Written for the other provider, those parts are
converted here, one by one, so that an image or a PDF is sent rather than lost:

====================================================  ==========================================
OpenAI Chat Completions part                          Anthropic Messages block
====================================================  ==========================================
``text``                                              ``text``
``image_url`` with a ``data:`` URL (base64)           ``image``, source ``base64`` + media_type
``image_url`` with an ``http(s)`` URL                 ``image``, source ``url``
``file`` whose ``file_data`` is a base64 PDF          ``document``, source ``base64``
``data:`` URL, and its ``filename``                   ``application/pdf``, and its ``title``
``refusal`` (and an assistant's ``refusal`` field)    ``text`` (one way: Anthropic has no refusal)
====================================================  ==========================================

A part with no equivalent in the target format is never dropped: it raises `InvalidInputError`
naming the part and what to do, and `validate` reports the same as a "no-equivalent" error. For
Anthropic: audio (an ``input_audio`` part, an assistant's audio reply), a file by id, a file that
is not a PDF, an image of a type the API does not take, and any part type not in the table. For
OpenAI: an image or PDF given by file id, a PDF by URL, a plain-text or content document, an
image or document inside a tool result (OpenAI tool messages take only text), and any block
type not in the table.

Settings that are not content do not cross: an image's ``detail``, ``cache_control``,
``citations``. One kind of content is left out on purpose: an Anthropic assistant's
``thinking`` and ``redacted_thinking`` blocks, which are the model's own reasoning, signed for
Anthropic, and have no place in a Chat Completions message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ctxfold.errors import InvalidInputError
from ctxfold.messages._show import show
from ctxfold.messages._values import Message

# What the Messages API takes as an image (`Base64ImageSourceParam.media_type`).
ANTHROPIC_IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
PDF = "application/pdf"
# Assistant blocks a Chat Completions message carries elsewhere (text, tool calls) or, for
# thinking, leaves out on purpose (see above).
OPENAI_ASSISTANT_BLOCKS = frozenset({"text", "tool_use", "thinking", "redacted_thinking"})

_DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+)(?:;[^;,]*)*;base64,(.*)", re.DOTALL)
_KEEP_OPENAI = "keep the openai format (ctxfold compact without --format anthropic)"
_KEEP_ANTHROPIC = "keep the anthropic format (ctxfold compact without --format openai)"


def carried_to_anthropic(message: Message) -> Message:
    """`message` ready to be written for the Messages API: one read from the OpenAI format gets
    its images and PDFs as blocks, and an assistant's refusal as its text (by the table above);
    any other message is returned as it is. Raises
    `InvalidInputError` naming the part that has no Messages API equivalent (audio, a file by
    id...): the message cannot be written for Anthropic without losing it.

    >>> from ctxfold.messages import from_openai
    >>> [m] = from_openai([{"role": "assistant", "content": None, "refusal": "I can't."}])
    >>> carried_to_anthropic(m).content
    "I can't."
    """
    kept = message.extra.get("openai") if message.extra else None
    if not isinstance(kept, Mapping) or "anthropic" in message.extra:
        return message
    parts = kept.get("parts")
    if not isinstance(parts, list) or _text_of(parts) != message.content:
        parts = None  # none kept, or a strategy replaced the text they held
    if message.role == "assistant":
        return _assistant_from_openai(message, parts, kept.get("fields"))
    if parts is None or all(_part_kind(p) == "text" for p in parts):
        return message
    if message.role == "system":
        raise InvalidInputError(
            "a system message holding a part other than text has no Anthropic equivalent (the "
            f"system parameter takes only text); {_KEEP_OPENAI}"
        )
    blocks = [part_to_anthropic(p, f"content[{i}]") for i, p in enumerate(parts)]
    text = _text_of(blocks)
    if message.role == "tool":
        block = {"type": "tool_result", "tool_use_id": message.tool_call_id, "content": blocks}
        return message.replace(content=text, extra={**message.extra, "anthropic": {"block": block}})
    return message.replace(content=text, extra={**message.extra, "anthropic": {"blocks": blocks}})


def _assistant_from_openai(message: Message, parts: list[Any] | None, fields: Any) -> Message:
    """An OpenAI assistant message with its refusal as text; its audio reply has nowhere to go."""
    texts: list[str] = []
    for position, part in enumerate(parts if parts is not None else ()):
        block = part_to_anthropic(part, f"content[{position}]")
        if block["type"] != "text":
            raise InvalidInputError(
                f"content[{position}]: an assistant's {_part_kind(part)} part has no Anthropic "
                f"equivalent; {_KEEP_OPENAI}"
            )
        if isinstance(block["text"], str):
            texts.append(block["text"])
    if parts is None and message.content is not None:
        texts.append(message.content)
    fields = fields if isinstance(fields, Mapping) else {}
    for key, what in (("audio", "an audio reply"), ("function_call", "a legacy function_call")):
        if fields.get(key):
            raise InvalidInputError(
                f"{what} ({key}) has no Anthropic equivalent; {_KEEP_OPENAI}, or replace it "
                "beforehand (audio by its transcript in content, a function_call by tool_calls)"
            )
    refusal = fields.get("refusal")
    if isinstance(refusal, str) and refusal:
        texts.append(refusal)
    text = "\n".join(texts) if texts else None
    return message if text == message.content else message.replace(content=text)


def _part_kind(part: Any) -> str:
    kind = part.get("type") if isinstance(part, Mapping) else None
    return kind if isinstance(kind, str) else ""


def carried_to_openai(message: Message) -> Message:
    """`message` ready to be written for OpenAI: one read from the Anthropic format with images
    or PDFs gets them as content parts (by the table above); any other message is returned as it
    is. Raises `InvalidInputError` naming the block that has no Chat Completions
    equivalent: the message cannot be written for OpenAI without losing it.

    >>> from ctxfold.messages import from_anthropic
    >>> [m] = from_anthropic([{"role": "user", "content": [{"type": "image", "source": {
    ...     "type": "base64", "media_type": "image/png", "data": "iVBO"}}]}])
    >>> carried_to_openai(m).extra["openai"]["parts"]
    [{'type': 'image_url', 'image_url': {'url': 'data:image/png;base64,iVBO'}}]
    """
    kept = message.extra.get("anthropic") if message.extra else None
    if not isinstance(kept, Mapping) or "openai" in message.extra:
        return message
    if message.role == "assistant":
        for position, block in enumerate(_listed(kept.get("blocks"))):
            kind = block.get("type")
            if kind not in OPENAI_ASSISTANT_BLOCKS:
                raise InvalidInputError(
                    f"content[{position}]: an assistant's {show(kind)} block has no OpenAI "
                    f"equivalent; {_KEEP_ANTHROPIC}, or convert the block to text beforehand"
                )
        return message
    if message.role == "tool":
        result = kept.get("block")
        inner = _listed(result.get("content") if isinstance(result, Mapping) else None)
        if _text_of(inner) == message.content:
            for block in inner:
                if block.get("type") != "text":
                    raise InvalidInputError(
                        f"a tool_result holding a block of type {show(block.get('type'))} has "
                        "no OpenAI equivalent (an OpenAI tool message takes only text); "
                        f"{_KEEP_ANTHROPIC}"
                    )
        return message
    blocks = _listed(kept.get("blocks"))
    if _text_of(blocks) != message.content or all(b.get("type") == "text" for b in blocks):
        return message
    if message.role == "system":
        raise InvalidInputError(
            f"a system prompt holding a block other than text has no OpenAI equivalent; "
            f"{_KEEP_ANTHROPIC}"
        )
    parts = [block_to_openai(b, f"content[{i}]") for i, b in enumerate(blocks)]
    return message.replace(extra={**message.extra, "openai": {"parts": parts}})


def _listed(value: Any) -> list[Mapping[str, Any]]:
    """The block objects of a kept list (none when it is no list)."""
    return [b for b in value if isinstance(b, Mapping)] if isinstance(value, list) else []


def _text_of(items: list[Any]) -> str | None:
    """The text of content parts or blocks (the same shape for text), joined by newlines, as the
    adapters read it into `content`; None when none is text."""
    texts = [
        item["text"]
        for item in items
        if isinstance(item, Mapping)
        and item.get("type") == "text"
        and isinstance(item.get("text"), str)
    ]
    return "\n".join(texts) if texts else None


def part_to_anthropic(part: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The Anthropic block for one OpenAI content part; `where` names it in an error
    (``content[1]``).

    >>> part_to_anthropic({"type": "image_url",
    ...                    "image_url": {"url": "data:image/png;base64,iVBO"}}, "content[0]")
    {'type': 'image', 'source': {'type': 'base64', 'media_type': 'image/png', 'data': 'iVBO'}}
    """
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "text": part.get("text")}
    if kind == "refusal":
        return {"type": "text", "text": part.get("refusal")}
    if kind == "image_url":
        return _image_to_anthropic(part.get("image_url"), where)
    if kind == "file":
        return _file_to_anthropic(part.get("file"), where)
    if kind == "input_audio":
        raise InvalidInputError(
            f"{where}: an input_audio part has no Anthropic equivalent (the Messages API takes no "
            f"audio); {_KEEP_OPENAI}, or replace the audio by its transcript beforehand"
        )
    raise InvalidInputError(
        f"{where}: a {show(kind)} part has no Anthropic equivalent; {_KEEP_OPENAI}, or convert "
        "the part to text beforehand"
    )


def block_to_openai(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The OpenAI content part for one Anthropic block of a user or system message; `where`
    names it in an error (``content[1]``).

    >>> block_to_openai({"type": "image", "source": {"type": "url",
    ...                  "url": "https://example.com/cat.png"}}, "content[0]")
    {'type': 'image_url', 'image_url': {'url': 'https://example.com/cat.png'}}
    """
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": block.get("text")}
    source = block.get("source")
    source = source if isinstance(source, Mapping) else {}
    data, media_type = source.get("data"), source.get("media_type")
    if kind == "image":
        if source.get("type") == "base64" and isinstance(data, str) and isinstance(media_type, str):
            url = f"data:{media_type};base64,{data}"
            return {"type": "image_url", "image_url": {"url": url}}
        if source.get("type") == "url" and isinstance(source.get("url"), str):
            return {"type": "image_url", "image_url": {"url": source["url"]}}
        raise InvalidInputError(
            f"{where}: an image block with source {show(source.get('type'))} has no OpenAI "
            f"equivalent (an image_url part takes the image's data or its http(s) URL); "
            f"{_KEEP_ANTHROPIC}, or give the image as base64 data beforehand"
        )
    if kind == "document":
        if source.get("type") == "base64" and media_type == PDF and isinstance(data, str):
            if block.get("context"):
                raise InvalidInputError(
                    f"{where}: a document's context has no OpenAI equivalent; "
                    f"{_KEEP_ANTHROPIC}, or move the context into the message's text beforehand"
                )
            file: dict[str, Any] = {"file_data": f"data:{PDF};base64,{data}"}
            if isinstance(block.get("title"), str):
                file["filename"] = block["title"]
            return {"type": "file", "file": file}
        raise InvalidInputError(
            f"{where}: a document block with a {show(source.get('type'))} source "
            f"({show(media_type)}) has no OpenAI equivalent (a file part takes "
            f"base64 PDF data); {_KEEP_ANTHROPIC}, or give it as base64 PDF data beforehand"
        )
    raise InvalidInputError(
        f"{where}: a {show(kind)} block has no OpenAI equivalent; {_KEEP_ANTHROPIC}, or convert "
        "the block to text beforehand"
    )


def _image_to_anthropic(image: Any, where: str) -> dict[str, Any]:
    url = image.get("url") if isinstance(image, Mapping) else None
    if not isinstance(url, str):
        raise InvalidInputError(f"{where}: an image_url part needs a string url, not {show(url)}")
    if url.startswith(("http://", "https://")):
        return {"type": "image", "source": {"type": "url", "url": url}}
    found = _DATA_URL.fullmatch(url)
    if found is None:
        raise InvalidInputError(
            f"{where}: an image_url part whose url is neither http(s) nor a base64 data: URL has "
            f"no Anthropic equivalent: {show(url)}; {_KEEP_OPENAI}"
        )
    media_type = found.group(1).lower().replace("image/jpg", "image/jpeg")
    if media_type not in ANTHROPIC_IMAGE_TYPES:
        raise InvalidInputError(
            f"{where}: an image of type {media_type} has no Anthropic equivalent (the Messages "
            f"API takes {', '.join(ANTHROPIC_IMAGE_TYPES)}); convert the image to one of those "
            f"beforehand, or {_KEEP_OPENAI}"
        )
    source = {"type": "base64", "media_type": media_type, "data": found.group(2)}
    return {"type": "image", "source": source}


def _file_to_anthropic(file: Any, where: str) -> dict[str, Any]:
    file = file if isinstance(file, Mapping) else {}
    data = file.get("file_data")
    found = _DATA_URL.fullmatch(data) if isinstance(data, str) else None
    if found is None or found.group(1).lower() != PDF:
        by_id = data is None and "file_id" in file
        what = "a file given by id" if by_id else "a file that is not a base64 PDF data: URL"
        raise InvalidInputError(
            f"{where}: {what} has no Anthropic equivalent (a document block takes the PDF's "
            f"data); {_KEEP_OPENAI}, or give the file's data as a data:{PDF};base64 URL"
        )
    block: dict[str, Any] = {
        "type": "document",
        "source": {"type": "base64", "media_type": PDF, "data": found.group(2)},
    }
    filename = file.get("filename")
    if isinstance(filename, str) and filename:
        block["title"] = filename
    return block
