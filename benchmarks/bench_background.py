"""Compaction off the critical path: how long the turn at which a compaction lands waits.

A generated coding-agent session is replayed as a live agent would run it: append each message,
and before every model request call `Compactor.maybe_compact(session)`, then let the "model" take
its time (a sleep) before its answer is appended. The summarizer is the default extractive one
behind a sleep of a couple of seconds, standing in for an LLM call. A turn's wait is the time
spent in its appends and its `maybe_compact`; the turns at which a compaction event appears in
the log are the landing turns.

Run in the foreground (today's `Compactor`, where the landing turn waits for the whole summary)
and, when `Compactor` accepts ``background=True``, with it on, where the summary should be
written while the model answers and land at once. Without that parameter the background row
says "not available" instead of failing.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks._common import UNAVAILABLE, ratio, rounded, summarize
from ctxfold.compactor import Compactor
from ctxfold.events import COMPACTION, MASK
from ctxfold.messages import Message, validate
from ctxfold.protocols import TokenCounter
from ctxfold.storage import MemoryStore
from ctxfold.summarizers import SummaryRequest, SummaryResult
from ctxfold.summarizers.extractive import ExtractiveSummarizer
from ctxfold.testing.transcripts import generate
from ctxfold.tokens import Budget
from ctxfold.tokens import counter as make_counter

WINDOW = 8_000
"""Tokens; small enough that the generated session compacts several times."""
FULL = {"steps": 40, "summary_s": 2.0, "model_s": 0.5}
QUICK = {"steps": 24, "summary_s": 0.2, "model_s": 0.05}

COLUMNS = [
    "mode",
    "summarizer sleep s",
    "model time s",
    "requests",
    "landing turns",
    "summaries landed",
    "summarizer calls",
    "landing turn p50 ms",
    "landing turn p95 ms",
    "other turns p50 ms",
    "other turns p95 ms",
    "landing p95 / summarizer sleep",
    "peak tok",
    "window",
    "invalid",
    "wall s",
]


def background_supported() -> bool:
    """Whether this ctxfold's `Compactor` takes a ``background`` argument."""
    return "background" in inspect.signature(Compactor).parameters


class _Sleepy:
    """The default extractive summarizer behind a fixed sleep, like a model call; thread-safe
    enough for one compaction at a time (it only counts its calls)."""

    name = "extractive (slowed)"

    def __init__(self, seconds: float, counter: TokenCounter) -> None:
        self.seconds = seconds
        self.inner = ExtractiveSummarizer(count=counter.count_text)
        self.calls = 0

    def __call__(self, request: SummaryRequest) -> SummaryResult:
        self.calls += 1
        time.sleep(self.seconds)
        return self.inner(request)


@dataclass
class _Run:
    requests: int = 0
    landing_ms: list[float] = field(default_factory=list)
    other_ms: list[float] = field(default_factory=list)
    peak: int = 0
    invalid: int = 0
    summaries: int = 0
    calls: int = 0
    wall_s: float = 0.0


def _replay(
    messages: Sequence[Message],
    counter: TokenCounter,
    summary_s: float,
    model_s: float,
    background: bool,
) -> _Run:
    summarizer = _Sleepy(summary_s, counter)
    options: dict[str, Any] = {"background": True} if background else {}
    compactor = Compactor(Budget(window=WINDOW), summarizer=summarizer, counter=counter, **options)
    session = MemoryStore().session("background", counter=counter)
    out = _Run()
    seen = 0
    waited = 0.0
    started = time.perf_counter()
    for message in messages:
        if message.role == "assistant":  # a model request comes first: check, then "answer"
            t0 = time.perf_counter()
            compactor.maybe_compact(session)
            wait_ms = (waited + time.perf_counter() - t0) * 1_000
            waited = 0.0
            landed = [e for e in session.events(after=seen) if e.type in (COMPACTION, MASK)]
            seen = session.last_seq
            (out.landing_ms if landed else out.other_ms).append(wait_ms)
            out.summaries += sum(
                1
                for e in landed
                if e.data.get("kind") == "summary" and e.data.get("tier") != "ledger"
            )
            out.requests += 1
            out.peak = max(out.peak, compactor.estimate(session))
            out.invalid += sum(1 for p in validate(session.messages()) if p.severity == "error")
            time.sleep(model_s)
        t0 = time.perf_counter()
        session.append(message)
        waited += time.perf_counter() - t0
    out.wall_s = time.perf_counter() - started
    out.calls = summarizer.calls
    return out


def _row(mode: str, plan: dict[str, Any], run: _Run | None) -> list[object]:
    if run is None:
        return [mode, plan["summary_s"], plan["model_s"], *[UNAVAILABLE] * (len(COLUMNS) - 3)]
    landing = summarize(run.landing_ms) if run.landing_ms else None
    other = summarize(run.other_ms)
    return [
        mode,
        plan["summary_s"],
        plan["model_s"],
        run.requests,
        len(run.landing_ms),
        run.summaries,
        run.calls,
        rounded(landing.median) if landing else "—",
        rounded(landing.p95) if landing else "—",
        rounded(other.median, 2),
        rounded(other.p95, 2),
        ratio(landing.p95, plan["summary_s"] * 1_000) if landing else "—",
        run.peak,
        WINDOW,
        run.invalid,
        rounded(run.wall_s),
    ]


def run(quick: bool = False) -> dict[str, Any]:
    """One row per mode: the waits of landing turns and of the others, validity, peak size."""
    plan = QUICK if quick else FULL
    counter = make_counter("auto")
    messages = generate(seed=11, steps=plan["steps"])
    foreground = _replay(messages, counter, plan["summary_s"], plan["model_s"], False)
    supported = background_supported()
    background = (
        _replay(messages, counter, plan["summary_s"], plan["model_s"], True) if supported else None
    )
    notes = [
        f"A generated coding-agent session (demo_session.generate(seed=11, steps="
        f"{plan['steps']}), {len(messages)} messages) at a {WINDOW:,}-token window, "
        f"Compactor(Budget(window={WINDOW}), summarizer=slowed extractive, counter=counter("
        "'auto')), plus background=True in the background row. Before each assistant message "
        "(a model request) the loop calls `compactor.maybe_compact(session)`, then sleeps for "
        "the model's time, then appends the answer.",
        "A turn's wait: its appends plus `maybe_compact`, in milliseconds. Landing turns are "
        "those after whose check the log holds a new edit (a compaction or mask event; one "
        "that landed in between counts for the next check); some land tool-output clearing "
        "only and never wait for the summarizer. Summaries landed counts summary compaction "
        "events. p50 and p95 over the landing turns and over the others; landing p95 / "
        "summarizer sleep near or above 1 means the turn waited for the summary (above 1: for "
        "more than one summarizer call).",
        "Peak tok: the compactor's estimate after each check, highest of the run; invalid: "
        "validity errors over every request (should be 0).",
    ]
    if not supported:
        notes.append(
            "Background compaction: not available; this ctxfold's Compactor has no "
            "`background` parameter."
        )
    return {
        "title": "Background compaction: the wait of the turn at which a compaction lands",
        "columns": COLUMNS,
        "rows": [_row("foreground", plan, foreground), _row("background", plan, background)],
        "notes": notes,
    }
