"""The storage promises of docs/guarantees.md, on every store, with real files and servers.

The contract suite (`ctxfold.testing.store_contract`) checks each store method by method; the
tests here keep the promises end to end: retries across processes and restarts, the session-id
limit through a `Session`, and derived data (the search index, snapshots) that can be missing or
broken without costing anything but speed.
"""

from __future__ import annotations

import logging
import multiprocessing
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxfold.errors import InvalidInputError
from ctxfold.events import NewEvent
from ctxfold.messages import Message
from ctxfold.storage import MAX_SESSION_ID_BYTES, StoreBase, open_store
from tests._stores import SHARED_KINDS, drop_schema, empty_store_url

SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture(params=SHARED_KINDS)
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL to an empty store that other processes and connections can open too."""
    yield from empty_store_url(request.param, request, tmp_path)


def _message(text: str) -> NewEvent:
    return NewEvent.message(Message("user", text))


# -- idempotent-retry --------------------------------------------------------------------------


@pytest.mark.guarantee("idempotent-retry")
def test_a_retry_after_a_lost_acknowledgement_lands_once(store_url: str) -> None:
    """The caller never saw the first append's answer and sends it again with the same key,
    before and after the store restarts: the message is in the log once."""
    with open_store(store_url) as store:
        store.append("chat", [_message("hello")])
        store.append("chat", [_message("run the tests")], idempotency_key="turn-2")  # lost ack
        retried = store.append("chat", [_message("run the tests")], idempotency_key="turn-2")
        assert [e.seq for e in retried] == [2]
        if store_url != "memory://":
            with open_store(store_url) as again:
                after_restart = again.append(
                    "chat", [_message("run the tests")], idempotency_key="turn-2"
                )
                assert after_restart == retried
        texts = [e.message.content for e in store.read("chat")]
    assert texts == ["hello", "run the tests"]


def _append_keyed(url: str, barrier: Any, results: Any) -> None:
    with open_store(url) as store:
        barrier.wait()
        events = store.append("chat", [_message("once"), _message("only")], idempotency_key="k")
        results.put([e.seq for e in events])


@pytest.mark.guarantee("idempotent-retry")
def test_processes_sending_one_keyed_append_at_once_land_it_once(shared_url: str) -> None:
    """Four processes released together with the same keyed append: it lands once, and each
    process gets back the same seqs."""
    store_url = shared_url
    open_store(store_url).close()  # create the schema before the race
    barrier, results = SPAWN.Barrier(4), SPAWN.Queue()
    processes = [
        SPAWN.Process(target=_append_keyed, args=(store_url, barrier, results)) for _ in range(4)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [p.exitcode for p in processes] == [0] * 4
    assert [results.get(timeout=10) for _ in range(4)] == [[1, 2]] * 4
    with open_store(store_url) as store:
        assert [e.message.content for e in store.read("chat")] == ["once", "only"]


# -- session-id-limit --------------------------------------------------------------------------


@pytest.mark.guarantee("session-id-limit")
def test_session_ids_up_to_the_limit_work_and_longer_ones_write_nothing(store_url: str) -> None:
    """A 1,024-byte id works through a Session; one byte more is refused by the Session's first
    append, naming the limit, and the store holds nothing for it."""
    longest = "s" * MAX_SESSION_ID_BYTES
    with open_store(store_url) as store:
        session = store.session(longest)
        session.append([Message("user", "fits")])
        assert [m.content for m in session.messages()] == ["fits"]
        too_long = store.session(longest + "s")
        with pytest.raises(InvalidInputError, match=r"1,025 bytes.*limit is 1,024 bytes"):
            too_long.append([Message("user", "does not fit")])
        assert store.sessions() == [longest]


# -- derived-data-only-costs-speed -------------------------------------------------------------

V1_SQLITE = """
CREATE TABLE events (
    session_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL,
    created_at REAL NOT NULL, PRIMARY KEY (session_id, seq)
);
CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version VALUES (1);
"""

OLD_ROWS = [
    ("old", 1, "message", '{"message":{"role":"user","content":"deploy to staging-7"}}'),
    ("old", 2, "turn", '{"content":"staging-7 in a turn is not a message"}'),
    (
        "old",
        3,
        "message",
        '{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1",'
        '"name":"kubectl_apply","arguments":"{\\"cluster\\": \\"staging-7\\"}"}]}}',
    ),
    ("other", 1, "message", '{"message":{"role":"user","content":"staging-7 elsewhere"}}'),
    ("old", 4, "message", '{"message": "not the shape a message has"}'),
]


@pytest.mark.guarantee("derived-data-only-costs-speed")
def test_a_sqlite_file_from_before_search_is_indexed_when_opened(tmp_path: Path) -> None:
    """A database written before the search index existed gets every message indexed by the
    migration, and later appends are indexed alike."""
    path = tmp_path / "v1.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(V1_SQLITE)
        conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, 0.0)", OLD_ROWS)
    conn.close()
    with open_store(f"sqlite:///{path}") as store:
        assert sorted(h.seq for h in store.search("old", "staging-7")) == [1, 3]
        assert [h.seq for h in store.search("old", "kubectl_apply")] == [3]
        store.append("old", [_message("staging-7 again")])
        assert store.search("old", "staging-7")[0].seq == 5
        assert len(store.read("old")) == 5


@pytest.mark.postgres
@pytest.mark.guarantee("derived-data-only-costs-speed")
def test_a_postgres_schema_from_before_search_is_indexed_when_opened(postgres_url: str) -> None:
    """The same for PostgreSQL: a version-1 schema's messages are searchable once opened."""
    import psycopg
    from psycopg import sql

    schema = f"test_{uuid.uuid4().hex}"
    try:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {} (session_id text NOT NULL, seq bigint NOT NULL, type text "
                    "NOT NULL, data json NOT NULL, created_at double precision NOT NULL, "
                    "PRIMARY KEY (session_id, seq))"
                ).format(sql.Identifier(schema, "events"))
            )
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {} (version integer PRIMARY KEY, applied_at timestamptz NOT "
                    "NULL DEFAULT now())"
                ).format(sql.Identifier(schema, "ctxfold_schema_version"))
            )
            conn.execute(
                sql.SQL("INSERT INTO {} (version) VALUES (1)").format(
                    sql.Identifier(schema, "ctxfold_schema_version")
                )
            )
            for row in OLD_ROWS:
                conn.execute(
                    sql.SQL("INSERT INTO {} VALUES (%s, %s, %s, %s, 0.0)").format(
                        sql.Identifier(schema, "events")
                    ),
                    row,
                )
        with open_store(f"{postgres_url}?schema={schema}") as store:
            assert sorted(h.seq for h in store.search("old", "staging-7")) == [1, 3]
            assert [h.seq for h in store.search("old", "kubectl_apply")] == [3]
    finally:
        drop_schema(postgres_url, schema)


