"""What checking the budget after one append costs: a `Tally` against recounting the history.

A session checks its token estimate after every append. Recounting the whole history makes each
append cost O(history); the `Tally` counts only the new message and keeps a running sum, so the
cost stays flat however long the session gets. Both columns include counting the new message.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Sequence

from benchmarks import transcript_messages
from ctxfold.errors import MissingDependencyError
from ctxfold.messages import Message
from ctxfold.protocols import TokenCounter
from ctxfold.testing.transcripts import generate
from ctxfold.tokens import HeuristicCounter, Tally, TiktokenCounter, count_messages

FULL_SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (100, 1_000)


def _pool() -> tuple[list[Message], str]:
    messages = transcript_messages()
    if messages:
        return messages, f"the {len(messages):,} messages of the shared agent transcripts"
    messages = generate(seed=7, steps=300)
    return messages, f"{len(messages):,} generated coding-agent messages (transcripts absent)"


def _counters() -> tuple[list[TokenCounter], list[str]]:
    counters: list[TokenCounter] = [HeuristicCounter()]
    try:
        counters.append(TiktokenCounter("o200k_base"))
    except MissingDependencyError as exc:
        return counters, [f"o200k_base rows left out: {exc}"]
    return counters, []


def _time_ops(
    op: Callable[[Message], object],
    undo: Callable[[], object],
    new: Sequence[Message],
    budget_s: float,
) -> list[float]:
    """Microseconds of each `op`, undone (untimed) after it, until `new` or the budget runs out."""
    samples: list[float] = []
    started = time.perf_counter()
    gc.disable()
    try:
        for message in new:
            t0 = time.perf_counter_ns()
            op(message)
            samples.append((time.perf_counter_ns() - t0) / 1_000)
            undo()
            if time.perf_counter() - started > budget_s:
                break
    finally:
        gc.enable()
    return samples


def _measure(counter: TokenCounter, pool: list[Message], size: int, quick: bool) -> list[object]:
    history = [pool[i % len(pool)] for i in range(size)]
    new = [pool[(size + i) % len(pool)] for i in range(100 if quick else 1_000)]
    budget_s = 0.2 if quick else 3.0

    tally = Tally(counter)
    for item_id, message in enumerate(history):
        tally.add(item_id, message)

    def tally_append(message: Message) -> None:
        tally.add(size, message)
        _ = tally.estimate

    def recount_append(message: Message) -> None:
        history.append(message)
        _ = count_messages(counter, history)

    tally_us = _time_ops(tally_append, lambda: tally.remove(size), new, budget_s)
    recount_us = _time_ops(recount_append, history.pop, new, budget_s)
    tally_median = statistics.median(tally_us)
    recount_median = statistics.median(recount_us)
    return [
        counter.name,
        size,
        round(tally_median, 2),
        round(recount_median, 1),
        round(recount_median / tally_median, 1),
        len(tally_us),
        len(recount_us),
    ]


def run(quick: bool = False) -> dict[str, object]:
    """Median microseconds per append + estimate, Tally against recount, per history size."""
    pool, source = _pool()
    counters, skipped = _counters()
    rows = [
        _measure(counter, pool, size, quick)
        for counter in counters
        for size in (QUICK_SIZES if quick else FULL_SIZES)
    ]
    return {
        "title": "Budget check after one append: Tally vs recounting the history",
        "columns": [
            "counter",
            "messages in history",
            "Tally µs / append",
            "recount µs / append",
            "recount / Tally",
            "Tally samples",
            "recount samples",
        ],
        "rows": rows,
        "notes": [
            f"History and appended messages cycle through {source}.",
            "Each sample appends one message and reads the estimate; both sides count the new "
            "message with the same counter. Medians, garbage collection paused while timing.",
            "Tally: per-item counts and a running sum (ctxfold.tokens.Tally). Recount: "
            "count_messages over the whole history after every append, the naive approach.",
            "Recount samples stop after a few seconds per row, so long histories have fewer.",
            "Absolute times vary with the machine and its load; the point is that the Tally "
            "column stays flat while the recount grows with the history.",
            *skipped,
        ],
    }
