"""Overflow recovery (`overflow-recovery`): on a provider's context-overflow error the compactor
compacts and the caller retries once; a second overflow in the same session clears tool results
instead.

The agent loop here sends the session's messages through the real OpenAI SDK client to the
local fake API, which answers the first request with a genuine context_length_exceeded 400.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from ctxfold.compactor import CompactionReport, Compactor
from ctxfold.events import MESSAGE
from ctxfold.messages import Message, ToolCall
from ctxfold.messages.openai import to_openai
from ctxfold.messages.validity import validate
from ctxfold.overflow import is_context_overflow
from ctxfold.pipeline import Pipeline, Summarize
from ctxfold.pipeline.clear import CLEARED_MARK
from ctxfold.pipeline.fit import FIT_PHRASE
from ctxfold.session import Session
from ctxfold.storage import MemoryStore, SQLiteStore
from ctxfold.testing.counters import FixedCounter
from ctxfold.testing.doubles import FunctionSummarizer
from ctxfold.testing.fake_llm import FakeLLMServer
from ctxfold.tokens import Budget
from tests._histories import agent_history

COUNTER = FixedCounter()
SHORT = "## Objective\n- fix the bugs\n## Work done\n- read the modules"
BUDGET = Budget(window=3000, keep_recent_tokens=0)
SECOND_RUNGS = ["clear_tool_results", "cut_to_fit"]
"""What a second overflow of `history()` runs: older results cleared, then the newest cut to
half of the estimate the provider refused again (`oversized-output-cut`)."""


def history() -> list[Message]:
    """Three finished turns, then a current task with three steps so far."""
    return agent_history(
        3, output_words=150, task_steps=3, request="Now run the tests and fix what fails."
    )


def session_with(messages: list[Message], name: str = "s") -> Session:
    session = MemoryStore().session(name)
    session.append(messages)
    return session


def compactor() -> Compactor:
    return Compactor(
        BUDGET,
        pipeline=Pipeline([Summarize()]),
        summarizer=FunctionSummarizer.returning(SHORT),
        counter=COUNTER,
    )


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


def send(client: openai.OpenAI, session: Session) -> str:
    reply = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=to_openai(session.messages()),  # type: ignore[arg-type]
    )
    return reply.choices[0].message.content or ""


def agent_turn(
    client: openai.OpenAI, session: Session, comp: Compactor, text: str
) -> tuple[str, list[CompactionReport | None]]:
    """Append the user's message once, send, and on an overflow recover and retry once."""
    session.append(Message("user", text))
    recoveries: list[CompactionReport | None] = []
    try:
        return send(client, session), recoveries
    except openai.BadRequestError as exc:
        if not is_context_overflow(exc):
            raise
        recoveries.append(comp.recover_from_overflow(session))
    return send(client, session), recoveries


@pytest.mark.guarantee("overflow-recovery")
def test_overflow_compacts_and_the_single_retry_succeeds(server: FakeLLMServer) -> None:
    """A real context_length_exceeded error from the SDK: the compactor compacts, the retry
    goes through, and the user message that overflowed is in the log and the projection once."""
    client = openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
    session = session_with(history())
    comp = compactor()
    server.enqueue("overflow")
    text = "Also check docs/index.md for stale examples."
    reply, recoveries = agent_turn(client, session, comp, text)
    assert reply
    (report,) = recoveries
    assert report is not None and report.reason == "overflow" and report.landed
    assert [s.name for s in report.strategies] == ["summarize"]
    assert len(server.requests) == 2
    logged = [e.message for e in session.events() if e.type == MESSAGE]
    assert sum(1 for m in logged if m.text == text) == 1
    projected = session.messages()
    assert sum(1 for m in projected if m.text == text) == 1
    assert projected[-1].text == text
    retried = server.requests[1].body["messages"]
    assert len(retried) < len(server.requests[0].body["messages"])


