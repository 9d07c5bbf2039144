"""What the framework integration tests share: stores that can be reopened as a new process
would (a new connection to the same data), the budget of the long runs, and token counts of
what a model received."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

from ctxfold import Budget, Compactor, Message
from ctxfold.events import MESSAGE
from ctxfold.session import Session
from ctxfold.storage import PostgresStore, SQLiteStore
from ctxfold.storage.base import EventStore
from ctxfold.testing import FixedCounter

WINDOW = 3_000
"""Tokens (FixedCounter: one per word) of the small window the long runs must stay within."""
TOOL_WORDS = 120
"""Words of every tool result in the long runs: a few turns fill the window."""
TASKS = 10
"""User tasks in the first stretch of a long run; each makes three tool calls, then answers."""
MORE_TASKS = 2
"""Tasks the restarted process runs on top."""
CALLS_PER_TASK = 3


def budget() -> Budget:
    return Budget(window=WINDOW, max_output=500)


def compactor() -> Compactor:
    return Compactor(budget(), counter=FixedCounter())


def overflow_compactor() -> Compactor:
    """A compactor whose automatic trigger stays quiet in short runs (at 99% of the window),
    so only an overflow compacts, down to a fifth of the window."""
    budget = Budget(window=WINDOW, max_output=500, trigger=0.99, target=0.2)
    return Compactor(budget, counter=FixedCounter())


def tokens(messages: Iterable[Message], *extra_texts: str | None) -> int:
    """Tokens of a request, in the long runs' counter: its messages plus its instructions."""
    counter = FixedCounter()
    return sum(counter.count_message(m) for m in messages) + sum(
        counter.count_text(t) for t in extra_texts if t
    )


def tool_output(path: str) -> str:
    """A tool result of exactly `TOOL_WORDS` words that names the file it read."""
    return " ".join([f"{path}:"] + [f"line{i}" for i in range(TOOL_WORDS - 1)])


def logged_messages(session: Session) -> list[Message]:
    """Every message the log holds as a message event (originals only, no summaries)."""
    return [e.message for e in session.events() if e.type == MESSAGE]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def reopen(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], EventStore]]:
    """Opens a new connection to one store each time it is called, as a restarted process
    would; SQLite in a file, or PostgreSQL in a schema of its own."""
    opened: list[EventStore] = []
    if request.param == "sqlite":
        path = tmp_path / "ctxfold.db"

        def make() -> EventStore:
            store = SQLiteStore(str(path))
            opened.append(store)
            return store

        yield make
    else:
        url = request.getfixturevalue("postgres_url")
        schema = f"test_integrations_{uuid.uuid4().hex}"

        def make() -> EventStore:
            store = PostgresStore(url, schema=schema)
            opened.append(store)
            return store

        yield make
        import psycopg
        from psycopg import sql

        for store in opened:
            store.close()
        opened.clear()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    for store in opened:
        store.close()
