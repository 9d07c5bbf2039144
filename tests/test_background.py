"""Background compaction: summaries are written off the turn and land at the trigger at once.

The summarizers here are gates the test opens, so each test decides exactly when a background
run finishes; no test depends on timing. Marks for `BUDGET` with `FixedCounter` (a token a
word) and `POLICY`: soft point 1,679 tokens, trigger point 1,976, overshoot mark 2,488 (half the
reserve, so that a test can go past it and stay within the window); target 1,200.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from ctxfold.compactor import Background, CompactionReport, Compactor, Trim
from ctxfold.events import COMPACTION, MASK, NewEvent, Reset, Retraction
from ctxfold.messages import Message
from ctxfold.messages.validity import validate
from ctxfold.pipeline import ClearToolResults, Pipeline, Summarize
from ctxfold.session import Session
from ctxfold.storage import MemoryStore
from ctxfold.summarizers import SummaryRequest
from ctxfold.testing.counters import FixedCounter
from tests._histories import agent_history, step

COUNTER = FixedCounter()
BUDGET_WINDOW = 3000
SHORT = "## Objective\n- fix the bugs\n## Work done\n- read the modules"
SOFT, TRIGGER, OVERSHOOT = 1679, 1976, 2488
POLICY = Background(overshoot=0.5)


class Gate:
    """A summarizer that answers once the test opens it (or at once when `open`)."""

    def __init__(self, *, open: bool = False, raises: Exception | None = None) -> None:
        self.opened = threading.Event()
        if open:
            self.opened.set()
        self.entered = threading.Event()
        self.raises = raises
        self.calls = 0
        self.threads: list[str] = []

    def __call__(self, request: SummaryRequest) -> str:
        self.calls += 1
        self.threads.append(threading.current_thread().name)
        self.entered.set()
        assert self.opened.wait(10), "the test never opened the gate"
        if self.raises is not None:
            raise self.raises
        return SHORT


def compactor(summarizer: Any, **kwargs: Any) -> Compactor:
    from ctxfold.tokens import Budget

    # The user's words unprotected: the short old turns are summarized whole.
    budget = Budget(window=BUDGET_WINDOW, keep_recent_tokens=0, keep_user_tokens=0)
    kwargs.setdefault("background", POLICY)
    return Compactor(
        budget, Pipeline([Summarize()]), summarizer=summarizer, counter=COUNTER, **kwargs
    )


def started_session() -> Session:
    """A session between the soft point and the trigger point."""
    session = MemoryStore().session("bg", counter=COUNTER)
    session.append(agent_history(turns=3, output_words=200))
    return session


def background_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("ctxfold-background")]


def finish_runs() -> None:
    for thread in background_threads():
        thread.join(10)
        assert not thread.is_alive()


def errors(messages: Sequence[Message]) -> list[str]:
    return [str(p) for p in validate(messages) if p.severity == "error"]


def edits(session: Session) -> list[int]:
    return [e.seq for e in session.events() if e.type in (COMPACTION, MASK)]


def test_marks_follow_the_budget() -> None:
    """The soft point is a share of the trigger point (never under the target) and the
    overshoot mark a share of the reserve above it."""
    from ctxfold.tokens import Budget

    budget = Budget(window=BUDGET_WINDOW, keep_recent_tokens=0, keep_user_tokens=0)
    assert POLICY.marks(budget) == (SOFT, TRIGGER, OVERSHOOT)
    assert Background().marks(budget) == (SOFT, TRIGGER, BUDGET_WINDOW)  # the window
    assert Background(start=0.1, overshoot=0).marks(budget) == (1201, TRIGGER, TRIGGER)
    for bad in ({"start": 0}, {"start": 1.5}, {"overshoot": -0.1}, {"wait_s": -1}):
        with pytest.raises(ValueError):
            Background(**bad)  # type: ignore[arg-type]


@pytest.mark.guarantee("background-lands-by-the-same-rules")
def test_the_summary_is_written_off_the_turn_and_lands_at_the_trigger_at_once() -> None:
    """At the soft point a check starts a run in a thread and returns at once; messages that
    arrive while it works are kept; at the trigger the result lands without a summarizer call,
    the late messages verbatim after the summary, and the history is valid and within target."""
    gate = Gate()
    session = started_session()
    with compactor(gate) as c:
        assert c.maybe_compact(session) is None  # started in the background, nothing waited
        assert gate.entered.wait(10) and len(background_threads()) == 1
        late = step("late1", 250)
        session.append(late)
        assert c.estimate(session) >= TRIGGER
        assert c.maybe_compact(session) is None  # under the overshoot mark: the turn goes on
        gate.opened.set()
        finish_runs()
        calls = gate.calls
        report = c.maybe_compact(session)
    assert isinstance(report, CompactionReport) and report.landed and report.fits
    assert gate.calls == calls and all(t.startswith("ctxfold-background") for t in gate.threads)
    messages = session.messages()
    assert errors(messages) == []
    assert list(messages[-2:]) == late
    assert c.estimate(session) <= report.target + COUNTER.count_message(late[1]) + 20
    assert SHORT in "".join(m.text for m in messages)


@pytest.mark.guarantee("background-lands-by-the-same-rules")
@pytest.mark.parametrize("change", ["pin", "compaction", "retraction", "reset"])
def test_a_result_whose_history_changed_underneath_is_dropped_whole(change: str) -> None:
    """A pin, compaction, retraction or reset that lands while the run works makes its result
    stale: nothing of it is appended, the check reports "stale", and a new run starts. (A mask
    is rebased over: see tests/test_background_rebase.py.)"""
    gate = Gate()
    session = started_session()
    c = compactor(gate)
    try:
        c.maybe_compact(session)
        assert gate.entered.wait(10)
        items = session.items()
        if change == "pin":
            session.pin(items[2].id)
        elif change == "compaction":
            Compactor(None, Pipeline([Summarize()]), summarizer=lambda r: SHORT).compact(
                session, target=1000
            )
        elif change == "retraction":
            session.append(NewEvent.of(Retraction(items[-2].id)))  # the newest whole step
        else:
            session.append(NewEvent.of(Reset()))
        if change == "reset":
            session.append(agent_history(turns=3, output_words=200))
        for n in range(20):  # to the trigger point, short of the overshoot mark
            if c.estimate(session) >= TRIGGER:
                break
            session.append(step(f"late{n}", 100))
        assert TRIGGER <= c.estimate(session) < OVERSHOOT
        before = edits(session)
        gate.opened.set()
        finish_runs()
        gate.opened.clear()  # the next run waits, so it can be seen
        report = c.maybe_compact(session)
        assert report is not None and report.outcome == "stale" and not report.landed
        assert report.error and "landed while the run was planning" in report.error
        assert edits(session) == before
        assert errors(session.messages()) == []
        assert len(background_threads()) == 1  # planning again, in the background
    finally:
        gate.opened.set()
        c.close()
    if change == "pin":
        assert items[2].id in session.pinned


@pytest.mark.guarantee("background-failures-reported")
def test_a_failing_background_summarizer_is_reported_at_the_next_check(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The failure is returned by the next check, passed to `on_report` and logged; nothing
    lands and the turn goes on."""
    reports: list[CompactionReport] = []
    gate = Gate(open=True, raises=RuntimeError("the model is down"))
    session = started_session()
    with compactor(gate, on_report=reports.append) as c:
        c.maybe_compact(session)
        finish_runs()
        with caplog.at_level(logging.WARNING, logger="ctxfold.compactor"):
            report = c.maybe_compact(session)
    assert report is not None and report.outcome == "failed" and not report.landed
    assert "the model is down" in (report.error or "")
    assert reports == [report]
    assert "the model is down" in caplog.text
    assert edits(session) == []


