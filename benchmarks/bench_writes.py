"""Writes: messages per second through `Session.append`, against `agents.SQLiteSession.add_items`.

Two ways an agent writes: one message at a time (each its own durable transaction) and batches
of 100. ctxfold goes through its public API, `Session.append`, over a `SQLiteStore` file (and a
`PostgresStore` when `CTXFOLD_POSTGRES_URL` is set); the OpenAI Agents SDK's `SQLiteSession`
gets the same messages in its own format through `add_items`. Every row says the durability it
ran with, read from the live connection: a faster write at a weaker `synchronous` level would
be no win.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks._common import UNAVAILABLE, cycled, disk_note, pool, ratio, rounded, summarize
from ctxfold.messages import Message
from ctxfold.messages.openai import to_openai
from ctxfold.storage import SQLiteStore, checks
from ctxfold.storage.base import StoreBase

FULL_REPS = 5
QUICK_REPS = 2
SINGLES = (500, 20)
"""Messages appended one at a time per repetition: (full run, quick run)."""
BATCHES = (50, 3)
"""Batches of `BATCH` messages per repetition: (full run, quick run)."""
BATCH = 100
PEER = "agents.SQLiteSession"
_LEVELS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}

COLUMNS = [
    "operation",
    "store",
    "durability",
    "messages per rep",
    "reps",
    "messages/s",
    "range %",
    f"× {PEER}",
]

Writer = Callable[[Sequence[Message]], object]


class _Ctxfold:
    """ctxfold's public write path: a fresh `Session` per repetition, `append` per call."""

    def __init__(self, name: str, store: StoreBase, durability: str) -> None:
        self.name = name
        self.store = store
        self.durability = durability
        self.session: Any = None

    def fresh(self) -> None:
        self.session = self.store.session(f"writes-{uuid.uuid4().hex}")

    def write(self, messages: Sequence[Message]) -> None:
        self.session.append(messages[0] if len(messages) == 1 else list(messages))

    def close(self) -> None:
        self.store.close()


class _Agents:
    """`agents.SQLiteSession` in a file: a fresh session per repetition, `add_items` per call,
    driven to completion on one event loop (the SDK's call runs in a worker thread)."""

    name = PEER

    def __init__(self, path: Path) -> None:
        from agents import SQLiteSession

        self._cls = SQLiteSession
        self._path = path
        self.loop = asyncio.new_event_loop()
        self.session: Any = None
        self.fresh()
        self.durability = _sdk_durability(self.session)

    def fresh(self) -> None:
        if self.session is not None:
            self.session.close()
        self.session = self._cls(f"writes-{uuid.uuid4().hex}", self._path)

    def write(self, items: Sequence[Any]) -> None:
        self.loop.run_until_complete(self.session.add_items(list(items)))

    def close(self) -> None:
        self.session.close()
        self.loop.close()


class _Bare:
    """No session, no checks: each call encodes its messages as ctxfold stores them (one JSON
    row each, through the encoder a session's appends use) and inserts them with one
    `executemany` in one transaction, into a table of the same shape as ctxfold's log, at the
    durability both stores use. The least that writing this format costs, so its × column is
    the ceiling of any store that keeps one JSON row per message."""

    name = "bare encode + executemany (no store)"

    def __init__(self, path: Path) -> None:
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = FULL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, "
            "type TEXT NOT NULL, data TEXT NOT NULL, created_at REAL NOT NULL, "
            "PRIMARY KEY (session_id, seq))"
        )
        self.durability = _sqlite_durability(self._conn)
        self._session = ""
        self._seq = 0
        # The encoder a session's appends of plain messages go through (orjson with the fast
        # extra, else the standard one's plain path): the same text as json.dumps, faster.
        self._encode = checks._STRINGS or checks._encode_plain

    def fresh(self) -> None:
        self._session, self._seq = f"writes-{uuid.uuid4().hex}", 0

    def write(self, messages: Sequence[Message]) -> None:
        encode = self._encode
        self._insert([encode({"message": m.to_dict()}) for m in messages])

    def _insert(self, texts: Sequence[str]) -> None:
        now, first, sid = time.time(), self._seq + 1, self._session
        rows = [(sid, first + i, "message", text, now) for i, text in enumerate(texts)]
        self._conn.execute("BEGIN IMMEDIATE")
        self._conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?)", rows)
        self._conn.execute("COMMIT")
        self._seq += len(rows)

    def close(self) -> None:
        self._conn.close()


