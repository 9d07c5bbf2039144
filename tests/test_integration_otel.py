"""CompactionTracer: one span per compaction, read back with the SDK's in-memory exporter."""

from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from ctxfold import Budget, Compactor, MemoryStore, Message
from ctxfold.integrations.otel import SPAN_NAME, CompactionTracer
from ctxfold.session import Session
from ctxfold.summarizers import SummaryResult
from ctxfold.testing import FixedCounter, FunctionSummarizer


def traced() -> tuple[CompactionTracer, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return CompactionTracer(tracer_provider=provider), exporter


def long_session(session_id: str = "otel-1") -> Session:
    session = MemoryStore().session(session_id)
    session.append(Message("system", "You fix bugs."))
    for turn in range(12):
        session.append(Message("user", f"task {turn}: " + "word " * 120))
        session.append(Message("assistant", f"answer {turn}: " + "word " * 120))
    return session


def summarizer() -> FunctionSummarizer:
    return FunctionSummarizer(
        lambda request: SummaryResult("the user asked for fixes", input_tokens=900, output_tokens=7)
    )


@pytest.mark.guarantee("compaction-traced")
def test_each_compaction_is_a_span_with_genai_and_ctxfold_attributes() -> None:
    """The span names the session, the summarizer's usage, tokens before and after, the
    strategies and the number of summarizer calls."""
    tracer, exporter = traced()
    compactor = tracer.instrument(
        Compactor(
            Budget(window=3_000, max_output=500, keep_user_tokens=0),
            summarizer=summarizer(),
            counter=FixedCounter(),
        )
    )
    report = compactor.maybe_compact(long_session())
    assert report is not None and report.landed
    (span,) = exporter.get_finished_spans()
    attrs = span.attributes or {}
    assert span.name == SPAN_NAME
    assert attrs["gen_ai.conversation.id"] == "otel-1"
    assert attrs["gen_ai.usage.input_tokens"] == report.summarizer_input_tokens > 0
    assert attrs["gen_ai.usage.output_tokens"] == report.summarizer_output_tokens > 0
    assert attrs["ctxfold.tokens_before"] == report.tokens_before
    assert attrs["ctxfold.tokens_after"] == report.tokens_after < report.tokens_before
    assert list(attrs["ctxfold.strategies"]) == [s.name for s in report.strategies]
    assert attrs["ctxfold.summarizer_calls"] == report.summarizer_calls > 0
    assert attrs["ctxfold.reason"] == "threshold"
    assert attrs["ctxfold.landed"] is True
    assert attrs["ctxfold.first_seq"] == report.first_seq


@pytest.mark.guarantee("compaction-traced")
def test_a_failed_run_is_a_span_with_error_status() -> None:
    """A summarizer that raises inside the automatic trigger still closes its span, marked
    as an error with the reason."""

    def broken(request: object) -> SummaryResult:
        raise RuntimeError("the summarizer is down")

    tracer, exporter = traced()
    pipeline_compactor = Compactor(
        Budget(window=3_000, max_output=500, keep_user_tokens=0),
        summarizer=FunctionSummarizer(broken),
        counter=FixedCounter(),
    )
    from ctxfold.pipeline import Pipeline, Summarize

    pipeline_compactor.pipeline = Pipeline([Summarize()])
    tracer.instrument(pipeline_compactor)
    pipeline_compactor.maybe_compact(long_session("otel-2"))
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert "the summarizer is down" in str((span.attributes or {})["ctxfold.error"])


def test_listeners_already_set_keep_running() -> None:
    seen: list[str] = []
    tracer, exporter = traced()
    compactor = Compactor(
        Budget(window=3_000, max_output=500, keep_user_tokens=0),
        summarizer=summarizer(),
        counter=FixedCounter(),
        on_report=lambda report: seen.append(report.reason),
    )
    tracer.instrument(compactor).maybe_compact(long_session())
    assert seen == ["threshold"]
    assert len(exporter.get_finished_spans()) == 1


def test_on_report_alone_still_makes_a_span() -> None:
    tracer, exporter = traced()
    compactor = Compactor(
        Budget(window=3_000, max_output=500, keep_user_tokens=0),
        summarizer=summarizer(),
        counter=FixedCounter(),
        on_report=tracer.on_report,
    )
    compactor.maybe_compact(long_session())
    (span,) = exporter.get_finished_spans()
    assert span.end_time is not None and span.start_time is not None
    assert span.start_time <= span.end_time


def test_without_an_sdk_the_tracer_records_nothing() -> None:
    """With no provider configured the API's no-op tracer is used: spans do not record."""
    tracer = CompactionTracer()
    span = tracer.tracer.start_span("probe")
    assert not span.is_recording()
    compactor = tracer.instrument(
        Compactor(
            Budget(window=3_000, max_output=500, keep_user_tokens=0),
            summarizer=summarizer(),
            counter=FixedCounter(),
        )
    )
    assert compactor.maybe_compact(long_session()) is not None


SECRET = "sk-proj-" + "Zx8Cv7Bn6Mm5Ll4Kk3Jj2Hh1" * 2


@pytest.mark.guarantee("compaction-traced")
def test_an_application_listener_that_raises_leaves_the_trace_whole_and_redacted() -> None:
    """With `instrument`, the span of a run whose own on_report or on_start raised is still
    ended and exported, and the listener's error, which quoted a key, is redacted on it."""
    for hook in ("on_report", "on_start"):
        tracer, exporter = traced()

        def leaky(value: object) -> None:
            raise RuntimeError(f"audit store refused Authorization: Bearer {SECRET}")

        compactor = Compactor(
            Budget(window=3_000, max_output=500, keep_user_tokens=0),
            summarizer=summarizer(),
            counter=FixedCounter(),
            **{hook: leaky},  # type: ignore[arg-type]
        )
        report = tracer.instrument(compactor).maybe_compact(long_session())
        assert report is not None and report.error is not None and SECRET not in report.error
        (span,) = exporter.get_finished_spans()
        assert tracer._open == {}
        if hook == "on_start":  # reported before the span ends; on_report's comes after it
            assert SECRET not in str((span.attributes or {}).get("ctxfold.error"))


@pytest.mark.guarantee("compaction-traced")
def test_a_manual_compaction_that_raises_ends_its_span_with_an_error() -> None:
    """A manual compact whose summarizer raises raises to the caller, and its span is ended with
    error status and the error, redacted, instead of staying open for good."""
    tracer, exporter = traced()

    def failing(request: object) -> str:
        raise RuntimeError(f"upstream said OPENAI_API_KEY={SECRET}")

    compactor = tracer.instrument(
        Compactor(
            Budget(window=3_000, max_output=500, keep_user_tokens=0),
            summarizer=FunctionSummarizer(failing),
            counter=FixedCounter(),
        )
    )
    with pytest.raises(Exception, match="upstream said"):
        compactor.compact(long_session())
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert SECRET not in str(span.status.description)
    assert tracer._open == {}