class Broken:
    """A strategy of the application's own with a bug: it raises instead of proposing."""

    name = "broken"

    def run(self, view: object) -> Any:
        raise LookupError("strategy bug")


@pytest.mark.guarantee("background-failures-reported")
def test_anything_else_a_background_run_raises_is_reported_too() -> None:
    """A strategy that raises in the background thread: the next check reports the run as
    failed, naming the error."""
    from ctxfold.tokens import Budget

    budget = Budget(window=BUDGET_WINDOW, keep_recent_tokens=0, keep_user_tokens=0)
    session = started_session()
    with Compactor(budget, [Broken()], counter=COUNTER, background=POLICY) as c:
        c.maybe_compact(session)
        finish_runs()
        report = c.maybe_compact(session)
    assert report is not None and report.outcome == "failed"
    assert report.error == "the background run raised LookupError: strategy bug"
    assert report.session_id == "bg"


@pytest.mark.guarantee("background-bounded")
def test_past_the_overshoot_mark_the_turn_waits_for_the_run_and_lands_it() -> None:
    """A turn past the overshoot mark does not go out as it stands: it waits for the run in
    flight and lands its result."""
    gate = Gate()
    session = started_session()
    with compactor(gate) as c:
        c.maybe_compact(session)
        assert gate.entered.wait(10)
        session.append(step("big", 800))
        assert c.estimate(session) >= OVERSHOOT
        threading.Timer(0.05, gate.opened.set).start()
        report = c.maybe_compact(session)
        assert report is not None and report.landed
        assert c.estimate(session) < OVERSHOOT
    assert gate.calls and all(t.startswith("ctxfold-background") for t in gate.threads)
    assert errors(session.messages()) == []


