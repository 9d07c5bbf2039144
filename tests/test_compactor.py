"""The Compactor over real sessions: triggers, declines, failures, concurrent writers, budgets,
redaction, fallback, tool schemas and the usage anchor."""

from __future__ import annotations

import logging
import multiprocessing
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ctxfold.compactor import CompactionReport, Compactor
from ctxfold.compactor.landing import MAX_APPENDS
from ctxfold.errors import BudgetError, CtxfoldError
from ctxfold.events import COMPACTION, MESSAGE, Event, NewEvent
from ctxfold.messages import Message
from ctxfold.messages.validity import validate
from ctxfold.pipeline import Pipeline, Summarize
from ctxfold.session import Session
from ctxfold.storage import MemoryStore, SQLiteStore
from ctxfold.summarizers import FallbackSummarizer, SummaryRequest, redact_secrets
from ctxfold.testing.counters import FixedCounter
from ctxfold.testing.doubles import FunctionSummarizer
from ctxfold.tokens import Budget
from tests._histories import agent_history as history
from tests._histories import words

SPAWN = multiprocessing.get_context("spawn")
COUNTER = FixedCounter()
SHORT = "## Objective\n- fix the bugs\n## Work done\n- read the modules"
BUDGET = Budget(window=3000, keep_recent_tokens=0)
"""Trigger at 2,000 tokens (window less a third), target 1,200."""


def session_with(messages: Sequence[Message], store: Any = None, name: str = "s") -> Session:
    session: Session = (store or MemoryStore()).session(name)
    session.append(list(messages))
    return session


def compactor(summarizer: Any = None, **kwargs: Any) -> Compactor:
    kwargs.setdefault("pipeline", Pipeline([Summarize()]))
    return Compactor(kwargs.pop("budget", BUDGET), summarizer=summarizer, counter=COUNTER, **kwargs)


def errors(messages: Sequence[Message]) -> list[str]:
    return [str(p) for p in validate(messages) if p.severity == "error"]


def compactions(session: Session) -> list[Event]:
    return [e for e in session.events() if e.type == COMPACTION]


