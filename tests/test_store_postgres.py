"""PostgresStore keeps the store contract, each test in a fresh schema that is dropped after."""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from ctxfold.errors import MissingDependencyError
from ctxfold.events import NewEvent
from ctxfold.storage import PostgresStore, StoreBase
from ctxfold.testing.store_contract import EventStoreContract

pytestmark = pytest.mark.postgres


@pytest.fixture
def schema(pg_schema: str) -> str:
    """A schema name no other test uses; dropped at teardown."""
    return pg_schema


class TestPostgres(EventStoreContract):
    persistent = True

    @pytest.fixture(autouse=True)
    def _schema(self, postgres_url: str, schema: str) -> None:
        self.url = postgres_url
        self.schema = schema

    def make_store(self) -> PostgresStore:
        return PostgresStore(self.url, schema=self.schema)

    def reopen(self, store: StoreBase) -> PostgresStore:
        store.close()
        return PostgresStore(self.url, schema=self.schema)


def _tables(url: str, schema: str) -> set[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
        ).fetchall()
    return {row[0] for row in rows}


def test_tables_go_in_the_named_schema(postgres_url: str, schema: str) -> None:
    """With `schema=`, the events and version tables are created in that schema."""
    with PostgresStore(postgres_url, schema=schema) as store:
        store.append("s", [NewEvent("turn")])
    assert _tables(postgres_url, schema) == {
        "events",
        "ctxfold_schema_version",
        "append_keys",
        "snapshots",
        "search_docs",
        "search_progress",
    }


def test_an_awkward_schema_name_is_quoted_safely(postgres_url: str) -> None:
    """A schema name with quotes, spaces and capitals is used as a name, never as SQL."""
    import psycopg
    from psycopg import sql

    name = f'We"ird Name; DROP TABLE x -- {uuid.uuid4().hex[:8]}'
    try:
        with PostgresStore(postgres_url, schema=name) as store:
            store.append("s", [NewEvent("turn", {"n": 1})])
            assert [e.data for e in store.read("s")] == [{"n": 1}]
        assert "events" in _tables(postgres_url, name)
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def test_stores_opening_a_new_schema_at_once_both_work(postgres_url: str, schema: str) -> None:
    """Six stores created at the same moment on a new schema all open and share one log."""
    barrier = threading.Barrier(6)
    stores: list[PostgresStore] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        barrier.wait()
        try:
            stores.append(PostgresStore(postgres_url, schema=schema, pool_size=1))
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert errors == []
        for n, store in enumerate(stores):
            store.append("s", [NewEvent("turn", {"n": n})])
        assert stores[0].last_seq("s") == 6
    finally:
        for store in stores:
            store.close()


def test_event_data_is_queryable_as_json(postgres_url: str, schema: str) -> None:
    """The data column is JSON that SQL can query, e.g. to audit compactions."""
    import psycopg
    from psycopg import sql

    with PostgresStore(postgres_url, schema=schema) as store:
        store.append("s", [NewEvent("compaction", {"strategy": "summarize", "first": 1})])
    with psycopg.connect(postgres_url) as conn:
        row = conn.execute(
            sql.SQL("SELECT data->>'strategy' FROM {} WHERE type = 'compaction'").format(
                sql.Identifier(schema, "events")
            )
        ).fetchone()
    assert row == ("summarize",)


def test_without_psycopg_the_error_says_what_to_install() -> None:
    """Without psycopg installed, building a PostgresStore says which extra to install."""
    code = (
        "import sys; sys.modules['psycopg'] = None; sys.modules['psycopg_pool'] = None\n"
        "from ctxfold.storage import PostgresStore\n"
        "try:\n"
        "    PostgresStore('postgresql://nowhere/db')\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == (
        f"{MissingDependencyError.__name__} PostgresStore needs psycopg: "
        "pip install 'ctxfold[postgres]'"
    )


def test_a_snapshot_commits_without_waiting_and_appends_still_wait(
    postgres_url: str, schema: str, tmp_path: Path
) -> None:
    """A snapshot is derived data, so its transaction commits with synchronous_commit off; the
    setting ends with that transaction, and the appends around it wait for the flush."""
    trace = tmp_path / "libpq.trace"
    with PostgresStore(postgres_url, schema=schema, pool_size=1) as store, trace.open("w") as out:
        store.append("s", [NewEvent("turn")])
        with store._connection("a test") as conn:  # the one connection every call below uses
            conn.pgconn.trace(out.fileno())  # libpq's own log of every message sent
        store.save_snapshot("s", 1, '{"n": 1}')
        store.append("s", [NewEvent("turn")])
        with store._connection("a test") as conn:
            conn.pgconn.untrace()
            assert conn.execute("SHOW synchronous_commit").fetchone()[0] == "on"
        assert store.load_snapshot("s") == (1, '{"n": 1}')
    sent = trace.read_text()
    assert sent.index("SET LOCAL synchronous_commit = off") < sent.index("snapshots")
    assert sent.count("synchronous_commit") == 1
