"""The async entry points: acompact, amaybe_compact and acompact_messages run the same engine
as the sync ones, await async summarizers, and never block the event loop."""

from __future__ import annotations

import asyncio
import re
import threading

import pytest

from ctxfold.compactor import Compactor, acompact_messages
from ctxfold.errors import SummarizerError
from ctxfold.events import COMPACTION
from ctxfold.messages import Message
from ctxfold.messages.validity import validate
from ctxfold.pipeline import Pipeline, Summarize, WorkingView
from ctxfold.pipeline.strategy import Flow
from ctxfold.session import AsyncSession, Session
from ctxfold.storage import MemoryStore
from ctxfold.summarizers import SummaryRequest
from ctxfold.testing.counters import FixedCounter
from ctxfold.testing.doubles import FunctionSummarizer
from ctxfold.tokens import Budget
from tests._histories import agent_history as history

COUNTER = FixedCounter()
SHORT = "## Objective\n- fix the bugs\n## Work done\n- read the modules"
BUDGET = Budget(window=3000, keep_recent_tokens=0)
"""Trigger at 2,000 tokens, target 1,200."""


def session_with(messages: list[Message], store: MemoryStore | None = None) -> Session:
    session = (store or MemoryStore()).session("s")
    session.append(messages)
    return session


def async_summarizer(answer: str | None = SHORT, delay: float = 0.0) -> FunctionSummarizer:
    async def summarize(request: SummaryRequest) -> str | None:
        await asyncio.sleep(delay)
        return answer

    return FunctionSummarizer(summarize)


def compactor(summarizer: object) -> Compactor:
    return Compactor(
        BUDGET, pipeline=Pipeline([Summarize()]), summarizer=summarizer, counter=COUNTER
    )


async def test_acompact_awaits_an_async_summarizer_without_blocking_the_loop() -> None:
    """acompact awaits an async summarizer; other tasks keep running meanwhile, and the summary
    lands as it would from compact()."""
    session = session_with(history())
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            ticks += 1

    task = asyncio.create_task(ticker())
    summarizer = async_summarizer(delay=0.1)
    report = await compactor(summarizer).acompact(AsyncSession(session))
    task.cancel()
    assert report is not None and report.landed and report.reason == "manual"
    assert summarizer.calls >= 1
    assert ticks >= 5
    assert any(item.kind == "summary" for item in session.items())
    assert [p for p in validate(session.messages()) if p.severity == "error"] == []


@pytest.mark.guarantee("under-target-no-op")
async def test_amaybe_compact_under_trigger_does_nothing() -> None:
    """amaybe_compact below the trigger returns None and never calls the summarizer
    (`under-target-no-op`)."""
    session = session_with(history()[:8])
    summarizer = async_summarizer()
    assert await compactor(summarizer).amaybe_compact(session) is None
    assert summarizer.calls == 0


async def test_amaybe_compact_over_trigger_compacts_an_async_session() -> None:
    """Over the trigger, amaybe_compact compacts an AsyncSession and reports the threshold."""
    session = session_with(history())
    report = await compactor(async_summarizer()).amaybe_compact(AsyncSession(session))
    assert report is not None and report.landed and report.reason == "threshold"
    assert report.fits


@pytest.mark.parametrize("answer", [None, "", "  \n"])
@pytest.mark.guarantee("decline-writes-nothing")
async def test_async_decline_appends_nothing(answer: str | None) -> None:
    """An async summarizer that declines: amaybe_compact appends nothing and acompact reports
    the decline (`decline-writes-nothing`)."""
    session = session_with(history())
    seq = session.last_seq
    comp = compactor(async_summarizer(answer))
    report = await comp.amaybe_compact(session)
    assert report is not None and not report.landed
    assert (await comp.acompact(session)).outcome == "declined"
    assert session.last_seq == seq


@pytest.mark.guarantee("auto-trigger-isolates-failures")
async def test_async_failures_are_isolated_in_amaybe_compact_and_raised_by_acompact() -> None:
    """An async summarizer that raises: amaybe_compact reports the error and appends nothing;
    acompact raises it (`auto-trigger-isolates-failures`)."""

    async def fail(request: SummaryRequest) -> str:
        raise ConnectionError("api down")

    session = session_with(history())
    seq = session.last_seq
    comp = compactor(FunctionSummarizer(fail))
    report = await comp.amaybe_compact(session)
    assert report is not None and report.error is not None and "api down" in report.error
    with pytest.raises(ConnectionError, match="api down"):
        await comp.acompact(session)
    assert session.last_seq == seq


