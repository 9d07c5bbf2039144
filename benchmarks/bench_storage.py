"""Storage: append throughput and the cost of reading a whole session back.

ctxfold's SQLite and PostgreSQL stores against the OpenAI Agents SDK's `agents.SQLiteSession`,
on the same messages: the shared transcripts, cycled to the sizes measured (generated messages
when the transcripts are absent). Every ratio is "how many times faster than
agents.SQLiteSession" (above 1 means ctxfold is faster).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from itertools import cycle, islice
from pathlib import Path
from typing import Any

from ctxfold.events import NewEvent
from ctxfold.messages import Message
from ctxfold.messages.openai import to_openai
from ctxfold.storage import SQLiteStore
from ctxfold.storage.base import StoreBase

TRANSCRIPTS = Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts"
SETUP_BATCH = 1000


def _messages() -> list[Message]:
    from ctxfold.messages.jsonl import read_jsonl

    paths = sorted(TRANSCRIPTS.glob("*.jsonl")) if TRANSCRIPTS.is_dir() else []
    found = [m for path in paths for m in read_jsonl(path)]
    if found:
        return found
    return [
        Message("user" if n % 2 == 0 else "assistant", f"message {n}: " + "lorem ipsum " * 60)
        for n in range(500)
    ]


class _Ctxfold:
    """A ctxfold store, driven through the same operations as the SDK's session."""

    def __init__(self, name: str, open_store: Callable[[], StoreBase]) -> None:
        self.name = name
        self._open = open_store
        self.store = open_store()
        self.sid = f"bench-{uuid.uuid4().hex}"
        self.session: Any = None

    def append_one(self, message: Message) -> None:
        self.store.append(self.sid, [NewEvent.message(message)])

    def append_many(self, messages: list[Message]) -> None:
        self.store.append(self.sid, [NewEvent.message(m) for m in messages])

    def read_all(self) -> int:
        return len(self.store.read(self.sid))

    def first_messages(self) -> int:
        # A new Session over the same store: what a process that just started pays.
        self.session = self.store.session(self.sid)
        return len(self.session.messages())

    def per_turn(self, message: Message) -> int:
        self.session.append(message)
        return len(self.session.messages())

    def new_session(self) -> None:
        self.sid = f"bench-{uuid.uuid4().hex}"

    def close(self) -> None:
        self.store.close()


class _Agents:
    """agents.SQLiteSession in a file, its async calls run to completion one at a time."""

    name = "agents.SQLiteSession"

    def __init__(self, path: Path) -> None:
        from agents import SQLiteSession

        self._cls = SQLiteSession
        self._path = path
        self.loop = asyncio.new_event_loop()
        self.new_session()

    def new_session(self) -> None:
        self.session = self._cls(f"bench-{uuid.uuid4().hex}", self._path)

    def _run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def append_one(self, message: Message) -> None:
        self._run(self.session.add_items(to_openai([message])))

    def append_many(self, messages: list[Message]) -> None:
        self._run(self.session.add_items(to_openai(messages)))

    def read_all(self) -> int:
        return len(self._run(self.session.get_items()))

    def first_messages(self) -> int:
        return self.read_all()

    def per_turn(self, message: Message) -> int:
        # The SDK has no incremental view: each turn reads the whole history again.
        self.append_one(message)
        return self.read_all()

    def close(self) -> None:
        self.session.close()
        self.loop.close()


