"""The PostgreSQL schema of `PostgresStore`: numbered migrations, and the SQL the store runs.

- ``events``: the log, primary key (session_id, seq), data in a ``json`` column.
- ``append_keys``: the idempotency key of each keyed append, with the seqs it got (version 2).
- ``snapshots``: derived projection snapshots, newest per session (version 3).
- ``search_docs``: a ``tsvector`` per message event, with a GIN index (version 4); the migration
  indexes every event already in the schema.

Every name is composed with `psycopg.sql`, quoted as an identifier, never pasted into SQL text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ctxfold.errors import SchemaVersionError
from ctxfold.storage.search import search_text

MIGRATION_LOCK = "ctxfold migrations"
_BACKFILL_BATCH = 500


def _index_existing_messages(conn: Any, sql: Statements) -> None:
    """Version 4's back-fill: the search words of every message event already stored."""
    import json

    # A named (server-side) cursor, so a large log is read a batch at a time.
    with conn.cursor(name="ctxfold_search_backfill") as rows:
        rows.itersize = _BACKFILL_BATCH
        rows.execute(sql.messages_to_index)
        batch: list[tuple[str, int, str]] = []
        for session_id, seq, data in rows:
            value = json.loads(data)
            text = search_text(value) if isinstance(value, dict) else ""
            if text:
                batch.append((session_id, seq, text))
            if len(batch) >= _BACKFILL_BATCH:
                _insert_docs(conn, sql, batch)
                batch = []
        _insert_docs(conn, sql, batch)


def _insert_docs(conn: Any, sql: Statements, batch: list[tuple[str, int, str]]) -> None:
    if batch:
        ids, seqs, texts = (list(column) for column in zip(*batch, strict=True))
        conn.execute(sql.insert_search, (ids, seqs, texts))


# Each entry brings a schema from the version before it to its own; never edit a shipped one.
# A step is SQL (with {events}, {append_keys}, {snapshots}, {search_docs} and {search_gin} for the
# quoted names) or a function of (connection, Statements).
Step = str | Callable[[Any, "Statements"], None]
MIGRATIONS: tuple[tuple[Step, ...], ...] = (
    (
        """
    CREATE TABLE {events} (
        session_id text NOT NULL,
        seq bigint NOT NULL,
        type text NOT NULL,
        data json NOT NULL,
        created_at double precision NOT NULL,
        PRIMARY KEY (session_id, seq)
    )
    """,
    ),
    (
        """
        CREATE TABLE {append_keys} (
            session_id text NOT NULL,
            key text NOT NULL,
            first_seq bigint NOT NULL,
            last_seq bigint NOT NULL,
            digest text NOT NULL,
            PRIMARY KEY (session_id, key)
        )
        """,
    ),
    (
        """
        CREATE TABLE {snapshots} (
            session_id text NOT NULL,
            seq bigint NOT NULL,
            data text NOT NULL,
            PRIMARY KEY (session_id, seq)
        )
        """,
    ),
    (
        """
        CREATE TABLE {search_docs} (
            session_id text NOT NULL,
            seq bigint NOT NULL,
            doc tsvector NOT NULL,
            PRIMARY KEY (session_id, seq)
        )
        """,
        "CREATE INDEX {search_gin} ON {search_docs} USING gin (doc)",
        _index_existing_messages,
    ),
)


def migrate(conn: Any, sql: Statements, where: str) -> None:
    """Bring the schema to the newest version, in one transaction on `conn`."""
    with conn.transaction():
        # Two processes opening a new schema at once would both try to create it.
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (MIGRATION_LOCK,))
        if sql.create_schema is not None:
            conn.execute(sql.create_schema)
        conn.execute(sql.create_versions)
        version = int(conn.execute(sql.current_version).fetchone()[0])
        if version > len(MIGRATIONS):
            raise SchemaVersionError(
                f"{where} has ctxfold schema version {version}, newer than this ctxfold "
                f"understands ({len(MIGRATIONS)}); upgrade ctxfold to open it"
            )
        for number, steps in enumerate(MIGRATIONS[version:], start=version + 1):
            for step in steps:
                if isinstance(step, str):
                    conn.execute(sql.migration(step))
                else:
                    step(conn, sql)
            conn.execute(sql.record_version, (number,))