# -- a decline -------------------------------------------------------------------------------------
@pytest.mark.parametrize("answer", [None, "", "   \n\t "])
@pytest.mark.guarantee("decline-writes-nothing")
def test_a_declining_summarizer_appends_nothing_and_is_asked_again_next_time(
    answer: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    """None, "" or whitespace is a decline: nothing is appended, a warning is logged, the next
    trigger asks again, and a manual compact() reports the decline."""
    session = session_with(history())
    summarizer = FunctionSummarizer.returning(answer)
    comp = compactor(summarizer)
    seq = session.last_seq
    with caplog.at_level(logging.WARNING, logger="ctxfold"):
        report = comp.maybe_compact(session)
    assert report is not None and not report.landed and report.outcome == "declined"
    assert session.last_seq == seq
    assert any("declined" in r.getMessage() for r in caplog.records)
    calls = summarizer.calls
    assert calls >= 1
    assert comp.maybe_compact(session) is not None
    assert summarizer.calls > calls  # the next trigger tried again
    manual = comp.compact(session)
    assert (manual.landed, manual.outcome, manual.error) == (False, "declined", None)
    assert session.last_seq == seq


# -- messages that arrive while a summarizer runs --------------------------------------------------
@pytest.mark.guarantee("late-messages-stay-verbatim")
def test_messages_appended_during_summary_stay_verbatim_after_it() -> None:
    """A message another writer appends while the summarizer runs is not covered by the
    summary: the compaction still lands, and the message projects after it, verbatim."""
    store = MemoryStore()
    session = session_with(history(), store)
    other = store.session("s")  # another Session object on the same log
    late = Message("user", "Also check docs/index.md while you are at it.")
    arrived: list[int] = []

    def summarize_while_user_types(request: SummaryRequest) -> str:
        if not arrived:
            (event,) = other.append(late)
            arrived.append(event.seq)
        return SHORT

    report = compactor(FunctionSummarizer(summarize_while_user_types)).compact(session)
    assert report is not None and report.landed
    (late_seq,) = arrived
    projected = session.messages()
    assert projected[-1] == late
    summary_at = next(i for i, item in enumerate(session.items()) if item.kind == "summary")
    assert summary_at < len(projected) - 1
    for event in compactions(session):
        assert late_seq not in event.data["replaced"]
        assert event.data["covers"][1] < late_seq
        assert event.seq > late_seq  # it landed after the late message, rebased
    assert errors(projected) == []


# -- two compactors at once ------------------------------------------------------------------------
def check_nothing_lost(session: Session, originals: Sequence[Message]) -> None:
    """Every original is still logged, no item was replaced twice, the projection is valid, and
    each original appears in it at most once."""
    events = session.events()
    logged = [e.message for e in events if e.type == MESSAGE]
    assert logged == list(originals)
    replaced = [i for e in events if e.type == COMPACTION for i in e.data["replaced"]]
    assert len(replaced) == len(set(replaced))
    projected = session.messages()
    assert errors(projected) == []
    for message in projected:
        if message in originals:
            assert projected.count(message) <= originals.count(message)


def meeting_summarizer(barrier: Any) -> FunctionSummarizer:
    """Answers SHORT, but its first call in each thread waits for the other compactor's."""
    local = threading.local()

    def meet(request: SummaryRequest) -> str:
        if not getattr(local, "met", False):
            local.met = True
            barrier.wait()
        return SHORT

    return FunctionSummarizer(meet)


@pytest.mark.parametrize("store_kind", ["memory", "sqlite"])
@pytest.mark.guarantee("one-compaction-wins")
def test_two_compactors_in_threads_land_at_most_one_overlapping_compaction(
    store_kind: str, tmp_path: Path
) -> None:
    """Two compactors planning against the same history at once (a barrier holds both inside
    the summarizer): at most one compaction of an overlapping range lands, the other re-plans or
    declines, and nothing is lost or duplicated."""
    store = MemoryStore() if store_kind == "memory" else SQLiteStore(tmp_path / "log.db")
    originals = history()
    session_with(originals, store)
    barrier = threading.Barrier(2, timeout=20)
    summarizer = meeting_summarizer(barrier)
    reports: list[CompactionReport] = []
    failures: list[BaseException] = []

    def work() -> None:
        try:
            reports.append(compactor(summarizer).compact(store.session("s")))
        except BaseException as exc:  # collected: a thread's exception must fail the test
            failures.append(exc)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []
    assert len(reports) == 2
    landed = [r for r in reports if r.landed]
    assert len(landed) >= 1
    assert all(r.outcome != "failed" for r in reports)
    session = store.session("s")
    check_nothing_lost(session, originals)
    store.close()


def _compact_in_process(path: str, barrier: Any, results: Any) -> None:
    store = SQLiteStore(path)
    try:
        session = store.session("s")
        report = compactor(meeting_summarizer(barrier)).compact(session)
        results.put((report.outcome, None))
    except Exception as exc:  # reported to the parent, which fails the test with it
        results.put(("error", repr(exc)))
    finally:
        store.close()


@pytest.mark.guarantee("one-compaction-wins")
def test_two_compactors_in_processes_on_one_sqlite_file(tmp_path: Path) -> None:
    """Two processes compacting the same SQLite session at once: at most one compaction of an
    overlapping range lands, and every original message is still in the log."""
    path = str(tmp_path / "log.db")
    originals = history()
    with SQLiteStore(path) as store:
        session_with(originals, store)
    barrier = SPAWN.Barrier(2, timeout=60)
    results = SPAWN.Queue()
    processes = [
        SPAWN.Process(target=_compact_in_process, args=(path, barrier, results)) for _ in range(2)
    ]
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=60)
    assert [p.exitcode for p in processes] == [0, 0]
    assert [o for o in outcomes if o[0] == "error"] == []
    assert any(o[0] == "landed" for o in outcomes)
    with SQLiteStore(path) as store:
        check_nothing_lost(store.session("s"), originals)


# -- empty sessions and failing summarizers --------------------------------------------------------
@pytest.mark.guarantee("empty-session-refused")
def test_manual_compact_of_an_empty_session_raises_automatic_does_nothing() -> None:
    """compact() on a session with no messages raises a clear CtxfoldError; maybe_compact()
    returns None and writes nothing."""
    session = MemoryStore().session("empty")
    comp = compactor(FunctionSummarizer.returning(SHORT))
    assert comp.maybe_compact(session) is None
    with pytest.raises(CtxfoldError, match="no messages to compact"):
        comp.compact(session)
    assert session.events() == []


