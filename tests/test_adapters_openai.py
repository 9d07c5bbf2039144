"""The OpenAI Chat Completions adapter: lossless round trips and clear errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import transcript_params
from ctxfold.errors import InvalidInputError
from ctxfold.messages import Message, ToolCall, from_openai, to_openai


def _rows(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


@pytest.mark.transcripts
@pytest.mark.parametrize("path", transcript_params())
def test_every_transcript_message_round_trips_exactly(path: Path) -> None:
    """Each message of a real transcript written back after reading is the message read."""
    rows = _rows(path)
    messages = from_openai(rows)
    assert len(messages) == len(rows)
    for row, message in zip(rows, messages, strict=True):
        assert to_openai([message]) == [row]


@pytest.mark.transcripts
@pytest.mark.parametrize("path", transcript_params())
def test_transcript_calls_and_results_are_read_into_fields(path: Path) -> None:
    """Tool calls and tool results of a transcript land in `tool_calls` and `tool_call_id`."""
    rows = _rows(path)
    messages = from_openai(rows)
    for row, message in zip(rows, messages, strict=True):
        expected = [(c["id"], c["function"]["name"]) for c in row.get("tool_calls") or []]
        assert [(c.id, c.name) for c in message.tool_calls] == expected
        assert message.tool_call_id == row.get("tool_call_id")
        assert message.content == row["content"]


def test_tool_calls_are_read_with_their_arguments_verbatim() -> None:
    """Arguments stay the exact JSON text the model produced, spacing included."""
    row = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "ls", "arguments": '{"p":  1}'},
            },
            {"id": "call_b", "type": "function", "function": {"name": "cat", "arguments": ""}},
        ],
    }
    (message,) = from_openai([row])
    assert message.tool_calls == (
        ToolCall("call_a", "ls", '{"p":  1}'),
        ToolCall("call_b", "cat", ""),
    )
    assert message.content is None
    assert to_openai([message]) == [row]


def test_content_parts_are_joined_and_written_back_as_parts() -> None:
    """A list of content parts reads as its joined text and writes back as the same parts."""
    parts = [
        {"type": "text", "text": "what is in this picture?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png", "detail": "low"}},
        {"type": "text", "text": "answer briefly"},
    ]
    row = {"role": "user", "content": parts}
    (message,) = from_openai([row])
    assert message.content == "what is in this picture?\nanswer briefly"
    assert to_openai([message]) == [row]


def test_changed_content_is_written_as_text_not_the_stale_parts() -> None:
    """When a strategy replaces the text of a message read as parts, the new text is sent."""
    row = {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": [{"type": "text", "text": "x" * 50}],
    }
    (message,) = from_openai([row])
    masked = message.replace(content="[output cleared]")
    assert to_openai([masked]) == [
        {"role": "tool", "tool_call_id": "call_1", "content": "[output cleared]"}
    ]


def test_developer_role_reads_as_system_and_writes_back_as_developer() -> None:
    """A developer message is a system message to ctxfold and stays developer on export."""
    rows = [{"role": "developer", "content": "use tabs"}, {"role": "system", "content": "be brief"}]
    messages = from_openai(rows)
    assert [m.role for m in messages] == ["system", "system"]
    assert to_openai(messages) == rows


def test_unknown_keys_and_absent_content_survive_the_round_trip() -> None:
    """Keys ctxfold does not know (refusal, audio, an empty tool_calls) come back unchanged."""
    rows: list[dict[str, Any]] = [
        {"role": "user", "content": "hi", "name": "ada", "metadata": {"k": 1}},
        {"role": "assistant", "content": None, "refusal": "I can't help with that."},
        {"role": "assistant", "content": "ok", "tool_calls": []},
        {"role": "assistant", "content": "ok", "tool_calls": None},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "function": {"name": "ls", "arguments": "{}", "strict": True}, "x": 2}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.py", "name": "ls"},
    ]
    messages = from_openai(rows)
    assert messages[0].name == "ada"
    assert messages[4].content is None
    assert to_openai(messages) == rows


def test_messages_built_in_code_export_in_plain_form() -> None:
    """A Message made by hand (no kept fields) exports with the usual keys only."""
    messages = [
        Message("system", "be brief"),
        Message("assistant", None, (ToolCall("c1", "ls", '{"path": "."}'),)),
        Message("tool", "a.py", tool_call_id="c1"),
    ]
    assert to_openai(messages) == [
        {"role": "system", "content": "be brief"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "ls", "arguments": '{"path": "."}'},
                }
            ],
        },
        {"role": "tool", "content": "a.py", "tool_call_id": "c1"},
    ]


@pytest.mark.parametrize(
    ("row", "says"),
    [
        ({"role": "robot", "content": "beep"}, "unknown role 'robot'"),
        ({"role": "tool", "content": "a.py"}, "tool_call_id"),
        ({"role": "tool", "content": "a.py", "tool_call_id": ""}, "tool_call_id"),
        ({"role": "assistant", "content": None, "tool_calls": "ls"}, "tool_calls must be a list"),
        (
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c9", "type": "function", "function": {"name": "ls", "arguments": {}}}
                ],
            },
            "c9",
        ),
        ({"role": "user", "content": 42}, "42"),
        ({"role": "assistant", "tool_calls": [{"type": "function"}]}, "id"),
        (["user", "hi"], "list"),
    ],
)
def test_bad_input_names_the_message_index_and_the_value(row: Any, says: str) -> None:
    """A malformed message raises InvalidInputError naming its index and what is wrong."""
    rows = [{"role": "user", "content": "fine"}, row]
    with pytest.raises(InvalidInputError) as info:
        from_openai(rows)
    assert str(info.value).startswith("message 1: ")
    assert says in str(info.value)