class _Floor(_Bare):
    """`_Bare` with the encoding done before the clock: each call only inserts rows whose text
    is ready, with one `executemany` in one transaction, and commits. What the disk and SQLite
    alone cost to keep these bytes at this durability, so its × column bounds any store that
    writes one row per message, whatever its encoder."""

    name = "rows encoded beforehand + executemany (no store)"

    def prepare(self, chunks: Sequence[Sequence[Message]]) -> list[list[str]]:
        encode = self._encode
        return [[encode({"message": m.to_dict()}) for m in chunk] for chunk in chunks]

    def write(self, texts: Sequence[Any]) -> None:
        self._insert(texts)


def _encoder_name() -> str:
    return "orjson (the fast extra)" if checks._STRINGS is not None else "the standard library's"


def _sqlite_durability(conn: sqlite3.Connection) -> str:
    level = conn.execute("PRAGMA synchronous").fetchone()[0]
    journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
    return f"synchronous={_LEVELS.get(level, level)}, journal={journal}"


def _ctxfold_durability(store: SQLiteStore) -> str:
    # Read from a connection of the store itself: the level is set per connection.
    try:
        with store._connection() as conn:
            return _sqlite_durability(conn)
    except AttributeError:
        return "unknown (the store's connection could not be reached)"


def _sdk_durability(session: Any) -> str:
    # The SDK sets journal_mode=WAL and leaves synchronous at SQLite's compiled-in default.
    try:
        with session._locked_connection() as conn:
            return _sqlite_durability(conn)
    except AttributeError:
        return "unknown (the session's connection could not be reached)"


def _postgres(url: str, schema: str) -> _Ctxfold:
    from ctxfold.storage import PostgresStore

    store = PostgresStore(url, schema=schema)
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SHOW synchronous_commit").fetchone()
    return _Ctxfold("ctxfold PostgreSQL", store, f"synchronous_commit={row[0] if row else '?'}")