@pytest.mark.guarantee("late-messages-stay-verbatim")
async def test_message_appended_while_an_async_summarizer_awaits_projects_after_it() -> None:
    """A message appended while an async summarizer is awaited is not covered by the summary and
    projects after it, verbatim (`late-messages-stay-verbatim`)."""
    store = MemoryStore()
    session = session_with(history(), store)
    other = AsyncSession(store.session("s"))
    late = Message("user", "Please also update CHANGELOG.md.")
    late_seqs: list[int] = []

    async def summarize(request: SummaryRequest) -> str:
        if not late_seqs:
            (event,) = await other.append(late)
            late_seqs.append(event.seq)
        return SHORT

    report = await compactor(FunctionSummarizer(summarize)).acompact(session)
    assert report is not None and report.landed
    assert session.messages()[-1] == late
    for event in session.events():
        if event.type == COMPACTION:
            assert late_seqs[0] not in event.data["replaced"]


def test_a_sync_compact_with_an_async_summarizer_says_to_use_acompact() -> None:
    """compact() with an async summarizer raises a SummarizerError pointing at the async
    methods, and appends nothing; the automatic trigger reports it instead."""
    session = session_with(history())
    seq = session.last_seq
    comp = compactor(async_summarizer())
    with pytest.raises(SummarizerError, match="acompact"):
        comp.compact(session)
    report = comp.maybe_compact(session)
    assert report is not None and report.error is not None and "acompact" in report.error
    assert session.last_seq == seq


async def test_acompact_runs_a_sync_summarizer_too() -> None:
    """acompact accepts a plain sync summarizer as well."""
    session = session_with(history())
    summarizer = FunctionSummarizer.returning(SHORT)
    report = await compactor(summarizer).acompact(session)
    assert report is not None and report.landed and summarizer.calls >= 1


async def test_acompact_messages_matches_compact_messages_for_async_summarizers() -> None:
    """acompact_messages returns a valid compacted list within the target."""
    messages = history()
    out = await acompact_messages(
        messages,
        BUDGET,
        pipeline=Pipeline([Summarize()]),
        summarizer=async_summarizer(),
        counter=COUNTER,
    )
    assert out.report.fits and out.report.landed
    assert out.messages[0] == messages[0]
    assert len(out.messages) < len(messages)
    assert [p for p in validate(out.messages) if p.severity == "error"] == []


@pytest.mark.guarantee("pins-respected")
async def test_a_pin_made_while_an_async_summarizer_awaits_is_respected() -> None:
    """A pin that lands while an async summarizer is awaited makes acompact plan again: no
    compaction covers the pinned item."""
    store = MemoryStore()
    session = session_with(history(), store)
    other = AsyncSession(store.session("s"))
    pinned: list[int] = []

    async def summarize(request: SummaryRequest) -> str:
        if not pinned:
            await other.pin(2)
            pinned.append(2)
        return SHORT

    summarizer = FunctionSummarizer(summarize)
    await compactor(summarizer).acompact(session)
    assert summarizer.calls >= 2
    assert 2 in [item.id for item in session.items()]
    for event in session.events():
        if event.type == COMPACTION:
            assert 2 not in event.data["replaced"]


async def test_acompact_plans_off_the_loop_thread() -> None:
    """Planning can take long (thousands of messages), so acompact resumes the run in a worker
    thread: the strategies never run on the event loop's own thread, which goes on serving
    other tasks meanwhile."""
    session = session_with(history())
    loop_thread = threading.get_ident()
    seen: set[int] = set()

    class Watched:
        name = "watched"

        def run(self, view: WorkingView) -> Flow:
            seen.add(threading.get_ident())
            return (yield from Summarize().run(view))

    comp = Compactor(
        BUDGET, pipeline=Pipeline([Watched()]), summarizer=async_summarizer(), counter=COUNTER
    )
    report = await comp.acompact(session)
    assert report.landed
    assert seen and loop_thread not in seen


@pytest.mark.parametrize(
    ("call", "instead"),
    [
        ("maybe_compact", "await compactor.amaybe_compact(session)"),
        ("compact", "await compactor.acompact(session)"),
        ("recover_from_overflow", "await compactor.arecover_from_overflow(session)"),
        ("estimate", "compactor.estimate(session.sync)"),
        ("should_compact", "compactor.should_compact(session.sync)"),
    ],
)
def test_a_blocking_call_given_an_async_session_names_the_call_to_make(
    call: str, instead: str
) -> None:
    """The blocking entry points refuse an AsyncSession with a ConfigurationError that names
    what to call instead, not an AttributeError from deep inside; a list of messages is
    pointed to compact_messages. Nothing is appended."""
    from ctxfold.errors import ConfigurationError, InvalidInputError

    compactor = Compactor(Budget(window=4_000))
    session = AsyncSession(MemoryStore().session("s"))
    with pytest.raises(ConfigurationError, match=re.escape(instead)):
        getattr(compactor, call)(session)
    with pytest.raises(InvalidInputError, match="compact_messages"):
        getattr(compactor, call)(history())
    assert session.sync.last_seq == 0
