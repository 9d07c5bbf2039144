"""End to end: a real transcript replayed into a session, compacted by `OpenAISummarizer` through
the real `openai` client against the local fake API."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

import ctxfold
from conftest import transcript_params
from ctxfold import Budget, Compactor, MemoryStore, Message, read_jsonl, validate
from ctxfold.compactor import CompactionReport
from ctxfold.messages.structure import analyze
from ctxfold.summarizers import FallbackSummarizer
from ctxfold.summarizers.openai import OpenAISummarizer
from ctxfold.testing.fake_llm import FakeLLMServer
from ctxfold.testing.transcripts import SYSTEM_PROMPT, generate

WINDOW = 16_000


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


def errors(messages: list[Message]) -> list[str]:
    """What a provider would reject (a pending last call is fine mid-turn)."""
    return [str(p) for p in validate(messages) if p.severity == "error"]


def summarizer_for(server: FakeLLMServer, **kwargs: object) -> OpenAISummarizer:
    client = openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
    return OpenAISummarizer("gpt-4o-mini", client=client, **kwargs)  # type: ignore[arg-type]


@pytest.mark.transcripts
@pytest.mark.parametrize("path", transcript_params())
@pytest.mark.guarantee("history-always-valid")
def test_a_replayed_transcript_stays_valid_within_budget_and_reports_usage(
    path: Path, server: FakeLLMServer
) -> None:
    """Replaying a real transcript message by message with an OpenAI summarizer keeps the
    history valid and inside the budget, and each report shows the model and the tokens the API
    said the summarizer read and wrote."""
    messages = read_jsonl(path)
    session = MemoryStore().session("s")
    budget = Budget(window=WINDOW)
    compactor = Compactor(budget, summarizer=summarizer_for(server))
    reports: list[CompactionReport] = []
    for message in messages:
        session.append([message])
        report = compactor.maybe_compact(session)
        if report is not None:
            reports.append(report)
            assert report.error is None, report.error

    history = session.messages()
    assert errors(history) == []
    assert compactor.estimate(session) <= budget.trigger_tokens
    if not server.requests:
        pytest.skip(f"{path.stem}: {len(reports)} compactions, none needed the summarizer")
    summarized = [r for r in reports if r.summarizer_calls]
    assert {r.summarizer_model for r in summarized} == {"gpt-4o-mini"}
    assert sum(r.summarizer_calls for r in summarized) == len(server.requests)
    assert sum(r.summarizer_input_tokens for r in summarized) == sum(
        sent.estimated_tokens for sent in server.requests
    )
    assert all(r.summarizer_output_tokens > 0 for r in summarized)
    system = messages[0].text if messages[0].role == "system" else None
    if system:
        assert all(system not in sent.user for sent in server.requests)


@pytest.mark.guarantee("summary-request-scope")
def test_compact_sends_neither_the_system_block_nor_the_current_request(
    server: FakeLLMServer,
) -> None:
    """Through `ctxfold.compact`, the summarizer's requests never hold the agent's system
    prompt or the user's current request, and the summary lands in their place."""
    current = "Now make the report command print totals per customer."
    history = [*generate(seed=4, steps=30), Message("user", current)]
    out = ctxfold.compact_messages(
        history, Budget(window=WINDOW), summarizer=summarizer_for(server)
    )
    assert server.requests
    for sent in server.requests:
        assert SYSTEM_PROMPT not in sent.system + sent.user
        assert current not in sent.user
    assert out.messages[0].text == SYSTEM_PROMPT
    assert current in [m.text for m in out.messages]
    assert errors(out.messages) == []
    assert out.report.summarizer_model == "gpt-4o-mini"


@pytest.mark.guarantee("summarizer-fallback")
def test_a_failing_llm_summarizer_falls_back_to_the_extractive_one(
    server: FakeLLMServer,
) -> None:
    """When the API keeps answering 500, a FallbackSummarizer compacts with the extractive
    summarizer instead, and the report's notes say why."""
    server.mode = "error"
    history = [*generate(seed=4, steps=30), Message("user", "carry on")]
    summarizer = FallbackSummarizer(summarizer_for(server))
    out = ctxfold.compact_messages(history, Budget(window=WINDOW), summarizer=summarizer)
    assert server.requests
    assert out.report.landed and out.report.fits
    assert any("InternalServerError" in note for note in out.report.notes)
    assert errors(out.messages) == []


@pytest.mark.guarantee("auto-trigger-isolates-failures")
def test_a_failing_llm_summarizer_does_not_break_the_automatic_trigger(
    server: FakeLLMServer,
) -> None:
    """A summarizer whose API keeps failing never raises out of `maybe_compact`: each report
    carries the error, the rest of the ladder still brings the history under the target, and
    it stays valid with its system prompt first."""
    server.mode = "error"
    session = MemoryStore().session("s")
    compactor = Compactor(Budget(window=WINDOW), summarizer=summarizer_for(server))
    reports = []
    for message in generate(seed=4, steps=30):
        session.append([message])
        report = compactor.maybe_compact(session)
        if report is not None:
            reports.append(report)
    assert server.requests and reports
    assert all(r.error and "InternalServerError" in r.error for r in reports)
    assert all(r.landed and r.fits for r in reports)  # the ladder went on past the summarizer
    assert errors(session.messages()) == []
    history = session.messages()
    assert analyze(history).system_end == 1 and history[0].text == SYSTEM_PROMPT


async def test_the_async_compactor_uses_the_async_client(server: FakeLLMServer) -> None:
    """`acompact` awaits the summarizer's `acall`; the requests carry the async client's mark."""
    session = MemoryStore().session("s")
    session.append([*generate(seed=4, steps=30), Message("user", "carry on")])
    summarizer = summarizer_for(server)
    compactor = Compactor(Budget(window=WINDOW), summarizer=summarizer)
    # Bounded: a driver that lost the end of the run would otherwise wait forever.
    report = await asyncio.wait_for(compactor.acompact(session), timeout=20)
    await summarizer.aclose()
    assert report is not None and report.summarizer_calls == len(server.requests) > 0
    assert all(
        sent.headers.get("x-stainless-async", "").startswith("async") for sent in server.requests
    )
    assert errors(session.messages()) == []