@pytest.mark.guarantee("auto-trigger-isolates-failures")
def test_raising_summarizer_is_isolated_in_the_automatic_trigger() -> None:
    """A summarizer that raises inside maybe_compact() does not break the turn: the report
    carries the error and nothing is appended."""
    session = session_with(history())
    seq = session.last_seq
    report = compactor(FunctionSummarizer.raising(ConnectionError("api down"))).maybe_compact(
        session
    )
    assert report is not None
    assert report.error is not None and "ConnectionError: api down" in report.error
    assert not report.landed
    assert session.last_seq == seq


@pytest.mark.guarantee("auto-trigger-isolates-failures")
def test_manual_compact_raises_the_summarizers_exception() -> None:
    """compact() raises what the summarizer raised, and appends nothing."""
    session = session_with(history())
    seq = session.last_seq
    with pytest.raises(ConnectionError, match="api down"):
        compactor(FunctionSummarizer.raising(ConnectionError("api down"))).compact(session)
    assert session.last_seq == seq


# -- budgets ---------------------------------------------------------------------------------------
@pytest.mark.guarantee("budget-live-and-validated")
def test_budget_changes_take_effect_at_the_next_check() -> None:
    """Raising or lowering the budget of a live compactor changes the very next check; no budget
    turns the automatic trigger off."""
    session = session_with(history())
    comp = compactor(FunctionSummarizer.returning(SHORT))
    assert comp.should_compact(session)
    comp.budget = Budget(window=100_000)
    assert not comp.should_compact(session)
    assert comp.maybe_compact(session) is None
    comp.budget = BUDGET
    assert comp.should_compact(session)
    comp.budget = None
    assert not comp.should_compact(session)
    assert comp.maybe_compact(session) is None
    with pytest.raises(BudgetError, match="no budget"):
        comp.compact(session)
    assert comp.compact(session, target=1200).landed  # an explicit target still works


@pytest.mark.parametrize("window", [0, -1, -128_000])
@pytest.mark.guarantee("budget-live-and-validated")
def test_zero_or_negative_window_is_an_error_not_off(window: int) -> None:
    """A window of zero or less is refused with a BudgetError (a ValueError) naming the value."""
    with pytest.raises(BudgetError, match=str(window)):
        Budget(window=window)
    with pytest.raises(ValueError):
        Budget(window=window)


@pytest.mark.guarantee("min-messages")
def test_sessions_under_min_messages_are_never_compacted() -> None:
    """A session over the trigger with fewer than min_messages messages is left alone; one more
    message makes it eligible."""
    big = [
        Message("system", "You are terse."),
        Message("user", words(900, "a")),
        Message("assistant", words(900, "b")),
        Message("user", words(900, "c")),
    ]
    session = session_with(big)
    comp = compactor(
        FunctionSummarizer.returning(SHORT), budget=Budget(window=3000, min_messages=5)
    )
    assert comp.estimate(session) > BUDGET.trigger_tokens
    assert not comp.should_compact(session)
    assert comp.maybe_compact(session) is None
    session.append(Message("assistant", "ok"))
    assert comp.should_compact(session)


# -- redaction -------------------------------------------------------------------------------------
SECRET = "sk-proj-abcdefghijklmnopqrstuvwx0123"


@pytest.mark.guarantee("summaries-redacted")
def test_redactor_runs_on_every_summary_before_it_is_stored() -> None:
    """A summary that quotes a secret is stored redacted: the log and the projection hold the
    redacted text, never the secret."""
    session = session_with(history())
    leaky = FunctionSummarizer.returning(f"{SHORT}\n- used key {SECRET} to call the API")
    report = compactor(leaky, redact=redact_secrets).compact(session)
    assert report is not None and report.landed
    stored = compactions(session)
    assert stored
    for event in stored:
        text = event.message.text
        assert SECRET not in text
        assert "[redacted]" in text
    assert all(SECRET not in m.text for m in session.messages())


@pytest.mark.guarantee("summaries-redacted")
def test_identifier_check_cannot_put_a_redacted_secret_back() -> None:
    """With the default extractive summarizer and a secret in the history, the identifier check
    runs before the redactor, so the stored summary still holds no secret."""
    messages = history()
    messages[1] = Message("user", f"Task 0: export OPENAI_API_KEY={SECRET} and fix src/mod0.py")
    session = session_with(messages)
    report = Compactor(BUDGET, counter=COUNTER, redact=redact_secrets).compact(session, target=300)
    assert report is not None and report.landed
    for event in compactions(session):
        assert SECRET not in event.message.text


