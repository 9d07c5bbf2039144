"""Repair that keeps real results and never empties a history, and format conversion that
carries images and PDFs across or refuses what it cannot carry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from _cli import run_cli
from ctxfold.errors import InvalidInputError
from ctxfold.messages import (
    Message,
    ToolCall,
    from_anthropic,
    from_openai,
    is_valid,
    plan_repair,
    read_jsonl,
    read_transcript,
    repair,
    to_anthropic,
    to_openai,
    validate,
)

PNG = "iVBORw0KGgo="
PDF = "JVBERi0xLjQK"


def _lines(rows: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(row) for row in rows]


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(f"{line}\n" for line in _lines(rows)), encoding="utf-8")
    return path


def _call(call_id: str, name: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


SPLIT: list[dict[str, Any]] = [
    {"role": "user", "content": "look around"},
    {"role": "assistant", "content": None, "tool_calls": [_call("c1", "cat"), _call("c2", "ls")]},
    {"role": "tool", "tool_call_id": "c1", "content": "file body"},
    {"role": "user", "content": "hey"},
    {"role": "tool", "tool_call_id": "c2", "content": "a.py b.py"},
]
ORPHAN_ONLY: dict[str, list[dict[str, Any]]] = {
    "openai": [{"role": "tool", "tool_call_id": "c9", "content": "x"}],
    "anthropic": [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9", "content": "x"}]}
    ],
}
IMAGE_PART = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
IMAGE_BLOCK = {
    "type": "image",
    "source": {"type": "base64", "media_type": "image/png", "data": PNG},
}
AUDIO_PART = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}


# Repair that leaves nothing.


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_a_repair_that_leaves_no_message_is_refused_naming_the_file(fmt: str) -> None:
    """A transcript of nothing but results that answer no call is refused after repair, saying
    that nothing is left and naming the lines dropped, rather than read as an empty history."""
    with pytest.raises(InvalidInputError) as refused:
        read_transcript(_lines(ORPHAN_ONLY[fmt]), repair=True)
    text = str(refused.value)
    assert text.startswith("nothing is left after repair: every message of <lines> was dropped")
    assert "line 1: call" in text and refused.value.line == 1


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_every_command_refuses_a_repair_that_leaves_nothing_alike(fmt: str, tmp_path: Path) -> None:
    """validate, compact, replay and sessions import with --repair all exit 2 with the same one
    line, and write or store nothing."""
    source = _write(tmp_path / "orphans.jsonl", ORPHAN_ONLY[fmt])
    out = tmp_path / "out"
    out.mkdir()
    commands = [
        ["validate", str(source), "--repair", "-o", str(out / "fixed.jsonl")],
        ["compact", str(source), "--window", "8000", "--repair", "-o", str(out / "c.jsonl")],
        ["replay", str(source), "--window", "8000", "--repair"],
        ["sessions", "import", str(source), "--session", "s", "--repair",
         "-d", f"sqlite:///{out / 'agent.db'}"],
    ]  # fmt: skip
    errors = set()
    for args in commands:
        outcome = run_cli(args, how="runner", home=tmp_path)
        assert outcome.code == 2, (args, outcome)
        assert outcome.stdout == ""
        errors.add(outcome.stderr)
    assert len(errors) == 1
    assert errors.pop().startswith("ctxfold: error: nothing is left after repair: every message")
    assert [p.name for p in out.iterdir() if p.suffix == ".jsonl"] == []


# Late results.


def test_a_late_result_of_a_split_batch_is_moved_up_to_its_batch() -> None:
    """The real result of a parallel call that arrived after a user message joins the other
    results of its batch, ahead of that message, instead of being replaced by a placeholder."""
    messages = from_openai(SPLIT)
    planned = plan_repair(messages)
    assert planned.messages == [messages[0], messages[1], messages[2], messages[4], messages[3]]
    assert planned.sources == (0, 1, 2, 4, 3)
    [fix] = planned.fixes
    assert (fix.index, fix.action, fix.call_id) == (4, "moved", "c2")
    assert "moved the tool result for call 'c2' (ls)" in fix.message
    assert is_valid(planned.messages) and repair(planned.messages) == planned.messages


def test_validate_repair_writes_the_real_late_result_and_reports_the_move(tmp_path: Path) -> None:
    """`ctxfold validate --repair -o OUT` writes the batch with its real late result and says on
    stderr, naming the input line, that the result was moved."""
    source = _write(tmp_path / "split.jsonl", SPLIT)
    out = tmp_path / "fixed.jsonl"
    outcome = run_cli(["validate", str(source), "--repair", "-o", str(out)], how="runner",
                      home=tmp_path)  # fmt: skip
    assert outcome.code == 0, outcome
    written = read_jsonl(out)
    assert [(m.role, m.tool_call_id, m.content) for m in written[2:]] == [
        ("tool", "c1", "file body"),
        ("tool", "c2", "a.py b.py"),
        ("user", None, "hey"),
    ]
    assert f"repaired {source}: line 5: moved the tool result for call 'c2'" in outcome.stderr
    assert "[no result" not in out.read_text()


def test_missing_and_orphan_results_keep_their_repair_beside_a_moved_one() -> None:
    """In one history, a late result is moved, a second result for the same call is dropped, a
    result for no call is dropped, and a call never answered gets its placeholder."""
    history = [
        Message("user", "go"),
        Message("assistant", None, (ToolCall("a", "ls"), ToolCall("b", "cat"))),
        Message("user", "and?"),
        Message("tool", "real a", tool_call_id="a"),
        Message("tool", "again a", tool_call_id="a"),
        Message("tool", "who?", tool_call_id="zzz"),
        Message("assistant", "done"),
    ]
    planned = plan_repair(history)
    assert [(m.role, m.tool_call_id, m.text[:12]) for m in planned.messages] == [
        ("user", None, "go"),
        ("assistant", None, ""),
        ("tool", "a", "real a"),
        ("tool", "b", "[no result: "),
        ("user", None, "and?"),
        ("assistant", None, "done"),
    ]
    assert [(f.index, f.action, f.call_id) for f in planned.fixes] == [
        (1, "added", "b"),
        (3, "moved", "a"),
        (4, "dropped", "a"),
        (5, "dropped", "zzz"),
    ]
    assert is_valid(planned.messages)


# Conversion between formats.


def test_an_openai_data_url_image_becomes_an_anthropic_base64_image_and_back() -> None:
    """An image_url part with a data: URL is sent to Anthropic as a base64 image block with its
    media type, and written back for OpenAI as the same part."""
    rows = [{"role": "user", "content": [{"type": "text", "text": "what?"}, IMAGE_PART]}]
    system, sent = to_anthropic(from_openai(rows))
    assert system is None
    assert sent == [{"role": "user", "content": [{"type": "text", "text": "what?"}, IMAGE_BLOCK]}]
    assert to_openai(from_anthropic(sent)) == rows


def test_an_http_image_url_becomes_an_anthropic_url_source_and_back() -> None:
    """An image given by http(s) URL is sent to Anthropic with a url source, and back."""
    url = "https://example.com/cat.png"
    rows = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}]
    _, sent = to_anthropic(from_openai(rows))
    assert sent[0]["content"] == [{"type": "image", "source": {"type": "url", "url": url}}]
    assert to_openai(from_anthropic(sent)) == rows


def test_an_anthropic_pdf_document_becomes_an_openai_file_part_and_back() -> None:
    """A base64 PDF document block is written for OpenAI as a file part with a data: URL and its
    title as filename, and that part goes back to Anthropic as the same document."""
    document = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
        "title": "report.pdf",
    }
    [row] = to_openai(from_anthropic([{"role": "user", "content": [document]}]))
    assert row == {
        "role": "user",
        "content": [
            {
                "type": "file",
                "file": {
                    "file_data": f"data:application/pdf;base64,{PDF}",
                    "filename": "report.pdf",
                },
            }
        ],
    }
    assert to_anthropic(from_openai([row]))[1] == [{"role": "user", "content": [document]}]


def test_an_assistant_refusal_reaches_anthropic_as_its_text() -> None:
    """An OpenAI assistant message that refused (content null, a refusal) is sent to Anthropic
    with the refusal as its text, and validates there."""
    rows = [
        {"role": "user", "content": "do the bad thing"},
        {"role": "assistant", "content": None, "refusal": "I can't help with that."},
        {"role": "user", "content": "ok"},
    ]
    messages = from_openai(rows)
    assert to_anthropic(messages)[1][1] == {
        "role": "assistant",
        "content": "I can't help with that.",
    }
    assert is_valid(messages, "anthropic")


@pytest.mark.parametrize(
    ("row", "says"),
    [
        ({"role": "user", "content": [{"type": "text", "text": "hear"}, AUDIO_PART]},
         "content[1]: an input_audio part has no Anthropic equivalent"),
        ({"role": "user", "content": [{"type": "hologram", "x": 1}]},
         "content[0]: a 'hologram' part has no Anthropic equivalent"),
        ({"role": "assistant", "content": None, "audio": {"id": "audio_1"}},
         "an audio reply (audio) has no Anthropic equivalent"),
    ],
    ids=["input-audio", "unknown-part", "assistant-audio"],
)  # fmt: skip
def test_a_part_anthropic_cannot_take_is_refused_naming_the_message_and_part(
    row: dict[str, Any], says: str
) -> None:
    """Audio and unknown parts are never dropped on the way to Anthropic: to_anthropic raises
    naming the message index, the part and what to do, and validate reports the same."""
    messages = from_openai([{"role": "user", "content": "first"}, row])
    with pytest.raises(InvalidInputError) as refused:
        to_anthropic(messages)
    assert str(refused.value).startswith(f"message 1: {says}")
    assert "keep the openai format" in str(refused.value)
    problems = [p for p in validate(messages, "anthropic") if p.severity == "error"]
    assert [(p.index, p.code) for p in problems] == [(1, "no-equivalent")]
    assert says in problems[0].message
    assert to_openai(messages)[1] == row  # the OpenAI format keeps it


SHOT = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "shot",
                                          "input": {}}]}  # fmt: skip


@pytest.mark.parametrize(
    ("rows", "says"),
    [
        ([{"role": "user", "content": [{"type": "document", "source": {
            "type": "url", "url": "https://example.com/a.pdf"}}]}],
         "content[0]: a document block with a 'url' source"),
        ([{"role": "user", "content": [{"type": "image", "source": {
            "type": "file", "file_id": "file_1"}}]}],
         "content[0]: an image block with source 'file' has no OpenAI equivalent"),
        ([SHOT, {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": [IMAGE_BLOCK]}]}],
         "a tool_result holding a block of type 'image' has no OpenAI equivalent"),
    ],
    ids=["pdf-by-url", "image-by-file-id", "image-in-tool-result"],
)  # fmt: skip
def test_a_block_openai_cannot_take_is_refused_naming_the_message_and_block(
    rows: list[dict[str, Any]], says: str
) -> None:
    """A PDF by URL, an image by file id and an image inside a tool result are never dropped on
    the way to OpenAI: to_openai raises naming the message and the block, validate agrees."""
    messages = from_anthropic([{"role": "user", "content": "first"}, *rows])
    last = len(messages) - 1
    with pytest.raises(InvalidInputError) as refused:
        to_openai(messages)
    assert str(refused.value).startswith(f"message {last}: {says}")
    assert "keep the anthropic format" in str(refused.value)
    problems = [p for p in validate(messages, "openai") if p.severity == "error"]
    assert [(p.index, p.code) for p in problems] == [(last, "no-equivalent")]


def test_anthropic_thinking_is_left_out_for_openai_while_text_and_calls_stay() -> None:
    """Thinking blocks, signed for Anthropic only, are the one thing left out when writing for
    OpenAI; the assistant's text and tool calls are written."""
    rows = [
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hm", "signature": "sig"},
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
    ]  # fmt: skip
    written = to_openai(from_anthropic(rows))[1]
    assert written["content"] == "Looking." and written["tool_calls"][0]["id"] == "t1"
    assert "thinking" not in json.dumps(written)


