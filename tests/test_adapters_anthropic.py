"""The Anthropic Messages adapter: lossless round trips, merging rules and cross-provider moves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import transcript_params
from ctxfold.errors import InvalidInputError
from ctxfold.messages import Message, ToolCall, from_anthropic, from_openai, to_anthropic

SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxDYWRkZWQgdGhpbmtpbmc="

PARALLEL = {
    "system": "You are a coding agent working in /repo.",
    "messages": [
        {"role": "user", "content": "Why does tests/test_io.py fail?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look at the test and the module together."},
                {
                    "type": "tool_use",
                    "id": "toolu_01A",
                    "name": "read",
                    "input": {"path": "tests/test_io.py"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_01B",
                    "name": "read",
                    "input": {"path": "src/io.py", "lines": [1, 40], "ünïcode": "é"},
                    "cache_control": {"type": "ephemeral"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01A",
                    "content": "def test_read(): ...",
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01B",
                    "content": "def read(path): ...",
                },
                {"type": "text", "text": "Also check the encoding."},
            ],
        },
        {"role": "assistant", "content": "read() opens the file without encoding='utf-8'."},
    ],
}

ERRORS_AND_LISTS = {
    "system": [
        {"type": "text", "text": "You run shell commands."},
        {"type": "text", "text": "Policy: never push.", "cache_control": {"type": "ephemeral"}},
    ],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "run the tests"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_02",
                    "name": "bash",
                    "input": {"cmd": "pytest -x"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_02",
                    "is_error": True,
                    "content": [
                        {"type": "text", "text": "E   ModuleNotFoundError: No module named 'yaml'"},
                        {"type": "text", "text": "1 error in 0.12s"},
                    ],
                    "cache_control": {"type": "ephemeral"},
                }
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "PyYAML is missing."}]},
    ],
}

THINKING = {
    "system": None,
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is on this screenshot?"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "thinking",
                    "thinking": "The user wants a description.",
                    "signature": SIGNATURE,
                },
                {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
                {"type": "tool_use", "id": "toolu_03", "name": "ocr", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_03",
                    "content": [
                        {"type": "text", "text": "Traceback (most recent call last):"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                        },
                    ],
                }
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "A traceback.", "signature": SIGNATURE},
                {"type": "text", "text": "It shows a Python traceback."},
            ],
        },
    ],
}

SEPARATE_USER_MESSAGES = {
    "system": "",
    "messages": [
        {"role": "user", "content": "first"},
        {"role": "user", "content": "second", "metadata": {"source": "retry"}},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_04", "name": "ls", "input": {"path": "."}}
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_04"}]},
        {"role": "user", "content": "and then?"},
    ],
}

FIXTURES = {
    "parallel": PARALLEL,
    "errors-and-lists": ERRORS_AND_LISTS,
    "thinking-and-images": THINKING,
    "separate-user-messages": SEPARATE_USER_MESSAGES,
}


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_anthropic_conversations_round_trip_exactly(name: str) -> None:
    """Reading a request's system and messages and writing them back gives the same request."""
    fixture = FIXTURES[name]
    messages = from_anthropic(fixture["messages"], system=fixture["system"])
    assert to_anthropic(messages) == (fixture["system"], fixture["messages"])


def test_parallel_tool_use_becomes_calls_and_one_tool_message_per_result() -> None:
    """Each tool_use is a ToolCall with its input as JSON text; each tool_result a tool message."""
    messages = from_anthropic(PARALLEL["messages"], system=PARALLEL["system"])
    assert [m.role for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
        "assistant",
    ]
    calls = messages[2].tool_calls
    assert [(c.id, c.name) for c in calls] == [("toolu_01A", "read"), ("toolu_01B", "read")]
    assert json.loads(calls[1].arguments) == {"path": "src/io.py", "lines": [1, 40], "ünïcode": "é"}
    assert messages[2].content == "Let me look at the test and the module together."
    assert [(m.tool_call_id, m.content) for m in messages[3:5]] == [
        ("toolu_01A", "def test_read(): ..."),
        ("toolu_01B", "def read(path): ..."),
    ]
    assert messages[5].content == "Also check the encoding."


def test_error_result_with_list_content_reads_as_its_text() -> None:
    """A tool_result with a list of blocks reads as their joined text; is_error is kept."""
    messages = from_anthropic(ERRORS_AND_LISTS["messages"], system=ERRORS_AND_LISTS["system"])
    assert messages[0].content == "You run shell commands.\nPolicy: never push."
    result = messages[3]
    assert result.role == "tool"
    assert result.content == "E   ModuleNotFoundError: No module named 'yaml'\n1 error in 0.12s"


