"""Application-chosen ranges through `on_compact(ctx)`
(`callback-ranges-compose`-`range-never-splits-calls`), and what every run reports to listeners and
to logging (`run-reported`)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest

from ctxfold.compactor import CompactionContext, CompactionReport, CompactionStart, Compactor
from ctxfold.errors import ConfigurationError, InvalidHistoryError, InvalidInputError
from ctxfold.events import COMPACTION
from ctxfold.messages import Message
from ctxfold.messages.validity import validate
from ctxfold.pipeline import Pipeline, Summarize
from ctxfold.session import Session
from ctxfold.storage import MemoryStore
from ctxfold.testing.counters import FixedCounter
from ctxfold.testing.doubles import FunctionSummarizer
from ctxfold.tokens import Budget
from tests._histories import agent_history

COUNTER = FixedCounter()
SHORT = "## Objective\n- fix the bugs\n## Work done\n- read the modules"
ROOMY = Budget(window=100_000, keep_recent_tokens=0)
"""Large enough that the pipeline never runs after a callback."""


def history() -> list[Message]:
    """system, then three turns of (user, step, step, assistant), then the current request."""
    return agent_history(
        3,
        output_words=100,
        task_steps=0,
        task="Task {t}: fix src/mod{t}.py",
        request="Now run the test suite.",
    )


def session_with(messages: list[Message]) -> Session:
    session = MemoryStore().session("s")
    session.append(messages)
    return session


def run_callback(
    session: Session, callback: Callable[[CompactionContext], Any], **kwargs: Any
) -> CompactionReport:
    comp = Compactor(ROOMY, counter=COUNTER, on_compact=callback, **kwargs)
    return comp.compact(session)


def summary_of(label: str) -> Callable[[list[Message]], str]:
    return lambda messages: f"## Work done\n- {label}: {len(messages)} messages"


def refused(
    session: Session, where: Any, error: type[Exception], **options: Any
) -> tuple[CompactionReport, list[Exception]]:
    """Run a callback that asks `ctx.compact(where, ..., **options)`; the run's report and the
    `error`s the call raised (the callback catches them, as an application would)."""
    caught: list[Exception] = []

    def callback(ctx: CompactionContext) -> None:
        try:
            ctx.compact(where, summary_of("x"), **options)
        except error as exc:
            caught.append(exc)

    return run_callback(session, callback), caught


# -- ranges the application picks ------------------------------------------------------------------
@pytest.mark.guarantee("callback-ranges-compose")
def test_each_compact_call_replaces_exactly_its_range_and_calls_compose() -> None:
    """Two ctx.compact calls in one callback: each replaces exactly its range in place, the
    messages before it stay, and the second call's indices refer to the result of the first."""
    original = history()
    session = session_with(original)
    seen: list[list[Message]] = []

    def callback(ctx: CompactionContext) -> None:
        seen.append(ctx.compact(range(1, 7), summary_of("first turn")))
        # After the first call, turn two starts at index 2.
        seen.append(ctx.compact(range(2, 8), summary_of("second turn")))

    report = run_callback(session, callback)
    assert report is not None and report.reason == "callback"
    first, second = seen
    assert first[:1] == original[:1]
    assert "first turn: 6 messages" in first[1].text
    assert first[2:] == original[7:]
    assert second[:2] == first[:2]
    assert "second turn: 6 messages" in second[2].text
    assert second[3:] == original[13:]
    assert session.messages() == second
    assert [p for p in validate(second) if p.severity == "error"] == []


@pytest.mark.guarantee("callback-records-true-seqs")
def test_each_range_is_stored_with_the_true_first_and_last_seq() -> None:
    """Each ctx.compact call is its own compaction event naming the first and last seq of what
    it replaced, even when a later range covers an earlier summary."""
    session = session_with(history())

    def callback(ctx: CompactionContext) -> None:
        ctx.compact((7, 13), summary_of("turn two"))  # seqs 8..13
        ctx.compact((1, 8), summary_of("turns one and two"))  # turn one plus that summary

    run_callback(session, callback)
    events = [e for e in session.events() if e.type == COMPACTION]
    assert len(events) == 2
    assert (events[0].data["first"], events[0].data["last"]) == (8, 13)
    assert events[0].data["covers"] == [8, 13]
    assert (events[1].data["first"], events[1].data["last"]) == (2, events[0].seq)
    assert events[1].data["covers"] == [2, 13]
    assert "log items 2–13" in events[1].message.text