# -- fallback --------------------------------------------------------------------------------------
@pytest.mark.guarantee("summarizer-fallback")
def test_failing_llm_summarizer_falls_back_to_the_extractive_one() -> None:
    """With FallbackSummarizer, a primary that raises is replaced by the extractive summarizer:
    the compaction lands and the report says it fell back."""
    session = session_with(history())
    broken = FunctionSummarizer.raising(TimeoutError("model timed out"))
    report = compactor(FallbackSummarizer(broken)).maybe_compact(session)
    assert report is not None and report.landed and report.error is None
    assert broken.calls >= 1
    assert any("TimeoutError" in note and "Extractive" in note for note in report.notes)
    summary = compactions(session)[0].message.text
    assert "## Objective" in summary


# -- what the estimate counts ----------------------------------------------------------------------
@pytest.mark.guarantee("tool-schemas-counted")
def test_tool_schemas_count_against_the_budget() -> None:
    """Tool schemas passed as tools= are part of the estimate, so they can tip a session over the
    trigger, and the compaction report counts them."""
    messages = history(turns=3)
    session = session_with(messages)
    plain = compactor(FunctionSummarizer.returning(SHORT))
    below = plain.estimate(session)
    assert below < BUDGET.trigger_tokens and not plain.should_compact(session)
    schema = {"type": "function", "function": {"name": "bash", "parameters": {}}}
    needed = (BUDGET.trigger_tokens - below) // COUNTER.per_tool + 1
    tooled = compactor(FunctionSummarizer.returning(SHORT), tools=[schema] * needed)
    assert tooled.estimate(session) == below + needed * COUNTER.per_tool
    assert tooled.should_compact(session)
    report = tooled.maybe_compact(session)
    assert report is not None
    assert report.tokens_before == below + needed * COUNTER.per_tool


@pytest.mark.guarantee("usage-anchor-dropped-after-edit")
def test_usage_anchor_is_dropped_after_a_compaction() -> None:
    """After a compaction the provider's reported figure no longer describes the history: the
    tally is unanchored and the estimate is a fresh count."""
    session = session_with(history())
    comp = compactor(FunctionSummarizer.returning(SHORT))
    session.record_usage(2500)
    assert session.tally(COUNTER).anchored
    assert comp.estimate(session) == 2500
    assert comp.compact(session).landed
    tally = session.tally(COUNTER)
    assert not tally.anchored
    fresh = sum(COUNTER.count_message(m) for m in session.messages())
    assert comp.estimate(session) == tally.total
    assert fresh < tally.total <= fresh + 3  # the count of what is there now (plus reply priming)


# -- what lands while a summarizer runs ------------------------------------------------------------
def interrupting(act: Any) -> FunctionSummarizer:
    """Answers SHORT; before its first answer, `act()` writes to the session as another writer."""
    done: list[bool] = []

    def summarize(request: SummaryRequest) -> str:
        if not done:
            done.append(True)
            act()
        return SHORT

    return FunctionSummarizer(summarize)


@pytest.mark.guarantee("pins-respected")
def test_a_pin_made_while_the_summarizer_runs_is_respected() -> None:
    """The application pins the oldest task while its summary is being written: the run plans
    again from the pinned history, and no compaction covers the pinned item."""
    store = MemoryStore()
    session = session_with(history(), store)
    other = store.session("s")
    summarizer = interrupting(lambda: other.pin(2))
    report = compactor(summarizer).compact(session)
    assert summarizer.calls >= 2  # the first plan was dropped and the history planned again
    assert 2 in [item.id for item in session.items()]
    assert session.pinned == frozenset({2})
    for event in compactions(session):
        assert 2 not in event.data["replaced"]
    assert report.landed or report.outcome in ("declined", "conflict")
    assert errors(session.messages()) == []


@pytest.mark.parametrize("act", ["retract", "reset", "compact"])
@pytest.mark.guarantee("one-compaction-wins")
def test_an_edit_landing_while_the_summarizer_runs_makes_the_run_plan_again(act: str) -> None:
    """A retraction, a reset or another compaction that lands while the summarizer works is not
    rebased over: the run plans again from the new history (or declines), so nothing it read
    before is written over the change."""
    store = MemoryStore()
    originals = history()
    session = session_with(originals, store)
    other = store.session("s")
    actions = {
        "retract": lambda: other.retract(),
        "reset": lambda: other.reset(),
        "compact": lambda: compactor(FunctionSummarizer.returning(SHORT)).compact(other),
    }
    report = compactor(interrupting(actions[act])).compact(session)
    projected = session.messages()
    assert errors(projected) == []
    if act == "retract":
        assert originals[-1] not in projected
    if act == "reset":
        assert projected == [] and not report.landed
    replaced = [i for e in compactions(session) for i in e.data["replaced"]]
    assert len(replaced) == len(set(replaced))  # no item replaced twice


