"""The shape of a transcript: cutting only where `analyze` allows never breaks a history."""

from __future__ import annotations

from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxfold.messages import Message, ToolCall, validate
from ctxfold.messages.structure import analyze, in_system_block, is_safe_cut, pending_step

History = tuple[list[Message], frozenset[int]]
CALL_IDS = st.sampled_from(["call_a", "call_b", "call_c", "call_d", "call_e"])
"""A small pool, so ids repeat across steps (and sometimes within one) as in the tau transcripts."""


def _results(draw: st.DrawFn, calls: tuple[ToolCall, ...]) -> list[Message]:
    order = draw(st.permutations(range(len(calls))))
    return [Message("tool", f"output of {calls[i].name}", tool_call_id=calls[i].id) for i in order]


def _step(draw: st.DrawFn, number: int) -> tuple[Message, list[Message]]:
    ids = draw(st.lists(CALL_IDS, min_size=1, max_size=3))
    calls = tuple(ToolCall(i, f"tool_{number}_{k}", '{"k": 1}') for k, i in enumerate(ids))
    text = draw(st.sampled_from([None, "Let me check."]))
    return Message("assistant", text, calls), _results(draw, calls)


@st.composite
def histories(draw: st.DrawFn) -> History:
    """A system block, user turns of steps with 1–3 parallel calls and their results, summaries
    flagged synthetic between turns, and sometimes a trailing call still waiting for results."""
    messages = [Message("system", f"rule {i}") for i in range(draw(st.integers(0, 2)))]
    synthetic: set[int] = set()
    steps = 0
    for turn in range(draw(st.integers(0, 4))):
        if draw(st.booleans()):
            synthetic.add(len(messages))
            messages.append(Message("user", f"[summary of turns before {turn}]"))
        messages.append(Message("user", f"request {turn}"))
        for _ in range(draw(st.integers(0, 3))):
            call, results = _step(draw, steps)
            steps += 1
            messages += [call, *results]
        if draw(st.booleans()):
            messages.append(Message("assistant", f"answer {turn}"))
    if draw(st.booleans()):
        call, results = _step(draw, steps)
        answered = draw(st.integers(0, len(results) - 1))
        messages += [call, *results[:answered]]
    return messages, frozenset(synthetic)


def _errors(messages: list[Message]) -> list[str]:
    return [str(p) for p in validate(messages) if p.severity == "error"]


def _anthropic_breaks(messages: list[Message]) -> list[str]:
    # A cut may leave an assistant message first, a reused id, or (a cut at the end) nothing
    # after the system prompt: all expected for Anthropic.
    allowed = {"role-order", "duplicate-call-id", "no-conversation"}
    problems = validate(messages, "anthropic")
    return [str(p) for p in problems if p.severity == "error" and p.code not in allowed]


@settings(deadline=None)
@given(histories())
@pytest.mark.guarantee("history-always-valid")
def test_generated_histories_are_valid(history: History) -> None:
    """The generated histories themselves are valid, so any error after a cut comes from the cut."""
    messages, _ = history
    assert _errors(messages) == []


@settings(deadline=None)
@given(histories())
@pytest.mark.guarantee("history-always-valid")
def test_keeping_the_system_block_and_any_suffix_from_a_cut_is_valid(history: History) -> None:
    """Dropping everything between the system block and any cut point leaves a valid history."""
    messages, synthetic = history
    structure = analyze(messages, synthetic)
    for cut in structure.cuts:
        kept = messages[: structure.system_end] + messages[cut:]
        assert _errors(kept) == [], cut
        assert _anthropic_breaks(kept) == [], cut


@settings(deadline=None)
@given(histories())
@pytest.mark.guarantee("history-always-valid")
def test_dropping_a_run_between_two_cut_points_is_valid(history: History) -> None:
    """Dropping any contiguous run that starts and ends at cut points leaves a valid history."""
    messages, synthetic = history
    cuts = sorted(analyze(messages, synthetic).cuts)
    for start, end in combinations(cuts, 2):
        kept = messages[:start] + messages[end:]
        assert _errors(kept) == [], (start, end)
        assert _anthropic_breaks(kept) == [], (start, end)


@settings(deadline=None)
@given(histories())
def test_synthetic_items_never_start_a_turn_and_every_real_user_message_does(
    history: History,
) -> None:
    """Turns start at real user messages only; a summary is part of the turn it sits in."""
    messages, synthetic = history
    structure = analyze(messages, synthetic)
    starts = [t.user for t in structure.turns if t.user is not None]
    real_users = [
        i
        for i, m in enumerate(messages)
        if m.role == "user" and i not in synthetic and i >= structure.system_end
    ]
    assert starts == real_users
    for index in synthetic:
        assert structure.unit_at(index).kind == "synthetic"


@settings(deadline=None)
@given(histories())
def test_no_cut_point_falls_inside_a_step(history: History) -> None:
    """Every index between an assistant message and its last result is not a safe cut."""
    messages, synthetic = history
    structure = analyze(messages, synthetic)
    for step in structure.steps:
        for inside in range(step.start + 1, step.end):
            assert inside not in structure.cuts


@settings(deadline=None)
@given(histories())
@pytest.mark.guarantee("history-always-valid")
def test_cutting_inside_a_step_is_caught_by_validate(history: History) -> None:
    """The checker the properties rely on has teeth: a cut inside a step is reported as an error."""
    messages, synthetic = history
    structure = analyze(messages, synthetic)
    for step in structure.steps:
        for inside in range(step.start + 1, step.end):
            assert _errors(messages[: structure.system_end] + messages[inside:]) != []


