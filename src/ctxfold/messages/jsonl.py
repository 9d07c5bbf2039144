"""Read and write transcripts as JSON Lines: one message per line, OpenAI or Anthropic shape.

The shape is decided once per file (`detect_format`): a line with a top-level `system` key, or
content blocks only the Messages API uses (`tool_use`, `tool_result`, `thinking`, `image`...),
make it Anthropic; anything else is read as OpenAI Chat Completions. A line that cannot be read
raises `InvalidInputError` with its line number. A tool result whose call is missing is not a read
error: the file is read, and `validate` reports it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from ctxfold.errors import InvalidInputError
from ctxfold.messages._values import Message
from ctxfold.messages.anthropic import messages_from_anthropic, system_from_anthropic, to_anthropic
from ctxfold.messages.openai import message_from_openai, to_openai

Format = Literal["openai", "anthropic"]
FORMATS: tuple[Format, ...] = ("openai", "anthropic")

_ANTHROPIC_BLOCKS = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document"}
)
_OPENAI_PARTS = frozenset({"image_url", "input_audio", "file", "refusal"})
_OPENAI_KEYS = frozenset({"tool_calls", "tool_call_id", "function_call"})
_OPENAI_ROLES = frozenset({"tool", "developer", "function"})


def read_jsonl(source: str | os.PathLike[str] | Iterable[str]) -> list[Message]:
    """Read a JSONL transcript from a path, or from an iterable of lines.

    Blank lines are skipped; line numbers in errors count them, as an editor does.

    >>> [m.role for m in read_jsonl(['{"role": "user", "content": "hi"}', '',
    ...                              '{"role": "assistant", "content": "hello"}'])]
    ['user', 'assistant']
    """
    if isinstance(source, (str, os.PathLike)):
        with open(source, encoding="utf-8") as handle:
            rows = list(_rows(handle))
    else:
        rows = list(_rows(source))
    fmt = _detect(rows)
    out: list[Message] = []
    for number, row in rows:
        try:
            out.extend(_read_row(row, fmt, started=bool(out) and out[-1].role != "system"))
        except InvalidInputError as exc:
            raise InvalidInputError(str(exc), line=number) from exc
    return out


def write_jsonl(
    path: str | os.PathLike[str], messages: Iterable[Message], format: Format = "openai"
) -> None:
    """Write `messages` to `path` as JSONL in the given provider format, atomically.

    The lines go to a temporary file beside `path` that replaces it only once complete, so a
    failure (a message that cannot be expressed, a full disk) leaves no partial file behind. An
    Anthropic file starts with a `{"system": ...}` line when there is a system prompt.
    """
    if format not in FORMATS:
        raise InvalidInputError(f"unknown format {format!r}; expected openai or anthropic")
    rows: list[Any]
    if format == "anthropic":
        system, converted = to_anthropic(messages)
        rows = ([{"system": system}] if system is not None else []) + converted
    else:
        rows = to_openai(messages)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    target = Path(path)
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException:
        os.unlink(temp)
        raise


def detect_format(rows: Iterable[Mapping[str, Any]]) -> Format:
    """Which provider shape a list of message dicts is in: "anthropic" or "openai" (the default).

    Raises `InvalidInputError` naming the row (counted from 1) when rows show signs of both.

    >>> detect_format([{"role": "assistant", "content": [{"type": "tool_use", "id": "t1",
    ...                 "name": "ls", "input": {}}]}])
    'anthropic'
    """
    return _detect(list(enumerate(rows, start=1)))


def _rows(lines: Iterable[str]) -> Iterator[tuple[int, Any]]:
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(
                f"not valid JSON ({exc.msg} at column {exc.colno}): {line.strip()!r:.80}",
                line=number,
            ) from exc
        if not isinstance(row, dict):
            raise InvalidInputError(
                f"expected a JSON object per line, got {type(row).__name__}: {line.strip()!r:.80}",
                line=number,
            )
        yield number, row


def _detect(rows: Sequence[tuple[int, Any]]) -> Format:
    anthropic: tuple[int, str] | None = None
    openai: tuple[int, str] | None = None
    for number, row in rows:
        if not isinstance(row, Mapping):
            continue
        a_sign, o_sign = _signs(row)
        if a_sign and anthropic is None:
            anthropic = (number, a_sign)
        if o_sign and openai is None:
            openai = (number, o_sign)
        if anthropic and openai:
            later = max(anthropic[0], openai[0])
            raise InvalidInputError(
                f"mixed formats: line {anthropic[0]} looks like Anthropic ({anthropic[1]}) but "
                f"line {openai[0]} looks like OpenAI ({openai[1]}); use one format per file",
                line=later,
            )
    return "anthropic" if anthropic else "openai"


def _signs(row: Mapping[str, Any]) -> tuple[str, str]:
    """What in one row marks it as Anthropic and as OpenAI ("" for nothing)."""
    a_sign = "a top-level system key" if "system" in row and "role" not in row else ""
    o_sign = next((f"a {k} key" for k in _OPENAI_KEYS if k in row), "")
    if row.get("role") in _OPENAI_ROLES:
        o_sign = f"role {row['role']!r}"
    content = row.get("content")
    for block in content if isinstance(content, list) else ():
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind in _ANTHROPIC_BLOCKS and not a_sign:
            a_sign = f"a {kind} block"
        if kind in _OPENAI_PARTS and not o_sign:
            o_sign = f"a {kind} part"
    return a_sign, o_sign


def _read_row(row: Mapping[str, Any], fmt: Format, started: bool) -> list[Message]:
    if fmt == "openai":
        return [message_from_openai(row)]
    if ("role" not in row and "system" in row) or row.get("role") == "system":
        if started:
            raise InvalidInputError("a system line must come before the conversation's messages")
        return [system_from_anthropic(row["system"] if "role" not in row else row.get("content"))]
    return messages_from_anthropic(row)