def test_a_masked_error_result_keeps_is_error_and_sends_the_new_text() -> None:
    """Replacing a result's content writes the new text and keeps its is_error flag."""
    messages = from_anthropic(ERRORS_AND_LISTS["messages"], system=ERRORS_AND_LISTS["system"])
    messages[3] = messages[3].replace(content="[output cleared: call toolu_02]")
    _, rows = to_anthropic(messages)
    (block,) = rows[2]["content"]
    assert block["content"] == "[output cleared: call toolu_02]"
    assert block["is_error"] is True
    assert block["tool_use_id"] == "toolu_02"


def test_changed_assistant_text_keeps_thinking_blocks_first() -> None:
    """An assistant message whose text changed is rebuilt with its thinking blocks in front."""
    messages = from_anthropic(THINKING["messages"])
    messages[3] = messages[3].replace(content="A traceback, shortened.")
    _, rows = to_anthropic(messages)
    assert rows[3]["content"] == [
        {"type": "thinking", "thinking": "A traceback.", "signature": SIGNATURE},
        {"type": "text", "text": "A traceback, shortened."},
    ]


def test_changed_assistant_text_keeps_its_tool_use_blocks_whole() -> None:
    """Rebuilding a changed assistant message restores each tool_use input and its extra keys."""
    messages = from_anthropic(PARALLEL["messages"], system=PARALLEL["system"])
    messages[2] = messages[2].replace(content="Reading both files.")
    _, rows = to_anthropic(messages)
    original = PARALLEL["messages"][1]["content"]
    assert rows[1]["content"] == [{"type": "text", "text": "Reading both files."}, *original[1:]]


def test_tool_results_and_following_user_text_form_one_user_message() -> None:
    """Results of parallel calls go into one user message, followed by the user's next words."""
    messages = [
        Message("system", "be brief"),
        Message("user", "list both folders"),
        Message(
            "assistant", None, (ToolCall("c1", "ls", '{"p": "a"}'), ToolCall("c2", "ls", "{}"))
        ),
        Message("tool", "a.py", tool_call_id="c1"),
        Message("tool", "b.py", tool_call_id="c2"),
        Message("user", "thanks"),
        Message("user", "now count them"),
    ]
    system, rows = to_anthropic(messages)
    assert system == "be brief"
    assert rows == [
        {"role": "user", "content": "list both folders"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "c1", "name": "ls", "input": {"p": "a"}},
                {"type": "tool_use", "id": "c2", "name": "ls", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "a.py"},
                {"type": "tool_result", "tool_use_id": "c2", "content": "b.py"},
                {"type": "text", "text": "thanks"},
            ],
        },
        {"role": "user", "content": "now count them"},
    ]


def test_a_system_message_after_the_start_cannot_be_sent() -> None:
    """A system message in the middle of a history raises an error naming its index."""
    messages = [Message("user", "hi"), Message("system", "new rule")]
    with pytest.raises(InvalidInputError, match="message 1"):
        to_anthropic(messages)


def test_arguments_that_are_not_a_json_object_cannot_become_a_tool_use() -> None:
    """A call whose arguments are not a JSON object raises an error naming the call."""
    messages = [
        Message("user", "go"),
        Message("assistant", None, (ToolCall("c7", "ls", "not json"),)),
    ]
    with pytest.raises(InvalidInputError, match="c7"):
        to_anthropic(messages)


@pytest.mark.parametrize(
    ("row", "says"),
    [
        ({"role": "tool", "content": "x"}, "unknown role 'tool'"),
        ({"role": "user", "content": 3}, "3"),
        ({"role": "user", "content": [{"type": "tool_result", "content": "x"}]}, "tool_use_id"),
        (
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": "."}],
            },
            "input must be an object",
        ),
        ({"role": "user", "content": ["just a string"]}, "content[0]"),
    ],
)
def test_bad_anthropic_input_names_the_message_and_the_value(
    row: dict[str, Any], says: str
) -> None:
    """A malformed message raises InvalidInputError naming its index and what is wrong."""
    with pytest.raises(InvalidInputError) as info:
        from_anthropic([{"role": "user", "content": "ok"}, row])
    assert str(info.value).startswith("message 1: ")
    assert says in str(info.value)


def _essentials(message: Message) -> tuple[Any, ...]:
    calls = tuple((c.id, c.name, json.loads(c.arguments or "{}")) for c in message.tool_calls)
    return (message.role, message.content, calls, message.tool_call_id)


@pytest.mark.transcripts
@pytest.mark.parametrize("path", transcript_params())
def test_openai_transcripts_survive_a_trip_through_anthropic(path: Path) -> None:
    """An OpenAI transcript sent as Anthropic and read back keeps roles, text, calls and results."""
    with path.open(encoding="utf-8") as handle:
        original = from_openai([json.loads(line) for line in handle if line.strip()])
    system, rows = to_anthropic(original)
    back = from_anthropic(rows, system=system)
    assert [_essentials(m) for m in back] == [_essentials(m) for m in original]
