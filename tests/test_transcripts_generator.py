"""The demo-session generator: deterministic, realistic, valid, and big when asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxfold.messages import read_jsonl, validate, write_jsonl
from ctxfold.testing.transcripts import generate


def _tool_steps(messages: list) -> list:
    return [m for m in messages if m.role == "assistant" and m.tool_calls]


def test_same_seed_gives_the_same_session_and_another_seed_a_different_one() -> None:
    """A seed fixes the session exactly, so tests and the demo see the same history every run."""
    assert generate(seed=3, steps=40) == generate(seed=3, steps=40)
    assert generate(seed=3, steps=40) != generate(seed=4, steps=40)


@pytest.mark.parametrize("steps", [1, 7, 60, 301])
def test_steps_counts_the_tool_calling_assistant_steps(steps: int) -> None:
    """`steps` is the number of assistant steps that call tools; a closing answer follows them."""
    messages = generate(seed=0, steps=steps)
    assert len(_tool_steps(messages)) == steps
    assert messages[-1].role == "assistant" and not messages[-1].tool_calls


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_session_is_a_valid_history_for_both_providers(provider: str) -> None:
    """Every call has its result and parallel results answer together, so providers accept it."""
    problems = validate(generate(seed=11, steps=120), provider)  # type: ignore[arg-type]
    assert [p for p in problems if p.severity == "error"] == []


def test_it_reads_like_a_coding_agent_session() -> None:
    """System prompt, task, shell and editor calls, a parallel batch, a failing test and its fix."""
    messages = generate(seed=0, steps=60)
    assert [m.role for m in messages[:2]] == ["system", "user"]
    names = {c.name for m in messages for c in m.tool_calls}
    assert {"shell", "editor"} <= names
    assert any(len(m.tool_calls) >= 2 for m in messages), "no parallel batch of calls"
    tool_texts = [m.text for m in messages if m.role == "tool"]
    failing = next(t for t in tool_texts if "FAILED tests/" in t)
    failed_file = failing.split("FAILED ", 1)[1].split("::", 1)[0]
    error = next(line for line in failing.splitlines() if line.startswith("E   "))[4:]
    assert error in failing and "Error" in error
    later = tool_texts[tool_texts.index(failing) + 1 :]
    assert any("has been edited" in t for t in later), "the failure is never fixed"
    assert any("passed" in t and failed_file in t for t in later), "the fix is never tested"
    assert max(len(t) for t in tool_texts) > 2_000, "no long outputs"


def test_edits_name_real_paths_and_arguments_are_json() -> None:
    """Tool arguments are JSON objects, and editor calls name the file they change."""
    for message in generate(seed=5, steps=80):
        for call in message.tool_calls:
            arguments = json.loads(call.arguments)
            assert isinstance(arguments, dict)
            if call.name == "editor":
                assert arguments["path"].startswith("src/tallyho/")


def test_the_user_interjects_corrections_that_start_new_turns() -> None:
    """About every 25 steps a user message corrects course; with corrections off there is none."""
    with_corrections = generate(seed=0, steps=80)
    users = [m for m in with_corrections if m.role == "user"]
    assert len(users) == 1 + 80 // 25
    quiet = generate(seed=0, steps=80, corrections=False)
    assert [m.role for m in quiet].count("user") == 1


def test_large_histories_for_tests_come_quickly_and_stay_valid() -> None:
    """steps=2000 gives a history of over a million characters that is still valid."""
    messages = generate(seed=2, steps=2000)
    assert sum(len(m.text) for m in messages) > 1_000_000
    assert [p for p in validate(messages) if p.severity == "error"] == []


def test_it_round_trips_through_jsonl(tmp_path: Path) -> None:
    """Written as JSONL and read back, the session says the same in either format."""
    messages = generate(seed=9, steps=30)
    write_jsonl(tmp_path / "openai.jsonl", messages, format="openai")
    assert read_jsonl(tmp_path / "openai.jsonl") == messages
    write_jsonl(tmp_path / "anthropic.jsonl", messages, format="anthropic")
    back = read_jsonl(tmp_path / "anthropic.jsonl")
    # The Anthropic reader notes provider details in `extra`; what was said must be the same.
    assert [(m.role, m.content, m.tool_calls, m.tool_call_id) for m in back] == [
        (m.role, m.content, m.tool_calls, m.tool_call_id) for m in messages
    ]


def test_fewer_than_one_step_is_an_error() -> None:
    """A session needs at least one step; zero is refused with a message naming the value."""
    with pytest.raises(ValueError, match="at least 1, not 0"):
        generate(steps=0)
