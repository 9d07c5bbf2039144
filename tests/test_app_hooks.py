"""The application's own trigger and listener: `Compactor(should_compact=...)` beside the budget
(`app-trigger`), and `Compactor(on_trim=...)`, told what each landed edit took out of the view
(`trim-reported`)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from ctxfold.compactor import CompactionContext, Compactor, Trim
from ctxfold.errors import ConfigurationError
from ctxfold.events import COMPACTION, MASK
from ctxfold.messages import Message
from ctxfold.pipeline import ClearToolResults, Pipeline, Summarize
from ctxfold.session import Session
from ctxfold.storage import MemoryStore
from ctxfold.testing.counters import FixedCounter
from ctxfold.testing.doubles import FunctionSummarizer
from ctxfold.tokens import Budget
from tests._histories import agent_history

COUNTER = FixedCounter()
SHORT = "## Objective\n- fix the bugs\n## Work done\n- read the modules"
BUDGET = Budget(window=3000, keep_recent_tokens=0)
"""Trigger at 2,000 tokens (window less a third), target 1,200."""


def session_with(messages: list[Message]) -> Session:
    session = MemoryStore().session("s")
    session.append(messages)
    return session


def between() -> list[Message]:
    """A history over the budget's target (1,200) but under its trigger (2,000)."""
    return agent_history(2, output_words=200, task_steps=3)


def over() -> list[Message]:
    """A history over the trigger."""
    return agent_history(3, output_words=250, task_steps=3)


def compactor(**kwargs: Any) -> Compactor:
    kwargs.setdefault("pipeline", Pipeline([Summarize()]))
    return Compactor(
        kwargs.pop("budget", BUDGET),
        summarizer=FunctionSummarizer.returning(SHORT),
        counter=COUNTER,
        **kwargs,
    )


# -- should_compact ----------------------------------------------------------------------------
@pytest.mark.guarantee("app-trigger")
def test_the_predicate_fires_compaction_before_the_budget_would() -> None:
    """Under the budget's trigger, a predicate that says yes compacts toward the budget's target;
    it is given the estimate and the session."""
    session = session_with(between())
    seen: list[tuple[int, Session]] = []

    def every_time(estimate: int, s: Session) -> bool:
        seen.append((estimate, s))
        return True

    comp = compactor(should_compact=every_time)
    estimate = comp.estimate(session)
    assert BUDGET.target_tokens < estimate < BUDGET.trigger_tokens
    report = comp.maybe_compact(session)
    assert report is not None and report.landed and report.fits
    assert seen == [(estimate, session)]
    assert compactor().maybe_compact(session_with(between())) is None


@pytest.mark.guarantee("app-trigger")
def test_the_budget_still_fires_when_the_predicate_says_no() -> None:
    """The budget is the safety net: at its trigger point a session is compacted even when the
    predicate says no, so a predicate can never let a session overflow."""
    comp = compactor(should_compact=lambda estimate, session: False)
    assert comp.should_compact(session_with(between())) is False
    report = comp.maybe_compact(session_with(over()))
    assert report is not None and report.landed


@pytest.mark.guarantee("app-trigger")
@pytest.mark.guarantee("min-messages")
def test_the_predicate_never_compacts_a_session_under_min_messages() -> None:
    """`min_messages` holds whatever the predicate says."""
    session = session_with([Message("system", "Be brief."), Message("user", "hi " * 2000)])
    comp = compactor(should_compact=lambda estimate, s: True)
    assert comp.maybe_compact(session) is None


@pytest.mark.guarantee("app-trigger")
@pytest.mark.guarantee("callback-ranges-compose")
def test_the_predicate_and_on_compact_let_the_application_decide_when_and_what() -> None:
    """With a predicate and an `on_compact` callback the application picks both the moment and
    the ranges, even with a history already within the target."""
    session = session_with(agent_history(2, output_words=40, task_steps=1))
    ranges: list[int] = []

    def on_compact(ctx: CompactionContext) -> None:
        ranges.append(len(ctx.messages))
        ctx.compact((1, 7), lambda messages: "## Work done\n- the first task")

    turns = iter([False, True])
    comp = compactor(should_compact=lambda e, s: next(turns), on_compact=on_compact)
    assert comp.maybe_compact(session) is None
    report = comp.maybe_compact(session)
    assert report is not None and report.landed and report.reason == "callback"
    assert ranges == [len(agent_history(2, output_words=40, task_steps=1))]


