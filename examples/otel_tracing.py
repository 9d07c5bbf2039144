"""Every compaction as an OpenTelemetry span, read back from the SDK's in-memory exporter, offline.

Run it: python examples/otel_tracing.py
"""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxfold import Budget, Compactor, MemoryStore, Message
from ctxfold.integrations.otel import CompactionTracer


def main() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    compactor = CompactionTracer(tracer_provider=provider).instrument(
        Compactor(Budget(window=4_000, max_output=500))
    )
    session = MemoryStore().session("traced")
    session.append(Message("system", "You fix bugs."))
    for turn in range(40):
        session.append(Message("user", f"Look at src/app_{turn}.py, it fails with KeyError 'id'."))
        session.append(
            Message("assistant", "Reading it. " + "The handler reads event['id']. " * 20)
        )
        compactor.maybe_compact(session)
    for span in exporter.get_finished_spans():
        attrs = dict(span.attributes or {})
        print(
            span.name,
            attrs["gen_ai.conversation.id"],
            f"{attrs['ctxfold.tokens_before']} -> {attrs['ctxfold.tokens_after']} tokens",
            list(attrs["ctxfold.strategies"]),
        )


if __name__ == "__main__":
    main()