@pytest.mark.guarantee("callback-ranges-compose")
def test_callback_summarize_none_uses_the_compactors_summarizer() -> None:
    """ctx.compact(range) without a function asks the compactor's summarizer, with exactly the
    messages of the range."""
    original = history()
    session = session_with(original)
    summarizer = FunctionSummarizer.returning(SHORT)

    def callback(ctx: CompactionContext) -> None:
        ctx.compact(slice(1, 7))

    run_callback(session, callback, summarizer=summarizer)
    assert summarizer.calls == 1
    assert list(summarizer.requests[0].messages) == original[1:7]
    assert "fix the bugs" in session.messages()[1].text


# -- ranges that are refused -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("where", "says"),
    [
        (range(3, 3), "empty"),
        ((6, 2), "reversed"),
        ((10, 99), "out of bounds"),
        ((-1, 4), "out of bounds"),
        (range(1, 7, 2), "step 1"),
        ("1:7", "range, a slice or a"),
    ],
)
@pytest.mark.guarantee("bad-range-refused")
def test_bad_ranges_are_rejected_with_a_clear_error_and_nothing_is_written(
    where: Any, says: str
) -> None:
    """An empty, reversed, out-of-bounds or malformed range raises InvalidInputError naming it;
    no history is dropped or duplicated."""
    original = history()
    session = session_with(original)
    report, caught = refused(session, where, InvalidInputError)
    assert not report.landed
    (error,) = caught
    assert says in str(error)
    assert session.messages() == original
    assert all(e.type != COMPACTION for e in session.events())


@pytest.mark.guarantee("range-never-splits-calls")
def test_a_range_that_splits_a_call_from_its_result_is_rejected() -> None:
    """A range ending between a tool call and its result raises InvalidHistoryError."""
    original = history()
    session = session_with(original)
    _, caught = refused(session, (1, 3), InvalidHistoryError)  # index 2 is a call, 3 its result
    assert caught and "split a tool call" in str(caught[0])
    assert session.messages() == original


@pytest.mark.guarantee("range-never-splits-calls")
def test_widen_grows_the_range_to_the_nearest_safe_boundaries() -> None:
    """With widen=True a range that would split a step is grown to whole steps on both sides."""
    original = history()
    session = session_with(original)
    summarized: list[list[Message]] = []

    def keep(messages: list[Message]) -> str:
        summarized.append(messages)
        return "## Work done\n- two steps"

    def callback(ctx: CompactionContext) -> None:
        ctx.compact((3, 5), keep, widen=True)  # from a result into the next step's call

    run_callback(session, callback)
    assert summarized == [original[2:6]]
    out = session.messages()
    assert out[:2] == original[:2]
    assert out[3:] == original[6:]
    assert [p for p in validate(out) if p.severity == "error"] == []


@pytest.mark.parametrize("widen", [False, True])
@pytest.mark.guarantee("bad-range-refused")
def test_a_range_over_the_system_block_is_rejected(widen: bool) -> None:
    """A range that covers the system prompt is refused with an error that says so, widened or
    not; the prompt stays."""
    original = history()
    session = session_with(original)
    _, caught = refused(session, (0, 7), InvalidHistoryError, widen=widen)
    assert caught and "system block" in str(caught[0])
    assert session.messages() == original


