"""Empty stores of each kind for tests: where their files go, and the PostgreSQL schemas that
must be dropped afterwards so that runs never see each other's data; and a tap on a store's
reads, for tests that check how much of the log a read pulls."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxfold.events import Event
from ctxfold.storage import StoreBase

# The store kinds a parametrized fixture runs on; PostgreSQL carries its marker so that
# `-m "not postgres"` deselects it.
ALL_KINDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
SHARED_KINDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
"""The kinds that other processes can open too."""


def drop_schema(base_url: str, schema: str) -> None:
    """Drop a PostgreSQL schema and everything in it, if it exists."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(base_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def fresh_schema_name() -> str:
    """A schema name no other test uses."""
    return f"test_{uuid.uuid4().hex}"


def empty_store_url(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Yield a URL to an empty store of `kind` (memory, a SQLite file in `tmp_path`, or a fresh
    schema on the server at CTXFOLD_POSTGRES_URL), and drop the schema afterwards."""
    if kind == "memory":
        yield "memory://"
    elif kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'events.db'}"
    else:
        base: str = request.getfixturevalue("postgres_url")
        schema = fresh_schema_name()
        yield f"{base}{'&' if '?' in base else '?'}schema={schema}"
        drop_schema(base, schema)


def count_reads(store: StoreBase) -> list[int]:
    """Wrap ``store.stream`` so that every read appends how many events it returned to the list
    this gives back (the store is changed in place; the list starts empty)."""
    reads: list[int] = []
    original = store.stream

    def counting_stream(session_id: str, after: int = 0) -> Iterator[Event]:
        events = list(original(session_id, after))
        reads.append(len(events))
        return iter(events)

    store.stream = counting_stream  # type: ignore[method-assign]
    return reads
