"""JSONL transcripts: reading either provider's shape, clear line errors, atomic writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import transcript_params
from ctxfold.errors import InvalidInputError
from ctxfold.messages import (
    Message,
    ToolCall,
    detect_format,
    from_openai,
    read_jsonl,
    write_jsonl,
)

HISTORY = [
    Message("system", "You are a coding agent."),
    Message("user", "fix tests/test_io.py"),
    Message("assistant", "Looking.", (ToolCall("c1", "bash", '{"cmd": "pytest -x"}'),)),
    Message("tool", "1 failed", tool_call_id="c1"),
    Message("assistant", "Fixed the encoding."),
]


@pytest.mark.transcripts
@pytest.mark.parametrize("path", transcript_params())
def test_a_transcript_file_reads_like_its_rows(path: Path) -> None:
    """Reading a transcript file gives the messages of its rows, one per line."""
    with path.open(encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    assert read_jsonl(path) == from_openai(rows)
    assert read_jsonl(str(path)) == from_openai(rows)


@pytest.mark.transcripts
@pytest.mark.parametrize("path", transcript_params())
def test_a_transcript_written_back_reads_the_same(path: Path, tmp_path: Path) -> None:
    """Writing a transcript as OpenAI JSONL and reading it again gives the same messages."""
    messages = read_jsonl(path)
    out = tmp_path / "copy.jsonl"
    write_jsonl(out, messages)
    assert read_jsonl(out) == messages


def test_blank_lines_are_skipped() -> None:
    """Blank and whitespace-only lines are not messages."""
    lines = [
        "",
        '{"role": "user", "content": "hi"}',
        "   ",
        '{"role": "assistant", "content": "yo"}',
    ]
    assert read_jsonl(lines) == [Message("user", "hi"), Message("assistant", "yo")]


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ('{"role": "user", "content": "unterminated', "not valid JSON"),
        ('["user", "hi"]', "expected a JSON object"),
        ('{"role": "robot", "content": "beep"}', "unknown role 'robot'"),
        ('{"role": "tool", "content": "a.py"}', "tool_call_id"),
    ],
)
def test_a_malformed_line_is_named_by_its_number(bad: str, says: str) -> None:
    """A line that cannot be read raises InvalidInputError with its line number (blanks count)."""
    lines = ['{"role": "user", "content": "hi"}', "", bad]
    with pytest.raises(InvalidInputError) as info:
        read_jsonl(lines)
    assert info.value.line == 3
    assert str(info.value).startswith("line 3: ")
    assert says in str(info.value)


def test_a_result_without_its_call_is_read_not_refused() -> None:
    """An orphan tool result is not a read error: validate reports it later."""
    lines = [
        '{"role": "user", "content": "hi"}',
        '{"role": "tool", "tool_call_id": "x", "content": ""}',
    ]
    assert [m.role for m in read_jsonl(lines)] == ["user", "tool"]


def test_anthropic_lines_with_a_system_line_are_read_as_anthropic() -> None:
    """A file with a top-level system line and tool_use blocks is read in the Anthropic shape."""
    rows = [
        {"system": "be brief"},
        {"role": "user", "content": "list files"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"p": "."}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"}],
        },
    ]
    assert detect_format(rows) == "anthropic"
    messages = read_jsonl([json.dumps(r) for r in rows])
    assert [(m.role, m.content) for m in messages] == [
        ("system", "be brief"),
        ("user", "list files"),
        ("assistant", None),
        ("tool", "a"),
    ]
    assert messages[2].tool_calls[0].id == "toolu_1"


def test_plain_text_rows_are_read_as_openai() -> None:
    """Rows with only string content are the OpenAI shape, the default."""
    assert detect_format([{"role": "user", "content": "hi"}]) == "openai"


def test_a_file_mixing_both_shapes_is_refused_naming_both_lines() -> None:
    """Rows that look like OpenAI and Anthropic at once raise an error naming the lines."""
    rows = [
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]},
    ]
    with pytest.raises(InvalidInputError, match="line 2 looks like Anthropic") as info:
        detect_format(rows)
    assert "line 1 looks like OpenAI" in str(info.value)


def test_a_system_line_after_the_conversation_started_is_refused() -> None:
    """In an Anthropic file, a system line after the first message is an error at that line."""
    rows = [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}],
        },
        {"system": "late"},
    ]
    with pytest.raises(InvalidInputError) as info:
        read_jsonl([json.dumps(r) for r in rows])
    assert info.value.line == 3


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_written_files_read_back_to_the_same_conversation(fmt: str, tmp_path: Path) -> None:
    """A history written in either format reads back with the same roles, text, calls, results."""
    path = tmp_path / f"{fmt}.jsonl"
    write_jsonl(path, HISTORY, format=fmt)  # type: ignore[arg-type]
    back = read_jsonl(path)
    assert [(m.role, m.content, m.tool_calls, m.tool_call_id) for m in back] == [
        (m.role, m.content, m.tool_calls, m.tool_call_id) for m in HISTORY
    ]


def test_an_anthropic_file_starts_with_its_system_line(tmp_path: Path) -> None:
    """Anthropic JSONL puts the system prompt on its own first line."""
    path = tmp_path / "a.jsonl"
    write_jsonl(path, HISTORY, format="anthropic")
    first = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    assert first == {"system": "You are a coding agent."}


def test_a_failed_write_leaves_the_old_file_and_no_partial_file(tmp_path: Path) -> None:
    """When a message cannot be written, the target keeps its old content and no temp file stays."""
    path = tmp_path / "t.jsonl"
    path.write_text("old\n", encoding="utf-8")
    bad = [Message("user", "go"), Message("assistant", None, (ToolCall("c1", "ls", "not json"),))]
    with pytest.raises(InvalidInputError, match="c1"):
        write_jsonl(path, bad, format="anthropic")
    assert path.read_text(encoding="utf-8") == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.jsonl"]


def test_a_write_into_a_missing_folder_fails_without_leaving_files(tmp_path: Path) -> None:
    """A write that cannot open its file raises an InvalidInputError naming the missing folder,
    and creates nothing."""
    with pytest.raises(InvalidInputError, match=r"folder .*nope does not exist"):
        write_jsonl(tmp_path / "nope" / "t.jsonl", HISTORY)
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_format_is_refused() -> None:
    """write_jsonl accepts only "openai" and "anthropic"."""
    with pytest.raises(InvalidInputError, match="gemini"):
        write_jsonl("unused.jsonl", HISTORY, format="gemini")  # type: ignore[arg-type]


def test_a_write_that_fails_at_the_rename_removes_its_temp_file(tmp_path: Path) -> None:
    """If the finished file cannot take the target's place, the temp file is removed."""
    target = tmp_path / "taken"
    target.mkdir()
    with pytest.raises(InvalidInputError, match="taken: it is a folder"):
        write_jsonl(target, HISTORY)
    assert [p.name for p in tmp_path.iterdir()] == ["taken"]
    assert list(target.iterdir()) == []


def test_a_full_disk_names_the_target_and_leaves_it_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that the disk refuses (no space left, as the flush reports it) raises an OSError
    that names the file the caller asked for, not the temporary one, which is removed; the
    target keeps its old content."""
    import errno
    import os

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    path = tmp_path / "t.jsonl"
    path.write_text("old\n", encoding="utf-8")
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError) as caught:
        write_jsonl(path, HISTORY)
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(path)
    assert path.read_text(encoding="utf-8") == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.jsonl"]