# -- observing runs --------------------------------------------------------------------------------
@pytest.mark.guarantee("run-reported")
def test_start_and_report_carry_reason_tokens_strategies_calls_and_duration(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """on_start sees each run begin (reason, tokens, target); on_report and the log see it end
    with tokens before and after, the strategies applied, the summarizer calls and the
    duration, for the threshold, manual, callback and overflow reasons."""
    starts: list[CompactionStart] = []
    reports: list[CompactionReport] = []
    summarizer = FunctionSummarizer.returning(SHORT)
    budget = Budget(window=1500, trigger=0.4, target=0.3, keep_recent_tokens=0)

    def make(on_compact: Any = None) -> Compactor:
        return Compactor(
            budget,
            pipeline=Pipeline([Summarize()]),
            summarizer=summarizer,
            counter=COUNTER,
            on_compact=on_compact,
            on_start=starts.append,
            on_report=reports.append,
        )

    def callback(ctx: CompactionContext) -> None:
        ctx.compact((1, 7), summary_of("first turn"))

    with caplog.at_level(logging.INFO, logger="ctxfold"):
        make().maybe_compact(session_with(history()))
        make().compact(session_with(history()))
        make(callback).compact(session_with(history()))
        make().recover_from_overflow(session_with(history()))

    assert [s.reason for s in starts] == ["threshold", "manual", "manual", "overflow"]
    assert [r.reason for r in reports] == ["threshold", "manual", "callback", "overflow"]
    for start, report in zip(starts, reports, strict=True):
        assert start.session_id == report.session_id == "s"
        assert start.tokens_before == report.tokens_before > report.tokens_after
        # An overflow aims at half of the estimate at most: the provider refused it.
        wanted = budget.target_tokens
        if report.reason == "overflow":
            wanted = min(wanted, report.tokens_before // 2)
        assert start.target == report.target == wanted
        assert report.landed and report.duration_s > 0
    summarized = [r for r in reports if r.reason != "callback"]
    for report in summarized:
        assert [s.name for s in report.strategies] == ["summarize"]
        assert report.strategies[0].tokens_before == report.tokens_before
        assert report.summarizer_calls >= 1
    logged = [r.getMessage() for r in caplog.records if r.name.startswith("ctxfold")]
    for report in reports:
        line = next(m for m in logged if f"({report.reason})" in m)
        assert f"{report.tokens_before} -> {report.tokens_after}" in line
        assert f"{report.summarizer_calls} summarizer call(s)" in line
    assert "summarize" in next(m for m in logged if "(manual)" in m)
    as_dict = reports[0].to_dict()
    assert as_dict["reason"] == "threshold" and as_dict["strategies"][0]["name"] == "summarize"
    assert json.loads(json.dumps(as_dict))["duration_s"] == reports[0].duration_s


# -- callbacks under acompact, and failing callbacks -----------------------------------------------
def async_returning(text: str) -> FunctionSummarizer:
    async def summarize(request: Any) -> str:
        return text

    return FunctionSummarizer(summarize)


@pytest.mark.guarantee("callbacks-async")
async def test_an_async_callback_awaits_ctx_acompact_with_an_async_summarizer() -> None:
    """An `async def on_compact` is awaited by acompact; `await ctx.acompact(range)` asks the
    compactor's async summarizer, and `summarize` may be an async function too."""
    original = history()
    session = session_with(original)
    summarizer = async_returning(SHORT)

    async def own(messages: list[Message]) -> str:
        return f"## Work done\n- {len(messages)} messages"

    async def callback(ctx: CompactionContext) -> None:
        await ctx.acompact(range(1, 7))
        await ctx.acompact((2, 8), own)

    comp = Compactor(ROOMY, counter=COUNTER, on_compact=callback, summarizer=summarizer)
    report = await comp.acompact(session)
    assert report.landed and report.reason == "callback"
    assert summarizer.calls == 1
    out = session.messages()
    assert "fix the bugs" in out[1].text and "6 messages" in out[2].text
    assert out[3:] == original[13:]
    assert [s.name for s in report.strategies] == ["callback"]


@pytest.mark.guarantee("callbacks-async")
async def test_a_plain_callback_runs_under_acompact_with_a_sync_summarizer() -> None:
    """A plain on_compact runs in a worker thread under acompact and may use the compactor's
    sync summarizer through ctx.compact."""
    session = session_with(history())
    summarizer = FunctionSummarizer.returning(SHORT)

    def callback(ctx: CompactionContext) -> None:
        ctx.compact(range(1, 7))

    comp = Compactor(ROOMY, counter=COUNTER, on_compact=callback, summarizer=summarizer)
    report = await comp.acompact(session)
    assert report.landed and summarizer.calls == 1


@pytest.mark.guarantee("callbacks-async")
async def test_a_plain_callback_that_needs_an_async_summarizer_is_told_to_be_async() -> None:
    """A plain on_compact asking an async-only summarizer for a summary gets a
    ConfigurationError that says to make the callback async; nothing is written."""
    session = session_with(history())
    seq = session.last_seq

    def callback(ctx: CompactionContext) -> None:
        ctx.compact(range(1, 7))

    comp = Compactor(ROOMY, counter=COUNTER, on_compact=callback, summarizer=async_returning(SHORT))
    with pytest.raises(ConfigurationError, match="async def on_compact"):
        await comp.acompact(session)
    assert session.last_seq == seq


@pytest.mark.guarantee("callbacks-async")
def test_an_async_callback_under_a_sync_compact_is_a_clear_error() -> None:
    """compact() cannot await an `async def on_compact`: it says to use acompact."""
    session = session_with(history())

    async def callback(ctx: CompactionContext) -> None:
        await ctx.acompact(range(1, 7))

    comp = Compactor(ROOMY, counter=COUNTER, on_compact=callback)
    with pytest.raises(ConfigurationError, match="acompact"):
        comp.compact(session)
    assert all(e.type != COMPACTION for e in session.events())


@pytest.mark.guarantee("auto-trigger-isolates-failures")
def test_a_failing_callback_is_isolated_in_the_trigger_and_raised_by_compact() -> None:
    """A callback that raises after compacting a range: the automatic trigger reports the
    failure and lands nothing, not even the range; compact() raises it."""
    session = session_with(history())
    seq = session.last_seq

    def callback(ctx: CompactionContext) -> None:
        ctx.compact((1, 7), summary_of("first turn"))
        raise LookupError("no such ticket")

    tight = Budget(window=1500, trigger=0.4, target=0.3, keep_recent_tokens=0)
    comp = Compactor(tight, counter=COUNTER, on_compact=callback)
    report = comp.maybe_compact(session)
    assert report is not None and report.outcome == "failed"
    assert report.error == "LookupError: no such ticket"
    assert session.last_seq == seq
    with pytest.raises(LookupError):
        comp.compact(session)
    assert session.last_seq == seq


def _app_error(ctx: CompactionContext) -> None:
    raise KeyError("ticket 42 is not loaded")


def _bad_range(ctx: CompactionContext) -> None:
    ctx.compact(range(7, 3), summary_of("backwards"))


def _summarizer_raises(ctx: CompactionContext) -> None:
    ctx.compact((1, 7))  # the compactor's own summarizer, which raises below


FAILURES = {
    "app-exception": (_app_error, KeyError, "ticket 42"),
    "bad-range": (_bad_range, InvalidInputError, "reversed"),
    "summarizer-raises": (_summarizer_raises, RuntimeError, "model is down"),
}


def failing_compactor(callback: Any, reports: list[CompactionReport]) -> Compactor:
    tight = Budget(window=1500, trigger=0.4, target=0.3, keep_recent_tokens=0)
    return Compactor(
        tight,
        summarizer=FunctionSummarizer.raising(RuntimeError("model is down")),
        counter=COUNTER,
        on_compact=callback,
        on_report=reports.append,
    )


@pytest.mark.parametrize("case", list(FAILURES))
@pytest.mark.guarantee("auto-trigger-isolates-failures")
def test_every_failure_inside_on_compact_is_isolated_by_maybe_compact(
    case: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An exception of the application's, a bad range, or the compactor's summarizer raising
    through `ctx.compact`: `maybe_compact` logs it, reports it as failed and lands nothing;
    a manual `compact()` raises it."""
    callback, error, text = FAILURES[case]
    session = session_with(history())
    seq = session.last_seq
    reports: list[CompactionReport] = []
    comp = failing_compactor(callback, reports)
    with caplog.at_level(logging.WARNING, logger="ctxfold"):
        report = comp.maybe_compact(session)
    assert report is not None and report.outcome == "failed"
    assert report.error is not None and text in report.error
    assert reports == [report]
    assert any(text in r.getMessage() for r in caplog.records)
    assert session.last_seq == seq
    with pytest.raises(error, match=text):
        comp.compact(session)
    assert session.last_seq == seq


@pytest.mark.parametrize("case", list(FAILURES))
@pytest.mark.guarantee("auto-trigger-isolates-failures")
async def test_every_failure_inside_on_compact_is_isolated_by_amaybe_compact(
    case: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The same three failures under `amaybe_compact`: logged, reported, nothing lands;
    `acompact()` raises them."""
    callback, error, text = FAILURES[case]
    session = session_with(history())
    seq = session.last_seq
    reports: list[CompactionReport] = []
    comp = failing_compactor(callback, reports)
    with caplog.at_level(logging.WARNING, logger="ctxfold"):
        report = await comp.amaybe_compact(session)
    assert report is not None and report.outcome == "failed"
    assert report.error is not None and text in report.error
    assert reports == [report]
    assert any(text in r.getMessage() for r in caplog.records)
    assert session.last_seq == seq
    with pytest.raises(error, match=text):
        await comp.acompact(session)
    assert session.last_seq == seq
