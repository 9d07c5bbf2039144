"""Reading the view after a turn: `Session.messages()` after one `Session.append`, in memory.

An agent loop appends what came back and then asks for the messages to send. The append folds
the new event into the projection; `messages()` hands the view out. Measured on a session of a
`MemoryStore` (no disk, so nothing but ctxfold's own work shows), at each history size: the
append alone, the append followed by `messages()`, and `messages()` again with nothing new.
"""

from __future__ import annotations

from typing import Any

from benchmarks._common import cycled, pool, ratio, rounded, summarize, timed_ops
from ctxfold.messages import Message
from ctxfold.storage import MemoryStore

FULL_SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (100, 1_000)
SETUP_BATCH = 1_000

COLUMNS = [
    "events in session",
    "append µs",
    "append p95 µs",
    "append + messages() µs",
    "append + messages() p95 µs",
    "messages() unchanged µs",
    "(append + messages()) / append",
    "samples",
]


def _row(size: int, messages: list[Message], quick: bool) -> list[object]:
    session = MemoryStore().session("messages")
    history = cycled(messages, size)
    for start in range(0, size, SETUP_BATCH):
        session.append(history[start : start + SETUP_BATCH])
    session.messages()
    count = 200 if quick else 2_000
    budget_s = 0.2 if quick else 3.0
    appended = summarize(timed_ops(session.append, cycled(messages, count, size), budget_s))

    def turn(message: Message) -> None:
        session.append(message)
        session.messages()

    read = summarize(timed_ops(turn, cycled(messages, count, size + count), budget_s))
    again = summarize(timed_ops(lambda _: session.messages(), history[:1] * count, budget_s))
    return [
        size,
        rounded(appended.median),
        rounded(appended.p95),
        rounded(read.median),
        rounded(read.p95),
        rounded(again.median),
        ratio(read.median, appended.median, 1),
        f"{appended.count}/{read.count}/{again.count}",
    ]


def run(quick: bool = False) -> dict[str, Any]:
    """Median microseconds of an append, an append plus `messages()`, and a repeated read."""
    messages, source = pool()
    rows = [_row(size, messages, quick) for size in (QUICK_SIZES if quick else FULL_SIZES)]
    return {
        "title": "Reading the view: Session.messages() after one append, in memory",
        "columns": COLUMNS,
        "rows": rows,
        "notes": [
            f"A MemoryStore session filled with N message events cycled from {source} "
            "(setup, not timed), then: `session.append(message)` alone; "
            "`session.append(message)` then `session.messages()`; and `session.messages()` "
            "with nothing appended since the previous call. No token counting is involved.",
            "Medians and 95th percentiles of single calls in microseconds, garbage collection "
            f"on; each column stops after {0.2 if quick else 3.0} s (samples: append / append + "
            "messages() / unchanged). The last ratio shows what the read adds to a turn.",
        ],
    }
