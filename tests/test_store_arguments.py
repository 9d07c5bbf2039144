"""Stores refuse arguments they cannot use with one clear error, before any file or server."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxfold.errors import InvalidInputError, StoreUnavailableError
from ctxfold.messages import Message
from ctxfold.storage import MemoryStore, PostgresStore, SQLiteStore, open_store
from ctxfold.storage.checks import MAX_SEQ
from tests._stores import drop_schema, fresh_schema_name


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"path": None}, "needs a file path or ':memory:', not NoneType None"),
        ({"path": 5}, "not int 5"),
        ({"path": ":memory:", "busy_timeout": "x"}, "busy_timeout must be a number of seconds"),
        ({"path": ":memory:", "busy_timeout": -1}, "busy_timeout"),
        ({"path": ":memory:", "poll_interval": "x"}, "poll_interval"),
        ({"path": ":memory:", "synchronous": 2}, "synchronous must be one of"),
    ],
)
def test_sqlite_store_arguments_of_the_wrong_kind_are_refused(
    kwargs: dict[str, object], says: str
) -> None:
    """A path that is no path, or a timeout that is no number of seconds, is refused by name."""
    with pytest.raises(InvalidInputError, match=says):
        SQLiteStore(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_a_seq_beyond_what_a_store_holds_is_refused_alike_everywhere(
    store: str, tmp_path: Path
) -> None:
    """`after` or `expected_seq` above the largest seq a store can hold is refused with the
    bound named, on every store, rather than an overflow from the database driver."""
    opened = MemoryStore() if store == "memory" else SQLiteStore(tmp_path / "a.db")
    with opened:
        session = opened.session("s")
        session.append(Message("user", "hi"))
        assert session.events(after=MAX_SEQ) == []
        with pytest.raises(InvalidInputError, match=f"from 0 to {MAX_SEQ}"):
            session.events(after=MAX_SEQ + 1)
        with pytest.raises(InvalidInputError, match="expected_seq"):
            session.append(Message("user", "x"), expected_seq=10**30)
        assert opened.last_seq("s") == 1


def test_postgres_store_needs_a_url() -> None:
    """PostgresStore(None) says what it needs."""
    with pytest.raises(InvalidInputError, match="PostgresStore needs a postgresql:// URL"):
        PostgresStore(None)  # type: ignore[arg-type]


def test_postgres_store_takes_the_schema_from_its_url(postgres_url: str) -> None:
    """`PostgresStore(url)` reads a ``schema`` query parameter as `open_store` does; naming two
    different schemas is refused."""
    schema = fresh_schema_name()
    joined = f"{postgres_url}{'&' if '?' in postgres_url else '?'}schema={schema}"
    try:
        with PostgresStore(joined) as store:
            assert store.schema == schema
            store.session("s").append(Message("user", "hi"))
        with PostgresStore(postgres_url, schema=schema) as same:
            assert same.last_seq("s") == 1
        with pytest.raises(InvalidInputError, match=r"names schema .* and schema= names"):
            PostgresStore(joined, schema="other")
    finally:
        drop_schema(postgres_url, schema)


def test_a_reader_of_a_schema_with_no_ctxfold_tables_makes_nothing(postgres_url: str) -> None:
    """`open_store(url, create=False)` (what the reading CLI commands use) of a schema that holds
    no ctxfold tables is a StoreUnavailableError naming it, and neither the schema nor a table is
    made; a schema that has them opens to read."""
    psycopg = pytest.importorskip("psycopg")
    schema = fresh_schema_name()
    joined = f"{postgres_url}{'&' if '?' in postgres_url else '?'}schema={schema}"
    try:
        with pytest.raises(StoreUnavailableError, match=r"no ctxfold tables in .*nothing was"):
            open_store(joined, create=False)
        with psycopg.connect(postgres_url) as conn:
            found = conn.execute(
                "SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", (schema,)
            ).fetchone()
        assert found is None
        with open_store(joined) as writer:
            writer.session("s").append(Message("user", "hi"))
        with open_store(joined, create=False) as reader:
            assert reader.last_seq("s") == 1
    finally:
        drop_schema(postgres_url, schema)