def _timed(action: Callable[[], object], repeat: int) -> float:
    """Median seconds of `repeat` runs."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _fill(backend: Any, messages: Iterator[Message], count: int) -> None:
    while count > 0:
        size = min(SETUP_BATCH, count)
        backend.append_many(list(islice(messages, size)))
        count -= size


def _measure(backend: Any, corpus: list[Message], quick: bool) -> dict[tuple[str, int], float]:
    results: dict[tuple[str, int], float] = {}
    stream = cycle(corpus)
    singles = 100 if quick else 1000
    start = time.perf_counter()
    for message in islice(stream, singles):
        backend.append_one(message)
    results[("append one message at a time (messages/s)", singles)] = singles / (
        time.perf_counter() - start
    )
    backend.new_session()
    batched = 1000 if quick else 10_000
    start = time.perf_counter()
    for _ in range(batched // 100):
        backend.append_many(list(islice(stream, 100)))
    results[("append in batches of 100 (messages/s)", batched)] = batched / (
        time.perf_counter() - start
    )
    have = 0
    backend.new_session()
    for size in (1000, 10_000) if quick else (1000, 10_000, 100_000):
        _fill(backend, stream, size - have)
        have = size
        repeat = 1 if size >= 100_000 else 3
        results[("read every event (ms)", size)] = 1000 * _timed(backend.read_all, repeat)
        results[("history for a new process (ms)", size)] = 1000 * _timed(
            backend.first_messages, repeat
        )
        turn = next(stream)
        results[("per turn: append one, then history (ms)", size)] = 1000 * _timed(
            lambda message=turn: backend.per_turn(message), 1
        )
        have += 1
    return results


def _postgres(url: str, schema: str) -> StoreBase:
    from ctxfold.storage import PostgresStore

    return PostgresStore(url, schema=schema)


def run(quick: bool = False) -> dict[str, Any]:
    """Measure every backend on the same messages; one row per operation and size."""
    corpus = _messages()
    notes = [
        f"Messages: {len(corpus)} from the shared transcripts (OpenAI chat format), cycled.",
        "Ratios are how many times faster than agents.SQLiteSession (above 1: ctxfold is faster).",
        "Both SQLite stores are files in WAL mode with SQLite's default synchronous=FULL.",
        f"Sessions are filled for the read rows in appends of {SETUP_BATCH} messages (setup, "
        "not timed); reads are the median of 3 runs, 1 run at 100,000.",
        "'history for a new process' is a new ctxfold Session's messages() (the projection "
        "replayed from the log) and get_items() for the SDK.",
        "'per turn' appends one message and then asks for the history: ctxfold's Session folds "
        "in only the new event; the SDK reads the whole session again.",
    ]
    load = os.getloadavg()[0]
    notes.append(
        f"Machine: {os.cpu_count()} CPUs, 1-minute load {load:.1f} when the run began; other "
        "work on the machine shows up most in the single-append rows (each waits on an fsync)."
    )
    url = os.environ.get("CTXFOLD_POSTGRES_URL")
    schema = f"bench_{uuid.uuid4().hex}"
    with tempfile.TemporaryDirectory() as folder:
        backends: list[Any] = [
            _Ctxfold("ctxfold SQLite", lambda: SQLiteStore(Path(folder) / "ctxfold.db"))
        ]
        if url:
            backends.append(_Ctxfold("ctxfold PostgreSQL", lambda: _postgres(url, schema)))
        else:
            notes.append("CTXFOLD_POSTGRES_URL is not set: PostgreSQL was not measured.")
        backends.append(_Agents(Path(folder) / "agents.db"))
        measured = {}
        try:
            for backend in backends:
                measured[backend.name] = _measure(backend, corpus, quick)
        finally:
            for backend in backends:
                backend.close()
            if url:
                _drop_schema(url, schema)
    return _table(measured, notes)


def _drop_schema(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _table(measured: dict[str, dict[tuple[str, int], float]], notes: list[str]) -> dict[str, Any]:
    names = list(measured)
    ours = [n for n in names if n.startswith("ctxfold")]
    baseline = measured["agents.SQLiteSession"]
    columns = ["operation", "messages", *names, *(f"{n} ratio" for n in ours)]
    rows = []
    for key, reference in baseline.items():
        operation, size = key
        higher_is_better = operation.endswith("(messages/s)")
        values = [round(measured[n][key], 1) for n in names]
        ratios = [
            round(
                measured[n][key] / reference if higher_is_better else reference / measured[n][key],
                2,
            )
            for n in ours
        ]
        rows.append([operation, size, *values, *ratios])
    return {"title": "Storage: appends and reads", "columns": columns, "rows": rows, "notes": notes}
