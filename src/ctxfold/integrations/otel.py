"""OpenTelemetry: one span per compaction run.

```python
tracer = CompactionTracer()
compactor = Compactor(budget, on_start=tracer.on_start, on_report=tracer.on_report)
# or, keeping listeners already set: tracer.instrument(compactor)
```

Each run becomes a span named ``ctxfold.compaction`` carrying the GenAI semantic-convention
names where they exist and ``ctxfold.*`` names where they do not:

- ``gen_ai.conversation.id``: the session id;
- ``gen_ai.usage.input_tokens`` / ``gen_ai.usage.output_tokens``: what the summarizer read and
  wrote in the run (tokens, as the summarizer reported them);
- ``gen_ai.request.model``: the summarizer's model, when one was called;
- ``ctxfold.reason``, ``ctxfold.tokens_before``, ``ctxfold.tokens_after``, ``ctxfold.target``
  (tokens, in the compactor's counter), ``ctxfold.fits``, ``ctxfold.landed``,
  ``ctxfold.strategies`` (names, in the order they ran), ``ctxfold.summarizer_calls``,
  ``ctxfold.first_seq`` / ``ctxfold.last_seq`` (the events appended), ``ctxfold.error``.

A failed run sets the span status to error. With no OpenTelemetry SDK configured, the API hands
out a no-op tracer and nothing is computed: a span that does not record gets no attributes.

Needs the ``otel`` extra: ``pip install 'ctxfold[otel]'``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ctxfold.errors import MissingDependencyError

try:
    from opentelemetry import trace
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("ctxfold.integrations.otel", "opentelemetry-api", "otel") from exc

if TYPE_CHECKING:
    from ctxfold.compactor import CompactionReport, CompactionStart, Compactor

SPAN_NAME = "ctxfold.compaction"
_NO_SESSION = "(no session)"


class CompactionTracer:
    """A listener for `Compactor(on_start=..., on_report=...)` that makes a span per run.

    - `tracer_provider`: where spans go; None uses the global provider (a no-op until an SDK is
      configured).

    `on_start` opens the span when the run starts; `on_report` sets its attributes and ends it.
    Given only `on_report`, the span is made at the end and dated back by the run's duration.
    """

    def __init__(self, tracer_provider: Any = None) -> None:
        from ctxfold._version import __version__

        self.tracer = trace.get_tracer("ctxfold", __version__, tracer_provider=tracer_provider)
        self._open: dict[str, list[Any]] = {}
        self._lock = threading.Lock()

    def on_start(self, start: CompactionStart) -> None:
        """Open the run's span (call from `Compactor(on_start=...)`)."""
        span = self.tracer.start_span(SPAN_NAME)
        if span.is_recording():
            span.set_attribute("ctxfold.reason", start.reason)
            if start.session_id is not None:
                span.set_attribute("gen_ai.conversation.id", start.session_id)
        with self._lock:
            self._open.setdefault(start.session_id or _NO_SESSION, []).append(span)

    def on_report(self, report: CompactionReport) -> None:
        """Describe the run on its span and end it (call from `Compactor(on_report=...)`)."""
        key = report.session_id or _NO_SESSION
        with self._lock:
            stack = self._open.get(key)
            span = stack.pop() if stack else None
            if stack == []:
                del self._open[key]
        if span is None:
            began = time.time_ns() - int(report.duration_s * 1e9)
            span = self.tracer.start_span(SPAN_NAME, start_time=began)
        if span.is_recording():
            span.set_attributes(_attributes(report))
            if report.error:
                span.set_status(trace.Status(trace.StatusCode.ERROR, report.error))
        span.end()

    def instrument(self, compactor: Compactor) -> Compactor:
        """Add this tracer to `compactor`'s listeners, keeping any already set; returns it."""
        compactor.on_start = _both(compactor.on_start, self.on_start)
        compactor.on_report = _both(compactor.on_report, self.on_report)
        return compactor


def _attributes(report: CompactionReport) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ctxfold.reason": report.reason,
        "ctxfold.tokens_before": report.tokens_before,
        "ctxfold.tokens_after": report.tokens_after,
        "ctxfold.target": report.target,
        "ctxfold.fits": report.fits,
        "ctxfold.landed": report.landed,
        "ctxfold.strategies": [s.name for s in report.strategies],
        "ctxfold.summarizer_calls": report.summarizer_calls,
        "gen_ai.usage.input_tokens": report.summarizer_input_tokens,
        "gen_ai.usage.output_tokens": report.summarizer_output_tokens,
    }
    if report.session_id is not None:
        out["gen_ai.conversation.id"] = report.session_id
    if report.summarizer_model:
        out["gen_ai.request.model"] = report.summarizer_model
    if report.first_seq is not None:
        out["ctxfold.first_seq"] = report.first_seq
        out["ctxfold.last_seq"] = report.last_seq
    if report.error:
        out["ctxfold.error"] = report.error
    return out


def _both(first: Callable[[Any], Any] | None, second: Callable[[Any], Any]) -> Callable[[Any], Any]:
    if first is None:
        return second

    def call(value: Any) -> None:
        # The tracer hears every run even when the application's own listener raises (which
        # the compactor then reports): a span left open would never be exported.
        try:
            first(value)
        finally:
            second(value)

    return call


__all__ = ["SPAN_NAME", "CompactionTracer"]