@pytest.mark.guarantee("app-trigger")
@pytest.mark.guarantee("auto-trigger-isolates-failures")
def test_a_raising_predicate_is_logged_and_the_budget_decides(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A predicate that raises never breaks the agent's turn: the error is logged and the
    budget alone decides."""

    def broken(estimate: int, session: Session) -> bool:
        raise ZeroDivisionError("turn counter not set")

    comp = compactor(should_compact=broken)
    with caplog.at_level(logging.WARNING, logger="ctxfold"):
        assert comp.maybe_compact(session_with(between())) is None
        report = comp.maybe_compact(session_with(over()))
    assert report is not None and report.landed
    assert any("turn counter not set" in r.getMessage() for r in caplog.records)


@pytest.mark.guarantee("app-trigger")
async def test_the_predicate_serves_amaybe_compact_too() -> None:
    """`amaybe_compact` asks the same predicate."""
    comp = compactor(should_compact=lambda estimate, session: True)
    report = await comp.amaybe_compact(session_with(between()))
    assert report is not None and report.landed


def test_a_predicate_needs_a_budget() -> None:
    """Without a budget there is no target to compact toward: a clear error."""
    with pytest.raises(ConfigurationError, match="budget"):
        Compactor(None, should_compact=lambda estimate, session: True)


# -- on_trim -----------------------------------------------------------------------------------
@pytest.mark.guarantee("trim-reported")
def test_on_trim_is_told_what_each_landed_edit_took_out() -> None:
    """After a run lands, `on_trim` gets one `Trim` per edit, in log order: its event's seq, the
    first and last original seqs it stands for, the messages the model no longer sees as it last
    saw them, and what stands in their place."""
    trims: list[Trim] = []
    messages = over()
    session = session_with(messages)
    comp = compactor(
        pipeline=Pipeline([ClearToolResults(), Summarize()]),
        # The user's words unprotected: the short old turns are summarized whole.
        budget=Budget(window=3000, keep_recent_tokens=0, target=600, keep_user_tokens=0),
        on_trim=trims.append,
    )
    report = comp.compact(session)
    assert report.landed
    assert [t.seq for t in trims] == [e.seq for e in report.events]
    assert trims[0].kind == "mask"
    assert "summary" in [t.kind for t in trims]
    stored = {e.seq: e for e in session.events()}
    for trim in trims:
        assert trim.session_id == "s" and trim.reason == "manual"
        assert stored[trim.seq].type == (MASK if trim.kind == "mask" else COMPACTION)
        assert trim.removed and len(trim.replacement) >= 1
        assert trim.first_seq <= trim.last_seq
    mask = trims[0]
    assert [m.tool_call_id for m in mask.removed] == [m.tool_call_id for m in mask.replacement]
    assert all(m in messages for m in mask.removed)
    summary = next(t for t in trims if t.kind == "summary")
    assert summary.summary is not None and "fix the bugs" in summary.summary
    assert summary.replacement[0] in session.messages()


@pytest.mark.guarantee("trim-reported")
def test_on_trim_is_not_called_when_nothing_lands() -> None:
    """A run that declines or finds the history within the target trims nothing."""
    trims: list[Trim] = []
    comp = Compactor(
        BUDGET,
        pipeline=Pipeline([Summarize()]),
        summarizer=FunctionSummarizer.declining(),
        counter=COUNTER,
        on_trim=trims.append,
    )
    assert not comp.compact(session_with(over())).landed
    assert comp.maybe_compact(session_with(between())) is None
    assert trims == []


@pytest.mark.guarantee("trim-reported")
@pytest.mark.guarantee("auto-trigger-isolates-failures")
def test_a_raising_on_trim_is_reported_by_the_trigger_and_raised_by_compact() -> None:
    """The edits have landed when `on_trim` runs: in the automatic trigger its error is logged
    and reported beside the landed outcome; a manual compact raises it."""

    def broken(trim: Trim) -> None:
        raise RuntimeError("audit store is down")

    comp = compactor(on_trim=broken)
    report = comp.maybe_compact(session_with(over()))
    assert report is not None and report.landed
    assert report.error is not None and "audit store is down" in report.error
    session = session_with(over())
    with pytest.raises(RuntimeError, match="audit store is down"):
        comp.compact(session)
    assert any(e.type == COMPACTION for e in session.events())


@pytest.mark.guarantee("trim-reported")
async def test_on_trim_serves_acompact_too() -> None:
    """The async entry points call `on_trim` the same way."""
    trims: list[Trim] = []
    report = await compactor(on_trim=trims.append).acompact(session_with(over()))
    assert report.landed and [t.seq for t in trims] == [e.seq for e in report.events]
