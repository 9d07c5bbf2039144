"""Every identifier of a summarized stretch is in the view or counted as left out, on every path
(`identifiers-survive`): pipeline summaries over output that clearing removed (in the same run or
an earlier one), and summaries written through `ctx.compact`, by the compactor's summarizer or by
the application's own function."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

from conftest import transcript_params
from ctxfold.compactor import CompactionContext, CompactionReport, Compactor, compact_messages
from ctxfold.events import MESSAGE, Compaction
from ctxfold.messages import Message, ToolCall, read_jsonl
from ctxfold.pipeline import ClearToolResults, Pipeline, Summarize
from ctxfold.replay import replay
from ctxfold.session import Item, Session
from ctxfold.storage import MemoryStore
from ctxfold.summarizers.identifiers import extract_identifiers
from ctxfold.testing.counters import FixedCounter
from ctxfold.testing.doubles import FunctionSummarizer
from ctxfold.tokens import Budget
from tests._histories import words

COUNTER = FixedCounter()
BARE = "## Objective\n- fix the parser\n## Work done\n- ran the checks"
"""A summary that names no identifier at all: every one must be restored or counted."""


def failing_step(call_id: str, filler: int = 150) -> list[Message]:
    """A step whose output carries an error string and a path found nowhere else."""
    command = json.dumps({"command": f"python -m pytest tests/test_{call_id}.py"})
    output = (
        f"{words(filler, call_id)}\n"
        f'  File "src/parser/{call_id}.py", line 12, in parse\n'
        f"ValueError: header block {call_id} is truncated\n"
    )
    return [
        Message("assistant", None, (ToolCall(call_id, "bash", command),)),
        Message("tool", output, tool_call_id=call_id),
    ]


def history(turns: int = 3) -> list[Message]:
    messages = [Message("system", "You are a careful coding agent.")]
    for turn in range(turns):
        messages.append(Message("user", f"Task {turn}: fix the parser"))
        messages += failing_step(f"t{turn}a") + failing_step(f"t{turn}b")
        messages.append(Message("assistant", f"Done with task {turn}."))
    messages.append(Message("user", "Now run the whole suite."))
    return messages + failing_step("now0") + failing_step("now1")


def view_text(messages: Iterable[Message]) -> str:
    return "\n".join(m.text + "".join(c.arguments for c in m.tool_calls) for m in messages)


def unaccounted(
    originals: dict[int, Message], items: Sequence[Item], left_out: Iterable[str]
) -> list[str]:
    """Identifiers of the originals behind each summary that are neither in the view nor
    counted as left out."""
    text = view_text(item.message for item in items)
    counted = set(left_out)
    missing: list[str] = []
    for item in items:
        if item.kind != "summary":
            continue
        low, high = item.span
        covered = [originals[seq] for seq in range(low, high + 1) if seq in originals]
        missing += [i for i in extract_identifiers(covered) if i not in text and i not in counted]
    return missing


def originals_of(session: Session) -> dict[int, Message]:
    return {e.seq: e.message for e in session.events() if e.type == MESSAGE}


def errors_in(messages: Iterable[Message]) -> list[str]:
    return [i for i in extract_identifiers(list(messages)) if i.startswith("ValueError")]


@pytest.mark.guarantee("identifiers-survive")
def test_identifiers_in_output_cleared_in_the_same_run_are_restored_or_counted() -> None:
    """The default ladder clears tool output before it summarizes: the error strings of the
    cleared output still reach the summary, or the report counts them as left out."""
    messages = history()
    out = compact_messages(
        messages,
        Budget(window=100_000, keep_recent_tokens=0),
        summarizer=FunctionSummarizer.returning(BARE),
        counter=COUNTER,
        target=500,
    )
    report = out.report
    assert [s.name for s in report.strategies][:2] == ["clear_tool_results", "summarize"]
    # The list's items are numbered 1, 2, ... as in a fresh session; each summary event says
    # which of them it stands for.
    originals = dict(enumerate(messages, 1))
    covered = [
        originals[seq]
        for edit in (e.payload for e in report.events)
        if isinstance(edit, Compaction) and edit.kind == "summary" and edit.covers
        for seq in range(edit.covers[0], edit.covers[1] + 1)
        if seq in originals
    ]
    wanted = errors_in(covered)
    assert wanted, "the summarized stretch should hold error strings"
    text = view_text(out.messages)
    assert [i for i in wanted if i not in text and i not in report.left_out] == []
    assert report.identifiers_restored > 0


@pytest.mark.guarantee("identifiers-survive")
def test_identifiers_in_output_cleared_by_an_earlier_run_are_restored_or_counted() -> None:
    """Output masked by an earlier compaction (a stored mask event) is read from the log when a
    later run summarizes its stretch: its identifiers are restored or counted."""
    session = MemoryStore().session("s")
    session.append(history())
    budget = Budget(window=100_000, keep_recent_tokens=0)
    clear = Compactor(budget, pipeline=Pipeline([ClearToolResults()]), counter=COUNTER)
    first = clear.compact(session, target=1200)
    assert first.landed and [s.name for s in first.strategies] == ["clear_tool_results"]
    summarize = Compactor(
        budget,
        pipeline=Pipeline([Summarize()]),
        summarizer=FunctionSummarizer.returning(BARE),
        counter=COUNTER,
    )
    second = summarize.compact(session, target=400)
    assert second.landed
    items = session.items()
    assert any(item.kind == "summary" for item in items)
    assert unaccounted(originals_of(session), items, second.left_out) == []
    assert second.identifiers_restored > 0


def range_callback(summarize: object) -> object:
    def on_compact(ctx: CompactionContext) -> None:
        ctx.compact((1, 7), summarize)  # type: ignore[arg-type]

    return on_compact


@pytest.mark.parametrize("who", ["application", "compactor"])
@pytest.mark.guarantee("identifiers-survive")
def test_summaries_written_through_ctx_compact_are_checked(who: str) -> None:
    """A summary written through `ctx.compact`, by the application's function or by the
    compactor's summarizer, is checked like any other: the identifiers of its range are
    restored to it or counted as left out, and the report says how many were kept."""
    session = MemoryStore().session("s")
    session.append(history())
    summarize = (lambda messages: BARE) if who == "application" else None
    compactor = Compactor(
        Budget(window=100_000, keep_recent_tokens=0),
        summarizer=FunctionSummarizer.returning(BARE),
        counter=COUNTER,
        on_compact=range_callback(summarize),
    )
    report: CompactionReport = compactor.compact(session)
    assert report.landed and report.reason == "callback"
    items = session.items()
    assert unaccounted(originals_of(session), items, report.left_out) == []
    assert report.identifiers_kept > 0
    assert report.identifiers_restored > 0
    summary = next(item for item in items if item.kind == "summary")
    assert "ValueError: header block t0a is truncated" in summary.message.text


@pytest.mark.guarantee("identifiers-survive")
def test_what_does_not_fit_the_summary_budget_is_counted_exactly() -> None:
    """When the identifiers alone exceed the summary's budget, each one missing from the view is
    in the report's left_out, and the count matches."""
    messages = [Message("system", "You are a careful coding agent.")]
    for turn in range(6):
        messages.append(Message("user", f"Task {turn}: fix the parser"))
        messages += [m for s in "abcdef" for m in failing_step(f"t{turn}{s}", 40)]
    messages.append(Message("user", "Now run the whole suite."))
    messages += failing_step("now0")
    session = MemoryStore().session("s")
    session.append(messages)
    compactor = Compactor(
        Budget(window=100_000, keep_recent_tokens=0),
        pipeline=Pipeline([ClearToolResults(), Summarize(summary_tokens=64)]),
        summarizer=FunctionSummarizer.returning(BARE),
        counter=COUNTER,
    )
    report = compactor.compact(session, target=600)
    assert report.landed
    items = session.items()
    assert report.identifiers_left_out > 0
    assert report.identifiers_left_out == len(report.left_out)
    assert unaccounted(originals_of(session), items, report.left_out) == []


@pytest.mark.transcripts
@pytest.mark.parametrize("transcript", transcript_params())
@pytest.mark.guarantee("identifiers-survive")
def test_on_every_transcript_each_summarized_identifier_is_in_view_or_counted(
    transcript: Path,
) -> None:
    """Replayed with the default ladder at a 16,000-token window, through summaries of cleared
    output and summaries of summaries: every identifier of the originals each summary stands
    for is in the final view or in some report's left_out."""
    session = MemoryStore().session("r")
    result = replay(session, read_jsonl(transcript), Compactor(Budget(window=16_000)))
    left_out = [i for c in result.compactions for i in c.report.left_out]
    assert unaccounted(originals_of(session), session.items(), left_out) == []