def _drop_schema(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _rate(backend: Any, chunks: Sequence[Sequence[Any]]) -> float:
    """Messages per second writing `chunks` into a fresh session, one call per chunk."""
    backend.fresh()
    count = sum(len(c) for c in chunks)
    started = time.perf_counter()
    for chunk in chunks:
        backend.write(chunk)
    return count / (time.perf_counter() - started)


def _chunks(messages: Sequence[Message], size: int, count: int, start: int) -> list[list[Message]]:
    taken = cycled(messages, size * count, start=start)
    return [taken[i : i + size] for i in range(0, len(taken), size)]


def run(quick: bool = False) -> dict[str, Any]:
    """Messages per second for each store and way of writing; medians over repetitions."""
    messages, source = pool()
    reps = QUICK_REPS if quick else FULL_REPS
    singles = SINGLES[1] if quick else SINGLES[0]
    batches = BATCHES[1] if quick else BATCHES[0]
    plans = [
        ("append one message at a time", _chunks(messages, 1, singles, 0)),
        (f"append in batches of {BATCH}", _chunks(messages, BATCH, batches, singles)),
    ]
    url = os.environ.get("CTXFOLD_POSTGRES_URL")
    schema = f"bench_writes_{uuid.uuid4().hex}"
    notes: list[str] = []
    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(Path(folder) / "ctxfold.db")
        backends: list[Any] = [_Ctxfold("ctxfold SQLite", store, _ctxfold_durability(store))]
        if url:
            backends.append(_postgres(url, schema))
        else:
            notes.append("CTXFOLD_POSTGRES_URL is not set: PostgreSQL was not measured.")
        try:
            backends.append(_Agents(Path(folder) / "agents.db"))
        except ImportError:
            notes.append(f"openai-agents is not installed: {PEER} was not measured.")
        backends.append(_Bare(Path(folder) / "bare.db"))
        backends.append(_Floor(Path(folder) / "floor.db"))
        where = disk_note(folder)
        try:
            rates = _measure(backends, plans, reps)
        finally:
            for backend in backends:
                backend.close()
            if url:
                _drop_schema(url, schema)
    rows = []
    for operation, chunks in plans:
        peer = rates.get((operation, PEER))
        for backend in backends:
            mine = rates[(operation, backend.name)]
            rows.append(
                [
                    operation,
                    backend.name,
                    backend.durability,
                    sum(len(c) for c in chunks),
                    reps,
                    rounded(mine.median, 0),
                    rounded(mine.range_percent),
                    ratio(mine.median, peer.median) if peer else UNAVAILABLE,
                ]
            )
    notes = [
        f"Messages cycle through {source}; each repetition writes into a new session of the "
        f"same file ({where}).",
        "ctxfold: `session.append(message)` one at a time, `session.append(list_of_100)` in "
        f"batches, on a Session of the store. {PEER}: `await session.add_items([item])` and "
        f"`await session.add_items(items_100)` with the same messages in OpenAI chat format "
        "(converted beforehand, not timed), each call run to completion on one event loop.",
        "'bare encode + executemany' is no store: each call encodes its messages into "
        "ctxfold's stored form (one JSON row per message: `Message.to_dict` and the encoder "
        f"ctxfold's appends of plain messages use, {_encoder_name()}; the same text as "
        "json.dumps) "
        "and inserts them with one executemany in one transaction, into a table of the same "
        "shape as ctxfold's log, at synchronous=FULL in WAL mode; no session, no checks, no "
        "projection. Its × column is the ceiling for a store that keeps this format.",
        "'rows encoded beforehand' is the same table and transaction with the JSON text made "
        "before the clock: only SQLite's insert and the commit's flush are timed. Its × column "
        "bounds any store that writes one row per message at this durability, whatever its "
        "encoder.",
        "Durability is read from each side's own connection (PRAGMA synchronous and "
        "journal_mode; PostgreSQL's synchronous_commit). FULL flushes the write-ahead log at "
        "every commit, so an acknowledged append survives a power cut; NORMAL survives a crash "
        "of the process but not of the machine.",
        f"Medians over {reps} repetitions per row, interleaved between the stores; range % is "
        f"(fastest - slowest) / median. × {PEER}: ctxfold's median rate over the SDK's (above "
        "1, ctxfold writes faster).",
        *notes,
    ]
    return {
        "title": f"Writes: Session.append against {PEER}.add_items",
        "columns": COLUMNS,
        "rows": rows,
        "notes": notes,
    }


def _measure(
    backends: Sequence[Any], plans: Sequence[tuple[str, Sequence[Sequence[Message]]]], reps: int
) -> dict[tuple[str, str], Any]:
    samples: dict[tuple[str, str], list[float]] = {}
    for operation, chunks in plans:
        converted = [to_openai(chunk) for chunk in chunks]
        for _ in range(reps):  # interleaved, so that a busy spell hits every store alike
            for backend in backends:
                data = converted if backend.name == PEER else chunks
                prepare = getattr(backend, "prepare", None)
                if prepare is not None:  # work the row's definition leaves out of the clock
                    data = prepare(data)
                samples.setdefault((operation, backend.name), []).append(_rate(backend, data))
    return {key: summarize(values) for key, values in samples.items()}
