"""The validity checker and repair: what providers reject, what is only worth knowing."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from conftest import transcript_params
from ctxfold.messages import Message, Problem, ToolCall, is_valid, read_jsonl, repair, validate


def _call(*ids: str) -> Message:
    return Message("assistant", None, tuple(ToolCall(i, "bash", "{}") for i in ids))


def _result(call_id: str, text: str = "ok") -> Message:
    return Message("tool", text, tool_call_id=call_id)


SYSTEM = Message("system", "You are an agent.")
USER = Message("user", "do the task")


def _codes(problems: list[Problem], severity: str = "error") -> list[tuple[int, str]]:
    return [(p.index, p.code) for p in problems if p.severity == severity]


@pytest.mark.transcripts
@pytest.mark.parametrize("path", transcript_params())
@pytest.mark.guarantee("history-always-valid")
def test_shared_transcripts_have_no_errors(path: Path) -> None:
    """Every shared transcript is a history OpenAI accepts: validate finds no error in it."""
    messages = read_jsonl(path)
    assert _codes(validate(messages)) == []
    assert is_valid(messages)


@pytest.mark.transcripts
@pytest.mark.parametrize("path", transcript_params())
@pytest.mark.guarantee("history-always-valid")
def test_pending_final_calls_and_repeated_ids_are_reported_as_info(path: Path) -> None:
    """A final call without result is "pending-call" and a reused call id "duplicate-call-id"."""
    messages = read_jsonl(path)
    info = validate(messages)
    ids = Counter(c.id for m in messages for c in m.tool_calls)
    repeated_uses = sum(n - 1 for n in ids.values() if n > 1)
    assert sum(p.code == "duplicate-call-id" for p in info) == repeated_uses
    last = len(messages) - 1
    pending = messages[-1].role == "assistant" and bool(messages[-1].tool_calls)
    assert [(p.index, p.code) for p in info if p.code == "pending-call"] == (
        [(last, "pending-call")] if pending else []
    )
    assert all(p.severity == "info" for p in info)
    if path.name.startswith("swe__"):
        assert pending
    if path.name.startswith("tau__"):
        assert repeated_uses > 0


@pytest.mark.transcripts
@pytest.mark.parametrize("path", transcript_params())
def test_repair_of_a_transcript_validates_clean_and_is_idempotent(path: Path) -> None:
    """Repairing a transcript gives a valid history, and repairing again changes nothing."""
    messages = read_jsonl(path)
    once = repair(messages)
    assert is_valid(once)
    assert repair(once) == once
    # A valid history has nothing to repair: a pending last call is left alone.
    assert once == messages


def test_a_result_whose_call_was_never_made_is_an_orphan() -> None:
    """A tool result that answers no call of the assistant message before it is "orphan-result"."""
    history = [SYSTEM, USER, _call("a"), _result("a"), _result("zzz"), Message("assistant", "done")]
    problems = validate(history)
    assert _codes(problems) == [(4, "orphan-result")]
    assert "'zzz'" in problems[0].message


def test_a_result_after_a_user_message_is_an_orphan() -> None:
    """A tool result that follows no assistant message is "orphan-result"."""
    assert _codes(validate([SYSTEM, USER, _result("a")])) == [(2, "orphan-result")]


def test_a_call_left_unanswered_before_the_next_message_is_missing() -> None:
    """A call with no result before the conversation moves on is "missing-result" at its call."""
    history = [SYSTEM, USER, _call("a", "b"), _result("a"), Message("user", "and?")]
    problems = validate(history)
    assert _codes(problems) == [(2, "missing-result")]
    assert "'b'" in problems[0].message


def test_a_trailing_unanswered_call_is_pending_not_an_error() -> None:
    """The newest call without result is "pending-call" (info): the agent is waiting for it."""
    history = [SYSTEM, USER, _call("a", "b"), _result("b")]
    problems = validate(history)
    assert _codes(problems) == []
    assert _codes(problems, "info") == [(2, "pending-call")]
    assert "'a'" in problems[0].message


def test_parallel_results_answered_in_two_places_are_a_split_batch() -> None:
    """A result of a parallel batch that comes after another message is "split-batch"."""
    history = [SYSTEM, USER, _call("a", "b"), _result("a"), Message("user", "hm"), _result("b")]
    assert _codes(validate(history)) == [(5, "split-batch")]


def test_a_single_call_answered_late_is_a_misplaced_result() -> None:
    """A lone call's result that comes after another message is "misplaced-result"."""
    history = [SYSTEM, USER, _call("a"), Message("assistant", "waiting"), _result("a")]
    assert _codes(validate(history)) == [(4, "misplaced-result")]