@pytest.mark.guarantee("overflow-recovery")
def test_second_overflow_in_a_session_clears_tool_results() -> None:
    """The first overflow compacts with the pipeline; a second one in the same session clears
    tool results instead, keeping call ids, so the history stays valid. Clearing the older ones
    leaves the view over half of the estimate the provider refused, so the newest output is cut
    too (`oversized-output-cut`): each overflow in a row asks for less."""
    session = session_with(history())
    comp = compactor()
    first = comp.recover_from_overflow(session)
    assert first is not None and [s.name for s in first.strategies] == ["summarize"]
    second = comp.recover_from_overflow(session)
    assert second is not None and second.reason == "overflow"
    assert [s.name for s in second.strategies] == SECOND_RUNGS
    assert second.tokens_after < first.tokens_after
    projected = session.messages()
    results = [m for m in projected if m.role == "tool"]
    assert all(m.text.startswith(CLEARED_MARK) for m in results[:-1])
    newest = results[-1]  # not cleared: cut, naming its call and the event that keeps it
    assert FIT_PHRASE in newest.text and f"call {newest.tool_call_id}" in newest.text
    assert [p for p in validate(projected) if p.severity == "error"] == []


@pytest.mark.guarantee("overflow-recovery")
def test_overflows_are_counted_per_session() -> None:
    """A first overflow in another session compacts with the pipeline again."""
    comp = compactor()
    comp.recover_from_overflow(session_with(history(), "a"))
    report = comp.recover_from_overflow(session_with(history(), "b"))
    assert report is not None
    assert [s.name for s in report.strategies] == ["summarize"]


@pytest.mark.guarantee("overflow-recovery")
async def test_async_recovery_behaves_like_the_sync_one() -> None:
    """arecover_from_overflow compacts first, then clears tool results on a second overflow."""
    session = session_with(history())
    comp = compactor()
    first = await comp.arecover_from_overflow(session)
    second = await comp.arecover_from_overflow(session)
    assert first is not None and second is not None
    assert [s.name for s in first.strategies] == ["summarize"]
    assert [s.name for s in second.strategies] == SECOND_RUNGS


@pytest.mark.guarantee("overflow-recovery")
def test_overflows_are_counted_in_the_log_so_any_compactor_sees_them(tmp_path: Path) -> None:
    """Each overflow is an event in the session's log: a second overflow handled by a new
    compactor, on the store opened again, still clears tool results; a reset starts the count
    afresh."""
    path = tmp_path / "o.db"
    with SQLiteStore(path) as store:
        session = store.session("o")
        session.append(history())
        compactor().recover_from_overflow(session)
    with SQLiteStore(path) as store:
        session = store.session("o")
        assert session.overflows() == 1
        second = compactor().recover_from_overflow(session)
        assert [s.name for s in second.strategies] == SECOND_RUNGS
        assert [e.type for e in session.events()].count("overflow") == 2
        session.reset()
        assert session.overflows() == 0


# -- recovery shrinks whatever the local estimate says ---------------------------------------------
def under_counted_history() -> list[Message]:
    """A history our counter finds small but a provider finds huge: an old turn carries a
    pasted blob with no spaces (one word to `FixedCounter`, thousands of tokens to a provider)."""
    blob = "QUJD" * 4000  # 16,000 characters of base64, one "word"
    messages = [Message("system", "You are a careful coding agent.")]
    messages += [Message("user", f"Here is the dump of the crash: {blob}")]
    messages += [Message("assistant", "The dump shows a bad header in src/io.py.")]
    for turn in range(3):
        messages += [Message("user", f"Task {turn}: look at src/mod{turn}.py")]
        messages += [Message("assistant", f"Looked at src/mod{turn}.py; " + "fine " * 60)]
    messages += [Message("user", "Now run the tests.")]
    return messages