def _drop_snapshot_table(store_url: str) -> None:
    if store_url.startswith("sqlite"):
        with sqlite3.connect(store_url.removeprefix("sqlite:///")) as conn:
            conn.execute("DROP TABLE snapshots")
        conn.close()
        return
    import psycopg
    from psycopg import sql

    base, schema = store_url.split("?schema=")
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(schema, "snapshots")))


@pytest.mark.guarantee("derived-data-only-costs-speed")
def test_a_lost_snapshot_table_costs_nothing_but_the_snapshot(
    shared_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """With the snapshot table gone from under a running store, appends, reads and searches
    work, a load finds no snapshot, and a save logs a warning instead of raising."""
    store_url = shared_url
    with open_store(store_url) as store:
        store.append("s", [_message("before")])
        store.save_snapshot("s", 1, '{"v": 1}')
        _drop_snapshot_table(store_url)
        with caplog.at_level(logging.WARNING, logger="ctxfold.storage"):
            store.save_snapshot("s", 1, '{"v": 2}')
        assert "snapshot" in caplog.text
        assert store.load_snapshot("s") is None
        store.drop_snapshots("s")
        store.append("s", [_message("after")])
        assert [e.message.content for e in store.read("s")] == ["before", "after"]
        assert [h.seq for h in store.search("s", "after")] == [2]


def test_every_store_is_one_base_class() -> None:
    """`EventStore` is the same class as `StoreBase`: one seam for every store."""
    from ctxfold.storage import EventStore

    assert EventStore is StoreBase
    for url in ("memory://", "sqlite:///:memory:"):
        with open_store(url) as store:
            assert isinstance(store, EventStore)
