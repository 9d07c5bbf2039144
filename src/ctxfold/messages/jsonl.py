"""Read and write transcripts as JSON Lines: one message per line, OpenAI or Anthropic shape.

The shape is decided once per file (`detect_format`): a line with a top-level `system` key, or
content blocks only the Messages API uses (`tool_use`, `tool_result`, `thinking`, `image`...),
make it Anthropic; anything else is read as OpenAI Chat Completions. A line that cannot be read
(not UTF-8, not JSON, NaN, a lone surrogate, a field of the wrong type) raises `InvalidInputError`
with its line number. A tool result whose call is missing is not a read error here:
`read_transcript` is where the validity rules apply.

A path that cannot be read (missing, a folder, not readable), or written (its folder missing, a
folder in its place, not writable), raises `InvalidInputError` naming it. A failure of the disk
itself while writing (no space left) stays the `OSError` it is, naming the target.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ctxfold._files import write_text_atomic
from ctxfold.errors import InvalidInputError
from ctxfold.messages._given import given_messages
from ctxfold.messages._json import loads_line
from ctxfold.messages._show import show
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


@dataclass(frozen=True)
class Parsed:
    """What a JSONL source held: the messages, the format, and the line of each message (an
    Anthropic line may hold several messages, which then share its number)."""

    messages: list[Message]
    format: Format
    lines: tuple[int, ...]


def read_jsonl(source: str | os.PathLike[str] | Iterable[str]) -> list[Message]:
    """Read a JSONL transcript from a path, or from an iterable of lines.

    Blank lines are skipped; line numbers in errors count them, as an editor does.

    >>> [m.role for m in read_jsonl(['{"role": "user", "content": "hi"}', '',
    ...                              '{"role": "assistant", "content": "hello"}'])]
    ['user', 'assistant']
    """
    return parse_jsonl(source).messages


def parse_jsonl(source: str | os.PathLike[str] | Iterable[str]) -> Parsed:
    """`read_jsonl`, also giving the format and the line each message came from."""
    if isinstance(source, (str, os.PathLike)):
        try:
            handle = open(source, "rb")  # noqa: SIM115 (closed below; opening is what may fail)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as exc:
            raise _path_error("read", source, exc) from exc
        with handle:
            rows = list(_rows(_decoded(handle)))
    elif (
        source is None or isinstance(source, (bytes, bytearray)) or not isinstance(source, Iterable)
    ):
        raise InvalidInputError(
            f"read_jsonl takes a path or an iterable of lines, not {show(source)}"
        )
    else:
        rows = list(_rows(enumerate(source, start=1)))
    fmt = _detect(rows)
    out: list[Message] = []
    lines: list[int] = []
    for number, row in rows:
        try:
            read = _read_row(row, fmt, started=bool(out) and out[-1].role != "system")
        except InvalidInputError as exc:
            raise InvalidInputError(str(exc), line=number) from None
        out.extend(read)
        lines.extend([number] * len(read))
    return Parsed(out, fmt, tuple(lines))


def dumps_jsonl(messages: Iterable[Message] | Message, format: Format = "openai") -> str:
    """The JSONL text of `messages` in the given provider format, one message per line.

    An Anthropic file starts with a `{"system": ...}` line when there is a system prompt. A value
    that JSON cannot hold (NaN, a lone surrogate, a structure nested too deep) raises
    `InvalidInputError` naming the line it would have gone to.
    """
    if format not in FORMATS:
        raise InvalidInputError(f"unknown format {show(format)}; expected openai or anthropic")
    messages = given_messages(messages, "dumps_jsonl")
    rows: list[Any]
    if format == "anthropic":
        system, converted = to_anthropic(messages)
        rows = ([{"system": system}] if system is not None else []) + converted
    else:
        rows = to_openai(messages)
    return "".join(_dump(row, number) for number, row in enumerate(rows, start=1))


def write_jsonl(
    path: str | os.PathLike[str], messages: Iterable[Message] | Message, format: Format = "openai"
) -> None:
    """Write `messages` to `path` as JSONL in the given provider format, atomically.

    The lines go to a temporary file beside `path` that replaces it only once complete, so a
    failure (a message that cannot be expressed, a full disk) leaves no partial file behind. See
    `dumps_jsonl` for the text. A path that cannot be written (its folder missing, a folder in
    its place) raises `InvalidInputError` naming it; a full disk, the `OSError` naming it.
    """
    text = dumps_jsonl(given_messages(messages, "write_jsonl"), format)
    try:
        write_text_atomic(path, text)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as exc:
        raise _path_error("write", path, exc) from exc


def detect_format(rows: Iterable[Mapping[str, Any]]) -> Format:
    """Which provider shape a list of message dicts is in: "anthropic" or "openai" (the default).

    Raises `InvalidInputError` naming the row (counted from 1) when rows show signs of both.

    >>> detect_format([{"role": "assistant", "content": [{"type": "tool_use", "id": "t1",
    ...                 "name": "ls", "input": {}}]}])
    'anthropic'
    """
    return _detect(list(enumerate(rows, start=1)))


def _path_error(action: str, path: str | os.PathLike[str], exc: OSError) -> InvalidInputError:
    """The error for a path that cannot be opened to `action` ("read" or "write"), in the words
    the CLI uses for a path it checks itself."""
    name = os.fspath(path)
    if isinstance(exc, FileNotFoundError):
        parent = os.path.dirname(name) or "."
        why = f"folder {parent} does not exist" if action == "write" else "no such file"
    elif isinstance(exc, IsADirectoryError):
        why = "it is a folder"
    elif isinstance(exc, NotADirectoryError):
        why = "a part of its path is not a folder"
    else:
        why = "permission denied"
    return InvalidInputError(f"cannot {action} {name}: {why}")


def _decoded(handle: Iterable[bytes]) -> Iterator[tuple[int, str]]:
    """Lines of a binary file as text, numbered; a byte sequence that is not UTF-8 names its
    line. A byte-order mark at the start is dropped, as editors do."""
    for number, raw in enumerate(handle, start=1):
        try:
            yield number, raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInputError(
                f"not UTF-8 text ({exc.reason} at byte {exc.start + 1})", line=number
            ) from None


def _rows(lines: Iterable[tuple[int, str]]) -> Iterator[tuple[int, Any]]:
    for number, line in lines:
        if not isinstance(line, str):
            raise InvalidInputError(f"expected a line of text, got {show(line)}", line=number)
        if not line.strip():
            continue
        try:
            row = loads_line(line)
        except InvalidInputError as exc:
            raise InvalidInputError(str(exc), line=number) from None
        if not isinstance(row, dict):
            raise InvalidInputError(
                f"expected a JSON object per line, got {type(row).__name__}: {show(line.strip())}",
                line=number,
            )
        yield number, row


def _dump(row: Any, number: int) -> str:
    try:
        line = json.dumps(row, ensure_ascii=False, allow_nan=False)
        line.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"line {number} would hold {exc.object[exc.start : exc.end]!r}, a lone surrogate "
            "that is not valid Unicode"
        ) from None
    except (ValueError, TypeError, RecursionError) as exc:
        raise InvalidInputError(f"line {number} cannot be written as JSON: {exc}") from None
    return line + "\n"


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
    role = row.get("role")
    if isinstance(role, str) and role in _OPENAI_ROLES:
        o_sign = f"role {role!r}"
    content = row.get("content")
    for block in content if isinstance(content, list) else ():
        kind = block.get("type") if isinstance(block, Mapping) else None
        if not isinstance(kind, str):
            continue
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