def test_a_reused_call_id_pairs_by_position() -> None:
    """A call id used twice is info for OpenAI, and each use needs its own result."""
    paired = [SYSTEM, USER, _call("x"), _result("x"), _call("x"), _result("x")]
    assert _codes(validate(paired)) == []
    assert _codes(validate(paired), "info") == [(4, "duplicate-call-id")]
    unpaired = [SYSTEM, USER, _call("x", "x"), _result("x"), Message("user", "next")]
    assert _codes(validate(unpaired)) == [(2, "missing-result")]


def test_anthropic_refuses_a_reused_call_id() -> None:
    """For Anthropic, whose tool_use ids must be unique per request, a reused id is an error."""
    history = [SYSTEM, USER, _call("x"), _result("x"), _call("x"), _result("x")]
    assert _codes(validate(history, provider="anthropic")) == [(4, "duplicate-call-id")]


def test_anthropic_needs_a_user_message_first_and_system_only_at_the_start() -> None:
    """For Anthropic, an assistant first is "role-order" and a late system is "system-not-first"."""
    history = [SYSTEM, Message("assistant", "hello"), Message("user", "hi"), SYSTEM]
    assert _codes(validate(history, provider="anthropic")) == [
        (1, "role-order"),
        (3, "system-not-first"),
    ]
    assert _codes(validate(history, provider="openai")) == []


def test_empty_messages_are_reported_per_provider() -> None:
    """An assistant message with neither content nor calls is "empty-message" for both providers;
    an empty user string only for Anthropic."""
    history = [USER, Message("assistant", None), Message("user", ""), Message("assistant", "ok")]
    assert _codes(validate(history)) == [(1, "empty-message")]
    assert _codes(validate(history, provider="anthropic")) == [
        (1, "empty-message"),
        (2, "empty-message"),
    ]


def test_an_image_only_message_is_not_empty() -> None:
    """A user message with an image part and no text is not "empty-message"."""
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    message = Message("user", None, extra={"openai": {"parts": [image]}})
    assert validate([message]) == []


def test_problems_are_sorted_by_index() -> None:
    """validate lists problems in the order of the messages they are about."""
    history = [USER, _call("a"), Message("user", "x"), _result("q"), _call("b"), _result("c"), USER]
    indices = [p.index for p in validate(history)]
    assert indices == sorted(indices)
    assert len(indices) == 4


def test_repair_adds_a_marked_placeholder_for_a_missing_result() -> None:
    """An unanswered call followed by other messages gets a placeholder naming its call id."""
    history = [SYSTEM, USER, _call("a", "b"), _result("a"), Message("user", "and?")]
    fixed = repair(history)
    assert [m.role for m in fixed] == ["system", "user", "assistant", "tool", "tool", "user"]
    placeholder = fixed[4]
    assert placeholder.tool_call_id == "b"
    assert placeholder.text.startswith("[no result: ")
    assert "'b'" in placeholder.text
    assert is_valid(fixed)


def test_repair_drops_orphans_and_moves_late_results_up_to_their_call() -> None:
    """Results that answer no call are dropped; a result that came after the conversation moved
    on, for a call still unanswered, is moved up to its call rather than replaced."""
    history = [SYSTEM, _result("q"), USER, _call("a"), _result("zzz"), USER, _result("a")]
    fixed = repair(history)
    assert [(m.role, m.tool_call_id) for m in fixed] == [
        ("system", None),
        ("user", None),
        ("assistant", None),
        ("tool", "a"),
        ("user", None),
    ]
    assert fixed[3] == history[6]
    assert is_valid(fixed)


def test_repair_leaves_a_pending_final_call_alone() -> None:
    """The newest call without result is not given a placeholder: its result may still come."""
    history = [SYSTEM, USER, _call("a", "b"), _result("a")]
    assert repair(history) == history


def test_repair_is_deterministic_and_idempotent() -> None:
    """Repairing the same history twice gives equal results, and repairing a repair is a no-op."""
    history = [SYSTEM, USER, _call("a", "b"), Message("user", "x"), _result("b"), _call("c"), USER]
    first, second = repair(history), repair(list(history))
    assert first == second
    assert repair(first) == first
    assert is_valid(first)


def test_unknown_provider_is_refused() -> None:
    """validate accepts only "openai" and "anthropic"."""
    with pytest.raises(ValueError, match="gemini"):
        validate([USER], provider="gemini")  # type: ignore[arg-type]
