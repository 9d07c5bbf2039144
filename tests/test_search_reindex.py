"""A search index built by the previous schema (tool-call arguments indexed as raw JSON text) is
rebuilt when the store opens, so a word after an escaped line break is found in old logs too."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path

import pytest

from ctxfold.events import NewEvent
from ctxfold.messages import Message, ToolCall
from ctxfold.storage import PostgresStore, SQLiteStore
from ctxfold.storage.search import index_words
from ctxfold.storage.sqlite_schema import session_token

ARGUMENTS = '{"path": "src/app.py", "text": "import os\\nfrom numpy import array"}'
OLD_TEXT = "write_file\n" + ARGUMENTS  # what version 4 indexed: the arguments as raw JSON
MESSAGE = NewEvent.message(Message("assistant", None, (ToolCall("c1", "write_file", ARGUMENTS),)))


def test_an_old_sqlite_index_is_rebuilt(tmp_path: Path) -> None:
    """A SQLite file whose index holds version 4's words finds the message after reopening."""
    path = tmp_path / "events.db"
    with SQLiteStore(path) as store:
        store.append("s", [MESSAGE])
        assert [h.seq for h in store.search("s", "from numpy import array")] == [1]
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DELETE FROM search_docs")
    conn.execute("INSERT INTO search_index (search_index) VALUES ('delete-all')")
    conn.execute("INSERT INTO search_docs (docid, session_id, seq) VALUES (1, 's', 1)")
    conn.execute(
        "INSERT INTO search_index (rowid, sess, body) VALUES (1, ?, ?)",
        (session_token("s"), OLD_TEXT),
    )
    conn.execute("DELETE FROM schema_version WHERE version = 5")
    conn.close()
    with SQLiteStore(path) as store:
        assert [h.seq for h in store.search("s", "from numpy import array")] == [1]
        assert [h.seq for h in store.search("s", "src/app.py")] == [1]


@pytest.mark.postgres
def test_an_old_postgres_index_is_rebuilt(postgres_url: str) -> None:
    """A PostgreSQL schema whose index holds version 4's words finds the message after
    reopening."""
    import psycopg
    from psycopg import sql

    schema = f"test_reindex_{uuid.uuid4().hex}"
    try:
        with PostgresStore(postgres_url, schema=schema) as store:
            store.append("s", [MESSAGE])
            assert [h.seq for h in store.search("s", "from numpy import array")] == [1]
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            docs = sql.Identifier(schema, "search_docs")
            versions = sql.Identifier(schema, "ctxfold_schema_version")
            conn.execute(
                sql.SQL("UPDATE {} SET doc = to_tsvector('simple', %s)").format(docs),
                (index_words(OLD_TEXT),),
            )
            conn.execute(sql.SQL("DELETE FROM {} WHERE version = 5").format(versions))
        with PostgresStore(postgres_url, schema=schema) as store:
            assert [h.seq for h in store.search("s", "from numpy import array")] == [1]
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