SYSTEM = Message("system", "You are a coding agent.")


def _call(*ids: str) -> Message:
    return Message("assistant", None, tuple(ToolCall(i, "bash", "{}") for i in ids))


def _result(call_id: str) -> Message:
    return Message("tool", "ok", tool_call_id=call_id)


EXAMPLE = [
    SYSTEM,  # 0
    Message("user", "fix the bug"),  # 1
    _call("a", "b"),  # 2
    _result("b"),  # 3
    _result("a"),  # 4
    Message("assistant", "fixed"),  # 5
    Message("user", "now add a test"),  # 6
    _call("c"),  # 7
    _result("c"),  # 8
    _call("d"),  # 9
    _result("d"),  # 10
    _call("e", "f"),  # 11
    _result("e"),  # 12
]


def test_turns_start_at_each_user_message() -> None:
    """Each real user message starts a turn, and the last turn is the current task."""
    structure = analyze(EXAMPLE)
    assert structure.system_end == 1
    assert [(t.start, t.end, t.user) for t in structure.turns] == [(1, 6, 1), (6, 13, 6)]
    assert structure.current_request == 6


def test_parallel_calls_and_their_results_form_one_step() -> None:
    """An assistant message and all the results after it are one step, never split."""
    structure = analyze(EXAMPLE)
    assert [(s.start, s.end) for s in structure.steps] == [
        (2, 5),
        (5, 6),
        (7, 9),
        (9, 11),
        (11, 13),
    ]
    assert sorted(structure.cuts) == [1, 2, 5, 6, 7, 9, 11, 13]
    assert not is_safe_cut(EXAMPLE, 3)
    assert is_safe_cut(EXAMPLE, 5)


def test_a_trailing_call_without_all_results_is_pending() -> None:
    """The last step, with call 'f' unanswered, is pending; an answered last step is not."""
    assert analyze(EXAMPLE).pending == (11,)
    assert analyze([*EXAMPLE, _result("f")]).pending == ()


def test_pinned_keeps_system_current_request_newest_steps_and_pending() -> None:
    """pinned(keep_steps) holds the system block, the current request, the newest steps and the
    pending step; older steps stay free to compact."""
    structure = analyze(EXAMPLE)
    assert structure.pinned(keep_steps=0) == {0, 6, 11, 12}
    assert structure.pinned(keep_steps=1) == {0, 6, 11, 12}
    assert structure.pinned(keep_steps=2) == {0, 6, 9, 10, 11, 12}
    assert structure.pinned(keep_steps=1, also=[3]) == {0, 6, 11, 12, 2, 3, 4}


def test_a_summary_flagged_synthetic_does_not_start_a_turn() -> None:
    """A summary in the user role, flagged synthetic, is its own unit inside the current turn."""
    summary = Message("user", "[summary: the bug was fixed in io.py]")
    messages = [SYSTEM, summary, Message("user", "now add a test"), _call("c"), _result("c")]
    structure = analyze(messages, synthetic={1})
    assert [(t.user, [u.kind for u in t.units]) for t in structure.turns] == [
        (None, ["synthetic"]),
        (2, ["user", "step"]),
    ]
    assert structure.current_request == 2
    unflagged = analyze(messages)
    assert [t.user for t in unflagged.turns] == [1, 2]


@st.composite
def any_history(draw: st.DrawFn) -> History:
    """Any sequence of system, user, assistant (with calls or without) and tool messages, in any
    order, some flagged synthetic: system messages after the block, stray results, a summary
    between a call and its results, a call whose result never came."""
    messages: list[Message] = []
    for _ in range(draw(st.integers(0, 12))):
        role = draw(st.sampled_from(["system", "user", "assistant", "assistant", "tool", "tool"]))
        if role == "assistant" and draw(st.booleans()):
            messages.append(_call(*draw(st.lists(CALL_IDS, min_size=1, max_size=2))))
        elif role == "tool":
            messages.append(_result(draw(CALL_IDS)))
        else:
            messages.append(Message(role, f"{role} {len(messages)}"))
    flagged = draw(st.sets(st.integers(0, max(0, len(messages) - 1)), max_size=3))
    return messages, frozenset(i for i in flagged if i < len(messages))


@settings(deadline=None, max_examples=400)
@given(any_history())
def test_what_is_known_near_an_index_agrees_with_analyze(history: History) -> None:
    """`is_safe_cut`, `in_system_block`, `pending_step` and `turns_begun` say what `analyze`
    finds, for any history, synthetic items anywhere."""
    messages, synthetic = history
    structure = analyze(messages, synthetic)
    for index in range(-1, len(messages) + 2):
        assert is_safe_cut(messages, index, synthetic) == (index in structure.cuts), index
    for index in range(len(messages)):
        assert in_system_block(messages, index, synthetic) == (index < structure.system_end)
    assert pending_step(messages, synthetic) == next(iter(structure.pending), None)
    requests = [t.start for t in structure.turns if t.user is not None]
    for start in range(len(messages) + 1):
        for end in range(start, len(messages) + 1):
            begun = sum(1 for r in requests if start <= r < end)
            assert structure.turns_begun(start, end) == begun
