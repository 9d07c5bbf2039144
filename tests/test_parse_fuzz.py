"""The parse API under generated input: anything either parses or raises `InvalidInputError`
naming where the problem is. Nothing else (no TypeError, KeyError, RecursionError,
UnicodeError...) escapes, and what parses can be written back or is refused the same way.

Inputs are message-shaped, so that generation reaches deep into the adapters: each field is
either a plausible value or arbitrary JSON, with NaN, huge numbers and lone surrogates mixed in.
"""

from __future__ import annotations

import contextlib
import json
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxfold.cli._common import read_input
from ctxfold.errors import InvalidInputError
from ctxfold.messages import (
    Message,
    dumps_jsonl,
    from_anthropic,
    from_openai,
    read_jsonl,
    read_transcript,
)

ROW_EXAMPLES = 1_500
"""Generated rows, each read by every parse function."""
FILE_EXAMPLES = 500
"""Generated files, each read by every file reader; 2,000 generated cases in all."""


def _settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


ROLES = ["system", "developer", "user", "assistant", "tool", "function", "robot", ""]
TYPES = ["text", "image_url", "input_audio", "file", "refusal", "tool_use", "tool_result",
         "thinking", "redacted_thinking", "image", "document", "function"]  # fmt: skip
KEYS = ["role", "content", "tool_calls", "tool_call_id", "name", "type", "function",
        "arguments", "id", "text", "system", "input", "tool_use_id", "source", "extra"]  # fmt: skip

# Text with the characters that break naive code: lone surrogates, NUL, newlines, quotes.
text = st.text(
    alphabet=st.sampled_from('ab z\u00e9\u4e2d\U0001f600\ud800\udfff\x00\n\u2028"\\{['), max_size=8
)
numbers = st.one_of(
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.just(5000).map(lambda digits: 10**digits),  # more digits than Python converts
)
scalars = st.one_of(st.none(), st.booleans(), numbers, text, st.sampled_from(ROLES + TYPES))
# A value of the wrong type for a field: a scalar, or a small list or object.
wrong = st.one_of(
    scalars, st.lists(scalars, max_size=2), st.dictionaries(text, scalars, max_size=2)
)
any_json = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), text), inner, max_size=4),
    ),
    max_leaves=6,
)


def field(plausible: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a plausible value, sometimes a value of the wrong type."""
    return st.one_of(plausible, plausible, wrong)


ids = field(st.sampled_from(["call_1", "call_2", "toolu_1", "c", ""]))
call = st.fixed_dictionaries(
    {
        "id": ids,
        "type": field(st.just("function")),
        "function": field(
            st.fixed_dictionaries(
                {"name": ids},
                optional={"arguments": field(st.sampled_from(["{}", '{"a": 1}', "[1]", "{"]))},
            )
        ),
    }
)
text_block = st.fixed_dictionaries({"type": field(st.just("text")), "text": field(text)})
block = st.fixed_dictionaries(
    {"type": field(st.sampled_from(TYPES))},
    optional={
        "text": field(text),
        "id": ids,
        "name": ids,
        "input": field(st.dictionaries(text, scalars, max_size=2)),
        "tool_use_id": ids,
        "content": field(st.one_of(text, st.lists(text_block, max_size=2))),
        "image_url": field(st.fixed_dictionaries({"url": field(text)})),
        "source": field(
            st.fixed_dictionaries({"type": field(st.just("base64")), "data": field(text)})
        ),
    },
)
message = st.fixed_dictionaries(
    {"role": field(st.sampled_from(ROLES))},
    optional={
        "content": field(st.one_of(text, st.lists(block, max_size=3))),
        "tool_calls": field(st.lists(call, max_size=2)),
        "tool_call_id": ids,
        "name": field(text),
        "extra": wrong,
    },
)
system_line = st.fixed_dictionaries({"system": field(st.one_of(text, st.lists(block, max_size=2)))})


def _dumps(value: Any, ascii: bool = True) -> str:
    """JSON text of a generated value; a value JSON text cannot hold (an integer too long for
    Python to print) becomes a line holding such an integer, which a reader must refuse."""
    try:
        return json.dumps(value, ensure_ascii=ascii)
    except ValueError:
        return '{"role": "user", "content": "hi", "n": ' + "7" * 5000 + "}"


line = st.one_of(
    message.map(_dumps),
    message.map(lambda m: _dumps(m, ascii=False)),
    system_line.map(_dumps),
    st.sampled_from(["", "  ", "{", "[1, 2]", "null", '"text"', "{}", "[" * 2000 + "]" * 2000]),
    text,
)
files = st.lists(line, max_size=4)

LINE = re.compile(r"(?:^|: )line (\d+): ")
WORKDIR = Path(tempfile.mkdtemp(prefix="ctxfold-fuzz-"))


def _line_named(error: InvalidInputError, count: int) -> bool:
    found = LINE.search(str(error))
    return found is not None and 1 <= int(found.group(1)) <= count


def _writes_back_or_refuses(messages: list[Message]) -> None:
    for fmt in ("openai", "anthropic"):
        with contextlib.suppress(InvalidInputError):
            dumps_jsonl(messages, fmt)


@_settings(ROW_EXAMPLES)
@given(st.one_of(message, message, system_line, any_json))
def test_any_row_parses_or_raises_invalid_input(row: Any) -> None:
    """One generated row through every parse function: from_openai, from_anthropic,
    Message.from_dict, and read_jsonl of its JSON text. Each returns messages or raises
    InvalidInputError that names the message or the line; what parses can be written back or
    is refused the same way."""
    readers: list[tuple[Callable[[], list[Message]], str]] = [
        (lambda: from_openai([row]), r"message 0: "),
        (lambda: from_anthropic([row]), r"message 0: "),
        (lambda: [Message.from_dict(row)], r""),
        (lambda: read_jsonl([_dumps(row)]), r"line 1: "),
    ]
    for read, names in readers:
        try:
            messages = read()
        except InvalidInputError as exc:
            assert re.match(names, str(exc)), str(exc)
        else:
            _writes_back_or_refuses(messages)
    try:
        parsed = Message.from_dict(row)
    except InvalidInputError:
        return
    assert Message.from_dict(parsed.to_dict()) == parsed


@_settings(FILE_EXAMPLES)
@given(files)
def test_any_file_parses_or_names_its_line(lines: list[str]) -> None:
    """Whole generated files (several lines, blank ones, system lines, raw junk) through
    read_jsonl, read_transcript (with and without repair) and the CLI's reader: messages, or
    InvalidInputError naming a line of the input or saying it holds no messages."""
    try:
        read_jsonl(lines)
    except InvalidInputError as exc:
        assert _line_named(exc, len(lines)), str(exc)
    text = "".join(f"{x}\n" for x in lines)
    path = WORKDIR / "input.jsonl"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    for read, count in (
        (lambda: read_transcript(lines), len(lines)),
        (lambda: read_transcript(lines, repair=True), len(lines)),
        (lambda: read_input(path, repair=False), text.count("\n")),
    ):
        try:
            read()
        except InvalidInputError as exc:
            assert _line_named(exc, count) or "holds no messages" in str(exc), str(exc)