class Statements:
    """The store's SQL, composed once with the schema quoted as an identifier."""

    def __init__(self, sql: Any, schema: str | None) -> None:
        self._sql = sql

        def table(name: str) -> Any:
            return sql.Identifier(schema, name) if schema is not None else sql.Identifier(name)

        self._names = {
            "events": table("events"),
            "append_keys": table("append_keys"),
            "snapshots": table("snapshots"),
            "search_docs": table("search_docs"),
            # An index lives in its table's schema, so its own name is never qualified.
            "search_gin": sql.Identifier("search_docs_doc_gin"),
        }
        events, keys = self._names["events"], self._names["append_keys"]
        snapshots, docs = self._names["snapshots"], self._names["search_docs"]
        versions = table("ctxfold_schema_version")
        q = sql.SQL

        self.create_schema = (
            q("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))
            if schema is not None
            else None
        )
        self.create_versions = q(
            "CREATE TABLE IF NOT EXISTS {} (version integer PRIMARY KEY, "
            "applied_at timestamptz NOT NULL DEFAULT now())"
        ).format(versions)
        self.current_version = q("SELECT COALESCE(MAX(version), 0) FROM {}").format(versions)
        self.record_version = q("INSERT INTO {} (version) VALUES (%s)").format(versions)

        # Two int4 keys: the schema and the session, so stores in other schemas never wait.
        self.lock_session = q("SELECT pg_advisory_xact_lock(hashtext(%s), hashtext(%s))")
        # After the lock: the last seq, and what an earlier append with this key got (if any).
        self.append_state = q(
            "SELECT (SELECT COALESCE(MAX(seq), 0) FROM {} WHERE session_id = %s), "
            "k.first_seq, k.last_seq, k.digest "
            "FROM (SELECT 1) AS one LEFT JOIN {} AS k ON k.session_id = %s AND k.key = %s"
        ).format(events, keys)
        # One statement per batch, however many events it holds.
        self.insert_events = q(
            "INSERT INTO {} (session_id, seq, type, data, created_at) "
            "SELECT %s, %s + u.n, u.t, u.d::json, %s "
            "FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY AS u(t, d, n)"
        ).format(events)
        self.insert_search = q(
            "INSERT INTO {} (session_id, seq, doc) "
            "SELECT u.s, u.n, to_tsvector('simple', u.x) "
            "FROM unnest(%s::text[], %s::bigint[], %s::text[]) AS u(s, n, x)"
        ).format(docs)
        self.insert_key = q(
            "INSERT INTO {} (session_id, key, first_seq, last_seq, digest) "
            "VALUES (%s, %s, %s, %s, %s)"
        ).format(keys)
        self.notify = q("SELECT pg_notify(%s, %s)")

        self.last_seq = q("SELECT COALESCE(MAX(seq), 0) FROM {} WHERE session_id = %s").format(
            events
        )
        self.read = q(
            "SELECT seq, type, data::text, created_at FROM {} "
            "WHERE session_id = %s AND seq > %s ORDER BY seq LIMIT %s"
        ).format(events)
        # Every session starts at seq 1, so this lists each once without a DISTINCT.
        self.sessions = q("SELECT session_id FROM {} WHERE seq = 1").format(events)
        self.messages_to_index = q(
            "SELECT session_id, seq, data::text FROM {} WHERE type = 'message' "
            "ORDER BY session_id, seq"
        ).format(events)

        search = (
            "SELECT s.seq, ts_rank(s.doc, q, 1) AS score, e.type, e.data::text, e.created_at "
            "FROM {} AS s JOIN {} AS e ON e.session_id = s.session_id AND e.seq = s.seq "
            "CROSS JOIN to_tsquery('simple', %s) AS q "
            "WHERE s.session_id = %s AND s.doc @@ q {} "
            "ORDER BY score DESC, s.seq DESC LIMIT %s"
        )
        self.search = q(search).format(docs, events, q(""))
        self.search_among = q(search).format(docs, events, q("AND s.seq = ANY(%s)"))

        self.save_snapshot = q(
            "INSERT INTO {} (session_id, seq, data) VALUES (%s, %s, %s) "
            "ON CONFLICT (session_id, seq) DO UPDATE SET data = EXCLUDED.data"
        ).format(snapshots)
        self.prune_snapshots = q("DELETE FROM {} WHERE session_id = %s AND seq < %s").format(
            snapshots
        )
        self.load_snapshot = q(
            "SELECT seq, data FROM {} WHERE session_id = %s ORDER BY seq DESC LIMIT 1"
        ).format(snapshots)
        self.drop_snapshots = q("DELETE FROM {} WHERE session_id = %s").format(snapshots)

    def migration(self, statement: str) -> Any:
        return self._sql.SQL(statement).format(**self._names)
