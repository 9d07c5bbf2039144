"""TruncateToolResults: long tool output cut down to its first and last lines, with a marker
that says how many lines went and how to recall them (`head-and-tail-truncation`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import transcript_params
from ctxfold.compactor import Compactor, Trim, compact_messages
from ctxfold.errors import ConfigurationError
from ctxfold.events import MASK, MESSAGE
from ctxfold.messages import Message, ToolCall, read_jsonl, validate
from ctxfold.pipeline import ClearToolResults, Pipeline, Summarize, TruncateToolResults
from ctxfold.pipeline.truncate import CUT_PHRASE
from ctxfold.storage import MemoryStore
from ctxfold.testing.counters import FixedCounter
from ctxfold.testing.doubles import FunctionSummarizer
from ctxfold.tokens import Budget
from ctxfold.tokens import counter as make_counter

COUNTER = FixedCounter()
BUDGET = Budget(window=100_000, keep_recent_tokens=0)
SYSTEM = Message("system", "You are a careful coding agent.")
SHORT = "## Objective\n- fix the bugs\n## Work done\n- ran the tests"


def run_step(call_id: str, lines: int) -> list[Message]:
    """A test run whose output is `lines` lines, the last one an error."""
    command = json.dumps({"command": f"pytest tests/test_{call_id}.py"})
    body = [f"tests/test_{call_id}.py::case_{n} PASSED word word word" for n in range(lines - 1)]
    body.append(f"FAILED tests/test_{call_id}.py::case_last - AssertionError: {call_id} broke")
    return [
        Message("assistant", None, (ToolCall(call_id, "bash", command),)),
        Message("tool", "\n".join(body), tool_call_id=call_id),
    ]


def history() -> list[Message]:
    messages = [SYSTEM, Message("user", "Make the suite pass.")]
    for call_id, lines in (("a", 300), ("short", 8), ("b", 200), ("newest", 300)):
        messages += run_step(call_id, lines)
    return messages


def results(messages: list[Message]) -> dict[str, Message]:
    return {m.tool_call_id or "": m for m in messages if m.role == "tool"}


@pytest.mark.guarantee("head-and-tail-truncation")
def test_long_output_keeps_its_first_and_last_lines_with_a_marker() -> None:
    """An older long output keeps its first and last lines; one marker line between them says
    how many lines were cut, names the call and says which log event holds the full output."""
    messages = history()
    out = compact_messages(
        messages,
        BUDGET,
        pipeline=Pipeline([TruncateToolResults(head_lines=5, tail_lines=3)]),
        counter=COUNTER,
        target=1500,
    )
    before, after = results(messages), results(out.messages)
    lines = after["a"].text.split("\n")
    original = before["a"].text.split("\n")
    assert lines[:5] == original[:5] and lines[-3:] == original[-3:]
    (marker,) = lines[5:-3]
    assert "292 " + CUT_PHRASE in marker
    assert "call a" in marker and "pytest tests/test_a.py" in marker
    assert "session log as event 4" in marker and "recall" in marker
    assert after["short"] == before["short"]  # fewer lines than are kept
    assert after["newest"] == before["newest"]  # the newest step is never cut
    assert [p for p in validate(out.messages) if p.severity == "error"] == []


@pytest.mark.guarantee("head-and-tail-truncation")
def test_truncation_is_a_mask_and_the_original_stays_in_the_log() -> None:
    """In a session the cut is a mask event: the log still holds the whole output."""
    session = MemoryStore().session("s")
    session.append(history())
    compactor = Compactor(BUDGET, pipeline=Pipeline([TruncateToolResults()]), counter=COUNTER)
    report = compactor.compact(session, target=1500)
    assert report.landed and [e.type for e in report.events] == [MASK]
    whole = {e.message.tool_call_id: e.message for e in session.events() if e.type == MESSAGE}
    assert len(whole["a"].text.split("\n")) == 300
    assert CUT_PHRASE in results(session.messages())["a"].text


@pytest.mark.guarantee("head-and-tail-truncation")
@pytest.mark.guarantee("never-larger")
def test_truncation_never_makes_a_result_larger_and_never_cuts_twice() -> None:
    """An output with barely more lines than are kept stays whole (the marker would cost more
    than the lines it saves); a cut output is not cut again."""
    messages = [SYSTEM, Message("user", "go")]
    messages += run_step("barely", 42) + run_step("long", 400) + run_step("newest", 10)
    pipeline = Pipeline([TruncateToolResults()])
    once = compact_messages(messages, BUDGET, pipeline=pipeline, counter=COUNTER, target=10)
    assert results(once.messages)["barely"] == results(messages)["barely"]
    assert CUT_PHRASE in results(once.messages)["long"].text
    twice = compact_messages(once.messages, BUDGET, pipeline=pipeline, counter=COUNTER, target=10)
    assert twice.messages == once.messages
    assert twice.events == []


@pytest.mark.guarantee("head-and-tail-truncation")
@pytest.mark.guarantee("cheapest-first")
def test_truncation_on_the_ladder_comes_before_clearing_and_summarizing() -> None:
    """First on the ladder, truncation alone reaching the target means nothing else runs."""
    summarizer = FunctionSummarizer.returning(SHORT)
    pipeline = Pipeline([TruncateToolResults(), ClearToolResults(), Summarize()])
    out = compact_messages(
        history(), BUDGET, pipeline=pipeline, summarizer=summarizer, counter=COUNTER, target=3500
    )
    assert [s.name for s in out.report.strategies] == ["truncate_tool_results"]
    assert out.report.fits and summarizer.calls == 0


@pytest.mark.guarantee("head-and-tail-truncation")
@pytest.mark.guarantee("identifiers-survive")
def test_identifiers_in_cut_lines_reach_a_later_summary_or_are_counted() -> None:
    """A summary of truncated output is checked against the whole output: what the cut lines
    held is restored to it or counted as left out."""
    messages = [SYSTEM, Message("user", "Old task: fix src/old.py")]
    lines = [f"line {n} word word" for n in range(100)]
    lines[50] = "ValueError: the middle of the output said so"
    command = json.dumps({"command": "python run.py"})
    messages += [
        Message("assistant", None, (ToolCall("mid", "bash", command),)),
        Message("tool", "\n".join(lines), tool_call_id="mid"),
        Message("assistant", "Done."),
        Message("user", "Now the current task."),
        *run_step("newest", 5),
    ]
    session = MemoryStore().session("s")
    session.append(messages)
    truncate = Compactor(BUDGET, pipeline=Pipeline([TruncateToolResults()]), counter=COUNTER)
    assert truncate.compact(session, target=400).landed
    summarize = Compactor(
        BUDGET,
        pipeline=Pipeline([Summarize()]),
        summarizer=FunctionSummarizer.returning(SHORT),
        counter=COUNTER,
    )
    report = summarize.compact(session, target=200)
    assert report.landed
    text = "\n".join(m.text for m in session.messages())
    assert "ValueError: the middle of the output said so" in text or (
        "ValueError: the middle of the output said so" in report.left_out
    )


def test_bad_settings_are_refused() -> None:
    """Negative line counts and keep_steps=0 are configuration errors."""
    with pytest.raises(ConfigurationError, match="head_lines"):
        TruncateToolResults(head_lines=-1)
    with pytest.raises(ConfigurationError, match="keep_steps"):
        TruncateToolResults(keep_steps=0)


@pytest.mark.transcripts
@pytest.mark.parametrize("transcript", transcript_params())
@pytest.mark.guarantee("never-larger")
def test_on_every_transcript_no_edit_puts_something_larger_in_place(transcript: Path) -> None:
    """Truncation, clearing, summaries and notes on real transcripts at small windows: every
    replaced message, and every replaced stretch, is larger than what stands in its place."""
    messages = read_jsonl(transcript)
    counter = make_counter("auto")
    pipeline = Pipeline(
        [TruncateToolResults(head_lines=10, tail_lines=10), *Pipeline.default().strategies]
    )
    trims: list[Trim] = []
    session = MemoryStore().session("n")
    session.append(messages)
    for window in (16_000, 8_000, 4_000):
        compactor = Compactor(
            Budget(window=window), pipeline=pipeline, counter=counter, on_trim=trims.append
        )
        compactor.compact(session)
    if sum(counter.count_message(m) for m in messages) > 4_000:
        assert trims
    for trim in trims:
        assert trim.tokens_after < trim.tokens_before, trim
        if trim.kind == "mask":
            for old, new in zip(trim.removed, trim.replacement, strict=True):
                assert counter.count_message(new) < counter.count_message(old)