@pytest.mark.guarantee("overflow-recovery")
def test_overflow_shrinks_the_view_even_when_the_local_estimate_is_under_target(
    server: FakeLLMServer,
) -> None:
    """The provider says the prompt is too long although our own count is far under the target:
    the first recovery still shrinks the history, and the single retry goes through."""
    server.max_context = 2000
    client = openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
    session = session_with(under_counted_history())
    comp = compactor()
    assert comp.estimate(session) < BUDGET.target_tokens
    with pytest.raises(openai.BadRequestError) as caught:
        send(client, session)
    assert is_context_overflow(caught.value)
    report = comp.recover_from_overflow(session, error=caught.value)
    assert report.landed and report.reason == "overflow"
    assert report.tokens_after < report.tokens_before
    assert send(client, session)
    assert len(server.requests) == 2


@pytest.mark.guarantee("overflow-recovery")
def test_overflow_without_the_error_still_shrinks_the_view() -> None:
    """Without the provider's error to read, a first overflow brings the view under half of what
    it was estimated at, even when that estimate was already within the target."""
    session = session_with(under_counted_history())
    comp = Compactor(BUDGET, summarizer=FunctionSummarizer.returning(SHORT), counter=COUNTER)
    before = comp.estimate(session)
    assert before < BUDGET.target_tokens
    report = comp.recover_from_overflow(session)
    assert report.landed
    assert report.target == before // 2
    assert report.fits or report.pinned_tokens > report.target
    assert comp.estimate(session) < before


@pytest.mark.guarantee("overflow-recovery")
def test_the_providers_stated_figures_recalibrate_the_recovery() -> None:
    """When the error states the prompt's size and the model's limit, the recovery records the
    size as provider usage and aims at the budget's share of the stated limit, counted as the
    provider counts."""
    session = session_with(history())
    comp = Compactor(
        Budget(window=100_000, keep_recent_tokens=0),
        pipeline=Pipeline([Summarize()]),
        summarizer=FunctionSummarizer.returning(SHORT),
        counter=COUNTER,
    )
    counted = comp.estimate(session)
    stated = counted * 3  # the provider counts three times what we do
    error = ValueError(
        f"This model's maximum context length is {counted} tokens. However, your messages "
        f"resulted in {stated} tokens."
    )
    report = comp.recover_from_overflow(session, error=error)
    assert report.landed
    types = [e.type for e in session.events()]
    assert types.index("usage") + 1 == types.index("overflow") < types.index("compaction")
    # The budget's target fraction (0.4) of the stated limit, in provider tokens: scaled into
    # our counter's units by the provider's ratio.
    provider_target = int(counted * 0.4)
    assert report.target == provider_target * counted // stated
    assert report.fits or report.pinned_tokens > report.target


@pytest.mark.guarantee("overflow-recovery")
def test_recorded_usage_recalibrates_the_recovery() -> None:
    """A provider usage report says the history is three times what we count: the recovery
    aims at the target as the provider counts, not as we do."""
    session = session_with(history())
    comp = compactor()
    counted = comp.estimate(session)
    session.record_usage(counted * 3)
    report = comp.recover_from_overflow(session)
    assert report.landed
    assert report.target == BUDGET.target_tokens // 3
    assert report.tokens_after < counted // 3


@pytest.mark.guarantee("overflow-recovery")
@pytest.mark.guarantee("never-larger")
def test_the_second_pass_never_replaces_a_result_with_something_larger() -> None:
    """A second overflow clears tool results; a short result such as "ok" stays as it is, since
    any placeholder would be larger than it."""
    messages = history()
    short = Message("assistant", None, (ToolCall("ok1", "touch", '{"path": "a.txt"}'),))
    messages[-2:-2] = [short, Message("tool", "ok", tool_call_id="ok1")]
    session = session_with(messages)
    comp = compactor()
    comp.recover_from_overflow(session)
    second = comp.recover_from_overflow(session)
    assert second.landed
    after = {m.tool_call_id: m for m in session.messages() if m.role == "tool"}
    assert after["ok1"].text == "ok"
    originals = {m.tool_call_id: m for m in messages if m.role == "tool"}
    for call_id, message in after.items():
        assert COUNTER.count_message(message) <= COUNTER.count_message(originals[call_id])