def test_compact_to_anthropic_writes_the_image_not_an_empty_message(tmp_path: Path) -> None:
    """`ctxfold compact --format anthropic` of a user message holding only an image writes the
    image block, where it used to write empty content and call it valid."""
    source = _write(tmp_path / "image.jsonl", [{"role": "user", "content": [IMAGE_PART]}])
    out = tmp_path / "out.jsonl"
    args = ["compact", str(source), "--window", "100000", "--format", "anthropic", "-o", str(out)]
    outcome = run_cli(args, how="runner", home=tmp_path)
    assert outcome.code == 0, outcome
    assert [json.loads(line) for line in out.read_text().splitlines()] == [
        {"role": "user", "content": [IMAGE_BLOCK]}
    ]


def test_compact_to_a_format_that_cannot_hold_a_part_fails_and_writes_nothing(
    tmp_path: Path,
) -> None:
    """`ctxfold compact --format anthropic` of a transcript with audio exits 2 naming the line and
    the part, and writes no file that would lose it."""
    rows = [{"role": "user", "content": [{"type": "text", "text": "hear"}, AUDIO_PART]}]
    source = _write(tmp_path / "audio.jsonl", rows)
    out = tmp_path / "out.jsonl"
    args = ["compact", str(source), "--window", "8000", "--format", "anthropic", "-o", str(out)]
    outcome = run_cli(args, how="runner", home=tmp_path)
    assert outcome.code == 2
    assert "line 1: no-equivalent" in outcome.stderr and "input_audio" in outcome.stderr
    assert not out.exists()


