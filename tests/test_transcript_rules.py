"""`read_transcript`: the one set of reading rules every command applies, in the library."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxfold.errors import InvalidInputError
from ctxfold.messages import Message, ToolCall, dumps_jsonl, plan_repair, read_transcript

CALL = {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
VALID = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "list the files"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": "a.py"},
    {"role": "assistant", "content": "one file: a.py"},
]


def _lines(rows: list[dict[str, object]]) -> list[str]:
    return [json.dumps(r) for r in rows]


def test_a_valid_file_reads_with_the_line_of_every_message(tmp_path: Path) -> None:
    """A valid transcript comes back with its format, the rules it was checked against, and the
    line of each message (blank lines counted, as an editor does)."""
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join([*_lines(VALID[:2]), "", *_lines(VALID[2:])]) + "\n")
    read = read_transcript(path)
    assert [m.role for m in read.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert (read.format, read.provider) == ("openai", "openai")
    assert read.lines == (1, 2, 4, 5, 6)
    assert read.where(3) == "line 5" and read.source == str(path)
    assert read.fixes == () and read.notes == ()


def test_an_anthropic_line_holding_several_messages_gives_each_its_line() -> None:
    """One Anthropic user line with two tool results becomes two messages on the same line."""
    rows = [
        {"system": "be brief"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "ls", "input": {}},
            {"type": "tool_use", "id": "t2", "name": "pwd", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "a.py"},
            {"type": "tool_result", "tool_use_id": "t2", "content": "/src"}]},
    ]  # fmt: skip
    read = read_transcript(_lines(rows))
    assert read.format == "anthropic"
    assert read.lines == (1, 2, 3, 4, 4)


@pytest.mark.parametrize(
    ("rows", "says"),
    [
        ([VALID[1], {"role": "tool", "tool_call_id": "c9", "content": "x"}],
         "line 2: orphan-result"),
        ([VALID[1], VALID[2], {"role": "user", "content": "and?"}], "line 2: missing-result"),
        ([{"role": "user", "content": []}], "line 1: empty-message"),
    ],
)  # fmt: skip
def test_an_invalid_history_is_refused_naming_line_and_problem(
    rows: list[dict[str, object]], says: str
) -> None:
    """An already-invalid history is bad input: InvalidInputError naming the source, the line and
    the problem's code; pairing problems add that --repair fixes them."""
    with pytest.raises(InvalidInputError, match=f"^<lines>: {says}") as caught:
        read_transcript(_lines(rows))
    assert caught.value.line == int(says.split()[1].rstrip(":"))
    assert ("--repair" in str(caught.value)) == ("result" in says)


def test_problems_a_provider_accepts_are_notes_not_errors() -> None:
    """A final call still waiting for its result reads fine; it is kept as a note."""
    read = read_transcript(_lines(VALID[:3]))
    assert [p.code for p in read.notes] == ["pending-call"]


def test_rules_follow_the_provider_asked_for() -> None:
    """A reused call id is fine for OpenAI and refused when the history is meant for Anthropic."""
    rows = [VALID[1], VALID[2], VALID[3], VALID[2], VALID[3]]
    assert read_transcript(_lines(rows)).provider == "openai"
    with pytest.raises(InvalidInputError, match="duplicate-call-id"):
        read_transcript(_lines(rows), provider="anthropic")


def test_repair_fixes_pairing_and_reports_each_fix_by_input_line() -> None:
    """repair=True drops results that answer nothing and answers calls never answered; each fix
    names the input line it is about, and the repaired messages keep their source lines."""
    rows = [VALID[1], VALID[2], {"role": "user", "content": "and?"},
            {"role": "tool", "tool_call_id": "c9", "content": "x"}]  # fmt: skip
    read = read_transcript(_lines(rows), repair=True)
    assert [m.role for m in read.messages] == ["user", "assistant", "tool", "user"]
    assert read.lines == (1, 2, 2, 3)
    assert [(f.action, f.call_id, read.fix_where(f)) for f in read.fixes] == [
        ("added", "call_1", "line 2"),
        ("dropped", "c9", "line 4"),
    ]


def test_check_false_applies_only_the_reading_rules() -> None:
    """check=False reads an invalid history (for a caller that reports problems itself) but
    still refuses lines that cannot be read."""
    rows = [VALID[1], {"role": "tool", "tool_call_id": "c9", "content": "x"}]
    assert len(read_transcript(_lines(rows), check=False).messages) == 2
    with pytest.raises(InvalidInputError, match="line 1: NaN"):
        read_transcript(['{"role": "user", "content": "hi", "x": NaN}'], check=False)


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_a_transcript_without_messages_is_refused(text: str, tmp_path: Path) -> None:
    """An empty file is not a history: every reader refuses it the same way."""
    path = tmp_path / "empty.jsonl"
    path.write_text(text)
    with pytest.raises(InvalidInputError, match="holds no messages"):
        read_transcript(path)


def test_bytes_that_are_not_utf8_name_their_line(tmp_path: Path) -> None:
    """A byte sequence that is not UTF-8 is refused naming its line; a leading BOM is fine."""
    path = tmp_path / "bytes.jsonl"
    path.write_bytes(
        b'\xef\xbb\xbf{"role": "user", "content": "hi"}\n{"role": "user", "content": "\xff"}\n'
    )
    with pytest.raises(InvalidInputError, match="line 2: not UTF-8"):
        read_transcript(path)
    path.write_bytes(b'\xef\xbb\xbf{"role": "user", "content": "hi"}\n')
    assert read_transcript(path).messages == [Message("user", "hi")]


def test_plan_repair_says_nothing_for_a_valid_history() -> None:
    """A valid history is repaired to itself, with no fix."""
    messages = read_transcript(_lines(VALID)).messages
    planned = plan_repair(messages)
    assert planned.messages == messages and planned.fixes == ()
    assert planned.sources == tuple(range(len(messages)))


@pytest.mark.parametrize(
    "message",
    [
        Message("user", "caf\ud800"),
        Message("user", "hi", extra={"openai": {"fields": {"score": float("nan")}}}),
        Message("assistant", None, (ToolCall("c\udc00", "ls"),)),
    ],
)
def test_what_json_cannot_hold_is_refused_when_written_naming_the_line(message: Message) -> None:
    """A message built in Python with a lone surrogate or NaN cannot be written as JSONL: the
    error names the line it would have gone to, and nothing is written."""
    with pytest.raises(InvalidInputError, match="line 2"):
        dumps_jsonl([Message("user", "first"), message])