class BusyStore(MemoryStore):
    """A memory store where another writer appends a message just before every append that
    expects a seq: the race a busy session runs, made certain."""

    def __init__(self) -> None:
        super().__init__()
        self.attempts = 0

    def append(self, session_id: str, events: Any, expected_seq: int | None = None) -> Any:
        if expected_seq is not None:
            self.attempts += 1
            late = Message("user", f"late message {self.attempts}")
            super().append(session_id, [NewEvent.message(late)])
        return super().append(session_id, events, expected_seq)


@pytest.mark.guarantee("landing-bounded")
def test_a_writer_that_keeps_appending_makes_the_run_give_up_not_spin() -> None:
    """When another writer appends before every attempt to land, the run rebases a bounded
    number of times, then gives up with the outcome "conflict": nothing of it is appended, and
    every message the other writer sent is in the log and the projection."""
    store = BusyStore()
    session = session_with(history(), store)
    report = compactor(FunctionSummarizer.returning(SHORT)).compact(session)
    assert (report.landed, report.outcome) == (False, "conflict")
    assert report.error is not None and "attempts" in report.error
    assert store.attempts == MAX_APPENDS
    assert compactions(session) == []
    late = [m for m in session.messages() if m.text.startswith("late message")]
    assert len(late) == MAX_APPENDS


@pytest.mark.guarantee("landing-bounded")
def test_a_few_plain_appends_are_rebased_over() -> None:
    """Messages arriving before the first attempts to land are rebased over: the compaction
    lands after them, and they project after the summary, verbatim."""

    class TwiceBusy(BusyStore):
        def append(self, session_id: str, events: Any, expected_seq: int | None = None) -> Any:
            if expected_seq is not None and self.attempts >= 2:
                return MemoryStore.append(self, session_id, events, expected_seq)
            return super().append(session_id, events, expected_seq)

    store = TwiceBusy()
    session = session_with(history(), store)
    report = compactor(FunctionSummarizer.returning(SHORT)).compact(session)
    assert report.landed and store.attempts == 2
    assert [m.text for m in session.messages()[-2:]] == ["late message 1", "late message 2"]


# -- reports and sharing ---------------------------------------------------------------------------
@pytest.mark.guarantee("report-every-time")
def test_compact_reports_every_run_with_its_outcome() -> None:
    """compact() returns a report whether or not anything landed, with the outcome: within the
    target, landed, declined, or failed (from the automatic trigger)."""
    small = compactor(FunctionSummarizer.returning(SHORT)).compact(
        session_with(history(turns=1)), target=100_000
    )
    assert (small.outcome, small.landed, small.events) == ("within-target", False, ())
    landed = compactor(FunctionSummarizer.returning(SHORT)).compact(session_with(history()))
    assert landed.outcome == "landed" and landed.events
    declined = compactor(FunctionSummarizer.returning(None)).compact(session_with(history()))
    assert declined.outcome == "declined" and not declined.landed
    failing = compactor(FunctionSummarizer.raising(ConnectionError("down")))
    failed = failing.maybe_compact(session_with(history()))
    assert failed is not None and failed.outcome == "failed" and "down" in (failed.error or "")
    assert failed.to_dict()["landed"] is False


@pytest.mark.guarantee("compactor-shared")
def test_one_compactor_serves_sessions_in_many_threads() -> None:
    """A single compactor used by four threads at once, each on its own session: every thread
    gets the report of its own session, and every session is compacted validly."""
    store = MemoryStore()
    names = [f"t{i}" for i in range(4)]
    for name in names:
        session_with(history(), store, name)
    barrier = threading.Barrier(len(names), timeout=20)
    shared = compactor(meeting_summarizer(barrier))
    reports: dict[str, CompactionReport] = {}
    failures: list[BaseException] = []

    def work(name: str) -> None:
        try:
            reports[name] = shared.compact(store.session(name))
        except BaseException as exc:  # collected: a thread's exception must fail the test
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []
    assert {name: r.session_id for name, r in reports.items()} == {n: n for n in names}
    for name in names:
        assert reports[name].landed
        assert [e.seq for e in reports[name].events] == [
            e.seq for e in compactions(store.session(name))
        ]
        assert errors(store.session(name).messages()) == []