def test_an_empty_text_part_is_an_empty_message_for_anthropic() -> None:
    """A user message whose only part is an empty text part sends "" to Anthropic, which the
    API refuses: validate reports empty-message."""
    messages = from_openai(
        [{"role": "user", "content": [{"type": "text", "text": ""}]},
         {"role": "assistant", "content": "ok"}]
    )  # fmt: skip
    assert [(p.index, p.code) for p in validate(messages, "anthropic")] == [(0, "empty-message")]


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_a_text_part_whose_text_is_not_a_string_is_a_wrong_type(fmt: str) -> None:
    """A text part with a number for its text is refused when read, as a field of the wrong type
    naming the line, not reported as a message with no content."""
    row = {"role": "user", "content": [{"type": "text", "text": 5}]}
    lines = _lines([row]) if fmt == "openai" else ['{"system": "s"}', *_lines([row])]
    with pytest.raises(InvalidInputError) as refused:
        read_transcript(lines, check=False)
    assert "text must be a string, not 5" in str(refused.value)
    assert refused.value.line == len(lines)


# An empty conversation.


def test_a_system_prompt_alone_is_not_a_valid_anthropic_history(tmp_path: Path) -> None:
    """An Anthropic file holding only a system prompt is reported invalid (no-conversation):
    the Messages API needs at least one message."""
    assert [p.code for p in validate([Message("system", "s")], "anthropic")] == ["no-conversation"]
    source = tmp_path / "system.jsonl"
    source.write_text('{"system": "s"}\n', encoding="utf-8")
    outcome = run_cli(["validate", str(source)], how="runner", home=tmp_path)
    assert outcome.code == 1
    assert outcome.stdout.startswith(f"{source}: line 1: no-conversation:")
