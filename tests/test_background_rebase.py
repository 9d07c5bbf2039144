"""Background compaction keeps the turn from waiting: results land over masks, from the soft
point on, and a turn within the hard mark never waits.

Each test runs once with each of the compactor's two drivers: `maybe_compact` (its runs are
threads; the test calls it from a worker thread so that one coroutine can drive both) and
`amaybe_compact` (its runs are asyncio tasks). The summarizers are gates the test opens, so no
test depends on timing. Marks as in tests/test_background.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from ctxfold.compactor import Background, CompactionReport, Compactor, Trim
from ctxfold.events import COMPACTION, MASK, Mask, NewEvent
from ctxfold.messages import Message
from ctxfold.pipeline import ClearToolResults, Pipeline, Summarize
from ctxfold.session import Session
from ctxfold.storage import MemoryStore
from tests._histories import SYSTEM_PROMPT, agent_history, step
from tests.test_background import (
    COUNTER,
    OVERSHOOT,
    SHORT,
    SOFT,
    TRIGGER,
    Gate,
    background_tasks,
    compactor,
    edits,
    errors,
    finish_runs,
    started_session,
)

Check = Callable[[Compactor, Session], Awaitable[CompactionReport | None]]


async def sync_check(c: Compactor, session: Session) -> CompactionReport | None:
    return await asyncio.to_thread(c.maybe_compact, session)


async def async_check(c: Compactor, session: Session) -> CompactionReport | None:
    return await c.amaybe_compact(session)


DRIVERS: dict[str, Check] = {"sync": sync_check, "async": async_check}


async def settle() -> None:
    """Until every background run of the test has ended, thread or task."""
    await asyncio.to_thread(finish_runs)
    tasks = background_tasks()
    if tasks:
        await asyncio.wait(tasks, timeout=10)


async def entered(gate: Gate) -> None:
    assert await asyncio.to_thread(gate.entered.wait, 10), "no run reached the summarizer"


@pytest.mark.guarantee("background-lands-by-the-same-rules")
@pytest.mark.parametrize("where", ["kept", "covered"])
@pytest.mark.parametrize("driver", DRIVERS)
def test_a_mask_that_lands_while_the_run_works_is_rebased_over(driver: str, where: str) -> None:
    """Another writer's mask changes no item's id, role or call ids: the run's result still
    lands over it, with no new summarizer call. The masked item keeps the mask when the summary
    leaves it in view, and goes with the rest when the summary covers it."""
    check = DRIVERS[driver]

    async def main() -> tuple[Session, CompactionReport | None, int, int, int]:
        gate = Gate()
        session = started_session()
        async with compactor(gate) as c:
            assert await check(c, session) is None
            await entered(gate)
            tools = [i for i in session.items() if i.message.role == "tool"]
            target = tools[-1] if where == "kept" else tools[0]
            session.append(NewEvent(MASK, {"items": [{"id": target.id, "content": "[cleared]"}]}))
            session.append(step("late", 250))
            gate.opened.set()
            await settle()
            calls = gate.calls
            report = await check(c, session)
        return session, report, calls, gate.calls, target.id

    session, report, calls, after, masked = asyncio.run(main())
    assert report is not None and report.landed and report.outcome == "landed"
    assert calls == after == 1
    assert next(e.type for e in session.events() if e.type in (COMPACTION, MASK)) == MASK
    assert sum(e.type == MASK for e in session.events()) == 1  # the run planned none
    projected = {item.id: item.message.text for item in session.items()}
    if where == "kept":
        assert projected[masked] == "[cleared]"
    else:
        assert masked not in projected
    assert SHORT in "".join(m.text for m in session.messages())
    assert errors(session.messages()) == []


def mixed_session(store: MemoryStore) -> Session:
    """Between the soft point and the trigger point (1,938 tokens), with one old tool output of
    600 words: `clear_first` clears it, then summarizes."""
    session = store.session("bg", counter=COUNTER)
    session.append(
        [
            Message("system", SYSTEM_PROMPT),
            Message("user", "Task: read the big file"),
            *step("old", 600),
            Message("assistant", "Read it."),
            *agent_history(turns=2, output_words=200)[1:],
        ]
    )
    return session


def clear_first(summarizer: Any, **kwargs: Any) -> Compactor:
    c = compactor(summarizer, **kwargs)
    c.pipeline = Pipeline([ClearToolResults(min_tokens=500, keep_tail=False), Summarize()])
    return c


@pytest.mark.guarantee("background-lands-by-the-same-rules")
@pytest.mark.guarantee("trim-reported")
@pytest.mark.parametrize("driver", DRIVERS)
def test_the_run_lands_over_the_free_rungs_of_the_turn_and_masks_nothing_twice(
    driver: str,
) -> None:
    """Past the trigger with a run in flight, the turn clears old tool output at once. The run,
    which planned to clear the same output before it summarized, lands over that later: its
    summary lands, its own mask of that output is left out (the log masks it once, and the
    listeners hear of it once), and the token counts the log records agree with a fresh count of
    the same events."""
    check = DRIVERS[driver]
    store = MemoryStore()
    reports: list[CompactionReport] = []
    trims: list[Trim] = []

    async def main() -> Session:
        gate = Gate()
        session = mixed_session(store)
        async with clear_first(gate, on_report=reports.append, on_trim=trims.append) as c:
            assert SOFT <= c.estimate(session) < TRIGGER
            assert await check(c, session) is None
            await entered(gate)
            session.append([*step("big", 800), *step("next", 50)])
            assert c.estimate(session) >= OVERSHOOT
            report = await check(c, session)  # the gate is shut: a wait would last the test out
            assert report is not None and report.landed and not gate.opened.is_set()
            assert c.estimate(session) < SOFT
            gate.opened.set()
            await settle()
            for n in range(20):  # to the soft point, where the finished run lands
                if c.estimate(session) >= SOFT:
                    break
                session.append(step(f"late{n}", 50))
            report = await check(c, session)
            assert report is not None and report.landed
            assert c.estimate(session) == c.estimate(store.session("bg", counter=COUNTER))
        return session

    session = asyncio.run(main())
    assert [r.outcome for r in reports] == ["landed", "landed"]
    turn, run = reports
    assert [s.name for s in turn.strategies] == ["clear_tool_results"]
    assert [e.type for e in run.events] == [COMPACTION] * len(run.events)
    old = next(i.id for i in mixed_session(MemoryStore()).items() if i.message.role == "tool")
    masks = [Mask.from_data(e.data) for e in session.events() if e.type == MASK]
    assert sum(item.id == old for mask in masks for item in mask.items) == 1
    assert [t.seq for t in trims] == edits(session)
    assert [t.kind for t in trims].count("mask") == 1 and trims[0].kind == "mask"
    assert SHORT in "".join(m.text for m in session.messages())
    assert errors(session.messages()) == []


@pytest.mark.guarantee("background-bounded")
@pytest.mark.parametrize("driver", DRIVERS)
def test_within_the_hard_mark_the_turn_never_waits(driver: str) -> None:
    """By default the hard mark is the window: past the trigger, and past half the reserve, a
    request still within the window goes out at once while the run works (here `wait_s=0` and a
    shut gate: a turn that did not go on would compact in the foreground and block on it); the
    result lands at a later check."""
    check = DRIVERS[driver]

    async def main() -> tuple[Session, CompactionReport | None, CompactionReport | None]:
        gate = Gate()
        session = started_session()
        async with compactor(gate, background=Background(wait_s=0)) as c:
            assert await check(c, session) is None
            await entered(gate)
            session.append(step("big", 800))
            assert OVERSHOOT <= c.estimate(session) < c.budget.window  # type: ignore[union-attr]
            during = await check(c, session)
            assert not gate.opened.is_set() and gate.calls == 1 and edits(session) == []
            gate.opened.set()
            await settle()
            after = await check(c, session)
        return session, during, after

    session, during, after = asyncio.run(main())
    assert during is None
    assert after is not None and after.landed
    assert errors(session.messages()) == []


@pytest.mark.guarantee("background-lands-by-the-same-rules")
@pytest.mark.parametrize("driver", DRIVERS)
def test_a_finished_result_lands_from_the_soft_point_on(driver: str) -> None:
    """A run that finished lands at the next check past the soft point, trigger or not, so the
    room it makes is there before a big step arrives."""
    check = DRIVERS[driver]

    async def main() -> tuple[int, CompactionReport | None]:
        session = started_session()
        async with compactor(Gate(open=True)) as c:
            assert await check(c, session) is None
            await settle()
            estimate = c.estimate(session)
            return estimate, await check(c, session)

    estimate, report = asyncio.run(main())
    assert SOFT <= estimate < TRIGGER
    assert report is not None and report.landed


@pytest.mark.guarantee("background-lands-by-the-same-rules")
def test_left_out_masks_keep_the_later_edits_pointing_at_the_items_the_run_made() -> None:
    """A run numbers the items it makes by the place of each edit; when its mask is left out
    (another writer masked the same output first), a later edit that names an item the run made
    (a summary of its own summary) still names that item, and the landing is valid."""
    from ctxfold.compactor.drivers import Edge, run_sync
    from ctxfold.compactor.landing import landing_of
    from ctxfold.compactor.run import Planned
    from ctxfold.events import Compaction, MaskedItem
    from ctxfold.pipeline.accounting import Accounts
    from ctxfold.pipeline.view import Applied
    from ctxfold.session import Item

    session = started_session()
    items = session.items()
    base = session.last_seq
    turn = items[1:7]  # the first whole turn: its user message to its closing answer
    tool = items[9]
    assert [i.message.role for i in (turn[0], turn[-1], tool)] == ["user", "assistant", "tool"]
    first = Item(base + 2, Message("user", "S1"), "summary", turn[0].key)
    second = Item(base + 3, Message("user", "S2"), "summary", turn[0].key)
    masked = Item(tool.id, tool.message.replace(content="[c]"), key=tool.key)
    planned = Planned(
        edits=(
            Mask((MaskedItem(tool.id, "[c]", 1),), strategy="clear_tool_results", tokens_saved=9),
            Compaction(
                turn[0].id,
                turn[-1].id,
                Message("user", "S1"),
                "summary",
                replaced=tuple(i.id for i in turn),
            ),
            Compaction(base + 2, base + 2, Message("user", "S2"), "summary", replaced=(base + 2,)),
        ),
        base_seq=base,
        session_id=session.id,
        reason="threshold",
        tokens_before=2000,
        tokens_after=1000,
        target=1200,
        pinned_tokens=0,
        effects=(),
        accounts=Accounts(),
        failed=False,
        changes=(
            Applied((tool,), (masked,), 10, 1, counts=((10, 1),)),
            Applied(tuple(turn), (first,), 600, 1, "S1"),
            Applied((first,), (second,), 1, 1, "S2"),
        ),
    )
    session.append(NewEvent(MASK, {"items": [{"id": tool.id, "content": "[cleared]"}]}))
    session.append(step("late", 20))
    report = run_sync(landing_of(planned, 0.0), Edge(lambda r: SHORT, COUNTER), session)
    assert report.landed and [e.type for e in report.events] == [COMPACTION, COMPACTION]
    again = Compaction.from_data(report.events[1].data)
    assert again.replaced == (report.events[0].seq,)
    texts = [m.text for m in session.messages()]
    assert "S2" in texts and "S1" not in texts and "[cleared]" in texts
    assert errors(session.messages()) == []


@pytest.mark.guarantee("run-reported")
@pytest.mark.parametrize("driver", DRIVERS)
def test_free_rungs_that_find_nothing_to_clear_tell_no_listener(driver: str) -> None:
    """Past the trigger, with a run in flight, each turn tries the free rungs; a turn where they
    find nothing to clear is no compaction run: `on_start` and `on_report` hear nothing of it,
    and the check returns None. The background run itself starts once and ends once."""
    check = DRIVERS[driver]
    starts: list[object] = []
    reports: list[CompactionReport] = []

    async def main() -> list[CompactionReport | None]:
        gate = Gate()
        session = started_session()  # no tool output of 500 tokens or more
        answers = []
        async with clear_first(gate, on_start=starts.append, on_report=reports.append) as c:
            answers.append(await check(c, session))
            await entered(gate)
            for n, words in enumerate([250, 150]):
                session.append(step(f"mid{n}", words))
                assert TRIGGER <= c.estimate(session) < OVERSHOOT
                answers.append(await check(c, session))
            assert len(starts) == 1 and reports == []
            gate.opened.set()
            await settle()
            answers.append(await check(c, session))
        return answers

    answers = asyncio.run(main())
    assert answers[:3] == [None, None, None]
    assert len(reports) == 1 and reports[0].landed and answers[3] == reports[0]