def free_first(summarizer: Any, **kwargs: Any) -> Compactor:
    """A compactor whose ladder clears old tool output of 500 tokens or more before it
    summarizes: `started_session` has none, so its runs summarize."""
    c = compactor(summarizer, **kwargs)
    c.pipeline = Pipeline([ClearToolResults(min_tokens=500, keep_tail=False), Summarize()])
    return c


@pytest.mark.guarantee("background-bounded")
def test_past_the_overshoot_mark_the_free_rungs_land_in_the_turn_without_waiting() -> None:
    """With a run in flight and the request past the overshoot mark, the turn clears old tool
    output at once (no summarizer call, no wait) and goes on under the mark; listeners hear of
    what was cleared. The run then lands too, rebased over that mask."""
    gate = Gate()
    reports: list[CompactionReport] = []
    trims: list[Trim] = []
    session = started_session()
    with free_first(gate, on_report=reports.append, on_trim=trims.append) as c:
        c.maybe_compact(session)
        assert gate.entered.wait(10)
        session.append([*step("big", 800), *step("next", 50)])
        assert c.estimate(session) >= OVERSHOOT
        report = c.maybe_compact(session)  # the gate is shut: a wait would last the test out
        assert report is not None and report.landed and report.error is None
        assert not gate.opened.is_set() and gate.calls == 1
        assert c.estimate(session) < OVERSHOOT
        assert [session.events()[s - 1].type for s in edits(session)] == [MASK]
        assert trims and {t.strategy for t in trims} == {"clear_tool_results"}
        gate.opened.set()
        finish_runs()
        for n in range(20):  # to the soft point, where a finished run lands
            if c.estimate(session) >= SOFT:
                break
            session.append(step(f"late{n}", 50))
        assert c.estimate(session) < OVERSHOOT
        c.maybe_compact(session)
    assert [r.outcome for r in reports] == ["landed", "landed"]
    assert SHORT in "".join(m.text for m in session.messages())
    assert errors(session.messages()) == []


@pytest.mark.guarantee("background-bounded")
def test_async_checks_land_the_free_rungs_in_the_turn_too() -> None:
    """`amaybe_compact` runs the same check: past the overshoot mark, with the task in flight,
    the free rungs land without waiting for it."""

    async def main() -> tuple[Session, CompactionReport | None, bool, int]:
        gate = AsyncGate()
        session = started_session()
        async with free_first(gate) as c:
            await c.amaybe_compact(session)
            await asyncio.wait_for(gate.entered.wait(), 10)
            session.append([*step("big", 800), *step("next", 50)])
            report = await asyncio.wait_for(c.amaybe_compact(session), 10)
            return session, report, gate.opened.is_set(), c.estimate(session)

    session, report, opened, estimate = asyncio.run(main())
    assert report is not None and report.landed and not opened
    assert estimate < OVERSHOOT and errors(session.messages()) == []


@pytest.mark.guarantee("trim-reported")
def test_background_landings_tell_the_trim_listeners() -> None:
    """A result planned in the background tells `on_trim` what it took out once it lands,
    as a foreground run does."""
    trims: list[Trim] = []
    session = started_session()
    with compactor(Gate(open=True), on_trim=trims.append) as c:
        c.maybe_compact(session)
        finish_runs()
        session.append(step("late", 250))
        report = c.maybe_compact(session)
    assert report is not None and report.landed and report.error is None
    assert [t.seq for t in trims] == edits(session)


@pytest.mark.guarantee("background-bounded")
def test_a_run_that_does_not_finish_in_time_gives_way_to_the_foreground() -> None:
    """With `wait_s` spent and the run still working, the turn compacts in the foreground; the
    late result then lands as nothing: it is stale."""
    first = Gate()

    def summarizer(request: SummaryRequest) -> str:
        if threading.current_thread().name.startswith("ctxfold-background"):
            return first(request)
        return SHORT

    reports: list[CompactionReport] = []
    session = started_session()
    policy = Background(overshoot=0.5, wait_s=0.01)
    with compactor(summarizer, background=policy, on_report=reports.append) as c:
        c.maybe_compact(session)
        assert first.entered.wait(10)
        session.append(step("big", 800))
        report = c.maybe_compact(session)
        assert report is not None and report.landed and reports == [report]
        landed = edits(session)
        first.opened.set()
        finish_runs()
        session.append(step("more", 900))
        c.maybe_compact(session)
        assert [r.outcome for r in reports[1:2]] == ["stale"]
        assert edits(session)[: len(landed)] == landed
    assert errors(session.messages()) == []


