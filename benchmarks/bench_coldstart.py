"""Cold start: a new process opens a stored session, reads its messages and checks the budget.

What an agent worker pays when it picks up a long session: ctxfold opens the `SQLiteStore`, asks
`Session.messages()`, and runs the first `Compactor.should_compact` and `Compactor.estimate`
(which count the history). The peer is `agents.SQLiteSession` from the OpenAI Agents SDK, opened
in a new process too, reading the same messages with `get_items()`; it has no budget check, so
its figure is a plain read. Each measurement runs in a fresh Python process
(`benchmarks._coldstart_child`) on files written beforehand, so the operating system's page
cache is warm for both sides alike.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import ROOT
from benchmarks._coldstart_child import MODEL
from benchmarks._common import (
    UNAVAILABLE,
    BenchmarkError,
    cycled,
    plural,
    pool,
    ratio,
    rounded,
    summarize,
)
from ctxfold.messages import Message
from ctxfold.messages.openai import to_openai
from ctxfold.storage import SQLiteStore

FULL_SIZES = (10_000, 100_000)
QUICK_SIZES = (1_000,)
FULL_REPS = 5
MEMORY_REPS = 1
SETUP_BATCH = 1_000
SESSION_ID = "coldstart"
MIB = 1024 * 1024

COLUMNS = [
    "events",
    "ctxfold ms",
    "ctxfold range %",
    "of which messages() ms",
    "agents ms",
    "agents range %",
    "ctxfold / agents",
    "ctxfold traced peak MiB",
    "agents traced peak MiB",
    "traced peak ctxfold / agents",
    "ctxfold RSS growth MiB",
    "agents RSS growth MiB",
    "ctxfold imports + counter ms",
    "agents imports ms",
    "reps",
]


def _agents_available() -> bool:
    try:
        import agents  # noqa: F401
    except ImportError:
        return False
    return True


def _write_ctxfold(path: Path, history: Sequence[Message]) -> None:
    # Through Session.append and the budget check after each batch, as an agent with a budget
    # writes: whatever the session keeps beside the log for a later start (a checkpoint with its
    # counts) is kept here too. The check only counts; nothing is compacted.
    from ctxfold.compactor import Compactor
    from ctxfold.tokens import Budget, counter

    count = counter("auto")
    compactor = Compactor(Budget.for_model(MODEL), counter=count)
    with SQLiteStore(path) as store:
        session = store.session(SESSION_ID, counter=count)
        for start in range(0, len(history), SETUP_BATCH):
            session.append(history[start : start + SETUP_BATCH])
            compactor.should_compact(session)


def _write_agents(path: Path, history: Sequence[Message]) -> None:
    import asyncio

    from agents import SQLiteSession

    session = SQLiteSession(SESSION_ID, path)
    loop = asyncio.new_event_loop()
    try:
        for start in range(0, len(history), SETUP_BATCH):
            items: Any = to_openai(history[start : start + SETUP_BATCH])
            loop.run_until_complete(session.add_items(items))
    finally:
        session.close()
        loop.close()


def _child(side: str, mode: str, path: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks._coldstart_child", side, mode, str(path), SESSION_ID],
        cwd=ROOT.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise BenchmarkError(f"the {side} {mode} child failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _measure(size: int, messages: Sequence[Message], quick: bool, folder: Path) -> list[object]:
    history = cycled(messages, size)
    ours_path, theirs_path = folder / f"ctxfold-{size}.db", folder / f"agents-{size}.db"
    _write_ctxfold(ours_path, history)
    peer = _agents_available()
    if peer:
        _write_agents(theirs_path, history)
    reps = 1 if quick else FULL_REPS
    ours: list[dict[str, Any]] = []
    theirs: list[dict[str, Any]] = []
    for _ in range(reps):  # interleaved, so that a busy spell on the machine hits both sides
        ours.append(_child("ctxfold", "time", ours_path))
        if peer:
            theirs.append(_child("agents", "time", theirs_path))
    ours_memory = [_child("ctxfold", "memory", ours_path) for _ in range(MEMORY_REPS)]
    theirs_memory = (
        [_child("agents", "memory", theirs_path) for _ in range(MEMORY_REPS)] if peer else []
    )
    for record in ours + theirs:
        if record["items"] != size:
            raise BenchmarkError(f"{record['side']} read {record['items']} items, not {size}")
    mine = summarize([r["load_ms"] for r in ours])
    read = summarize([r["messages_ms"] for r in ours])
    other = summarize([r["load_ms"] for r in theirs]) if theirs else None
    my_peak = _mib(ours_memory, "traced_peak_bytes")
    their_peak = _mib(theirs_memory, "traced_peak_bytes")
    return [
        size,
        rounded(mine.median),
        rounded(mine.range_percent),
        rounded(read.median),
        rounded(other.median) if other else UNAVAILABLE,
        rounded(other.range_percent) if other else UNAVAILABLE,
        ratio(mine.median, other.median) if other else UNAVAILABLE,
        my_peak,
        their_peak,
        ratio(my_peak, their_peak),
        _mib(ours, "rss_growth_bytes"),
        _mib(theirs, "rss_growth_bytes"),
        rounded(summarize([r["imports_ms"] for r in ours]).median),
        rounded(summarize([r["imports_ms"] for r in theirs]).median) if theirs else UNAVAILABLE,
        reps,
    ]


def _mib(records: Sequence[dict[str, Any]], key: str) -> float | str:
    values = [r[key] for r in records if key in r]
    return rounded(summarize(values).median / MIB) if values else UNAVAILABLE


def run(quick: bool = False) -> dict[str, Any]:
    """One row per session size: a new process's load time and peak memory, both sides."""
    messages, source = pool()
    sizes = QUICK_SIZES if quick else FULL_SIZES
    with tempfile.TemporaryDirectory() as folder:
        rows = [_measure(size, messages, quick, Path(folder)) for size in sizes]
    notes = [
        f"Sessions of N message events cycled from {source}, written beforehand (not timed) "
        f"in appends of {SETUP_BATCH:,} messages: `Session.append` into a ctxfold SQLiteStore "
        "file, each followed by the budget check an agent makes (`should_compact`, which counts "
        "the new messages; nothing is compacted), so the session keeps its checkpoint with the "
        "counts; `add_items` into an agents.SQLiteSession file.",
        "ctxfold ms: in a new process, `SQLiteStore(path)`, `store.session(id, counter=c)`, "
        "`session.messages()`, then `compactor.should_compact(session)` and "
        "`compactor.estimate(session)` with Compactor(Budget.for_model('gpt-4o'), counter=c), "
        "c = counter('auto'). 'Of which messages()' is the part up to the messages. agents ms: "
        "in a new process, `SQLiteSession(id, path)` and `await session.get_items()` (no "
        "budget check exists there).",
        "Imports, and building the counter (loading the o200k tokenizer), are timed apart "
        "before the clock starts: paid once per process whatever is loaded.",
        f"Times are medians of {plural(1 if quick else FULL_REPS, 'process', 'processes')} "
        "per side, run in turn; range % is (slowest - fastest) / median. Ratio above 1: "
        "ctxfold is slower.",
        "Traced peak: tracemalloc's peak over the load, in a separate process per side "
        f"({MEMORY_REPS} each). It counts what Python allocates for the load alone, the same "
        "way for both sides, whatever each imported before; it does not see memory that C "
        "code takes with its own allocator (SQLite's page cache, the tokenizer's buffers). "
        "RSS growth covers those: the resident set's high-water mark after the load minus the "
        "resident set before it (peak reset through /proc/self/clear_refs), from the timed "
        "processes; it also moves with the allocator's reuse of freed memory, so treat it as "
        "a cross-check.",
    ]
    if not _agents_available():
        notes.append("openai-agents is not installed: agents.SQLiteSession was not measured.")
    return {
        "title": "Cold start: a new process loads a session and checks the budget",
        "columns": COLUMNS,
        "rows": rows,
        "notes": notes,
    }