@pytest.mark.guarantee("background-closes-cleanly")
def test_closing_leaves_no_thread_behind_and_drops_what_was_not_landed() -> None:
    """`close()` joins the thread in flight; nothing the run planned is appended, and later
    checks compact in the foreground."""
    baseline = threading.active_count()
    gate = Gate()
    session = started_session()
    c = compactor(gate)
    c.maybe_compact(session)
    assert gate.entered.wait(10)
    assert threading.active_count() == baseline + 1
    threading.Timer(0.05, gate.opened.set).start()
    c.close()
    assert threading.active_count() == baseline
    assert edits(session) == []
    session.append(step("late", 250))
    report = c.maybe_compact(session)
    assert report is not None and report.landed  # in the foreground now
    assert threading.active_count() == baseline
    c.close()  # twice is fine


@pytest.mark.guarantee("background-closes-cleanly")
def test_a_thread_ends_with_its_run_even_without_close() -> None:
    """A run's thread ends when the run ends; nothing lingers between runs."""
    baseline = threading.active_count()
    session = started_session()
    c = compactor(Gate(open=True))
    c.maybe_compact(session)
    finish_runs()
    assert threading.active_count() == baseline


# -- asyncio ---------------------------------------------------------------------------------
class AsyncGate:
    def __init__(self) -> None:
        self.opened = asyncio.Event()
        self.entered = asyncio.Event()
        self.calls = 0

    async def __call__(self, request: SummaryRequest) -> str:
        self.calls += 1
        self.entered.set()
        await self.opened.wait()
        return SHORT


def background_tasks() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if t.get_name().startswith("ctxfold-background")]


@pytest.mark.guarantee("background-lands-by-the-same-rules")
def test_async_runs_are_tasks_that_land_at_the_trigger() -> None:
    """`amaybe_compact` starts the run as an asyncio task and returns; at the trigger the
    finished result lands with no summarizer call."""

    async def main() -> tuple[Session, CompactionReport | None, int, int]:
        gate = AsyncGate()
        session = started_session()
        async with compactor(gate) as c:
            assert await c.amaybe_compact(session) is None
            await asyncio.wait_for(gate.entered.wait(), 10)
            assert len(background_tasks()) == 1 and background_threads() == []
            session.append(step("late", 250))
            gate.opened.set()
            await asyncio.gather(*background_tasks())
            calls = gate.calls
            report = await c.amaybe_compact(session)
        return session, report, calls, gate.calls

    session, report, calls, after = asyncio.run(main())
    assert report is not None and report.landed and calls == after == 1
    assert errors(session.messages()) == []


@pytest.mark.guarantee("background-closes-cleanly")
def test_aclose_cancels_the_task_in_flight() -> None:
    """Leaving ``async with`` cancels a run still waiting on its summarizer: no task is left and
    nothing is appended."""

    async def main() -> tuple[Session, int]:
        gate = AsyncGate()
        session = started_session()
        async with compactor(gate) as c:
            await c.amaybe_compact(session)
            await asyncio.wait_for(gate.entered.wait(), 10)
        return session, len(background_tasks())

    session, left = asyncio.run(main())
    assert left == 0 and edits(session) == []


@pytest.mark.guarantee("background-bounded")
def test_a_long_replay_stays_valid_and_under_the_overshoot_mark() -> None:
    """Whatever the runs' timing, every request of a long session is valid, and none is past
    the overshoot mark (by default the window) after its check."""
    from ctxfold.testing.transcripts import generate
    from ctxfold.tokens import Budget

    messages = generate(seed=5, steps=40)
    budget = Budget(window=6000)
    overshoot = Background().marks(budget)[2]
    session = MemoryStore().session("long", counter=COUNTER)
    landed = 0
    with Compactor(budget, counter=COUNTER, background=True) as c:
        for message in messages:
            if message.role == "assistant":
                report = c.maybe_compact(session)
                landed += bool(report and report.landed)
                assert errors(session.messages()) == []
                assert c.estimate(session) < overshoot
            session.append(message)
    assert landed >= 2
