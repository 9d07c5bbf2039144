"""The PostgreSQL schema of `PostgresStore`: numbered migrations, and the SQL the store runs.

- ``events``: the log, primary key (session_id, seq), data in a ``json`` column.
- ``append_keys``: the idempotency key of each keyed append, with the seqs it got (version 2).
- ``snapshots``: derived projection snapshots, newest per session (version 3).
- ``search_docs`` and ``search_progress``: a ``tsvector`` per message event, with a GIN index
  (version 4). It is derived data, brought up to date by each search rather than by each append,
  so the events written before this version are indexed by the first search, like any other.
  Version 5 rebuilds it, since tool-call arguments are indexed by their JSON values from then on.

Every name is composed with `psycopg.sql`, quoted as an identifier, never pasted into SQL text.
"""

from __future__ import annotations

from typing import Any

from ctxfold.errors import SchemaVersionError, StoreUnavailableError

MIGRATION_LOCK = "ctxfold migrations"


# Each entry brings a schema from the version before it to its own, one statement at a time;
# never edit a shipped one. {events}, {append_keys}, {snapshots}, {search_docs}, {search_progress}
# and {search_gin} stand for the quoted names.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
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
        # The last seq of each session whose messages are in the index. Events past it,
        # including every event written before this version, are indexed by the next search.
        """
        CREATE TABLE {search_progress} (
            session_id text PRIMARY KEY,
            seq bigint NOT NULL
        )
        """,
    ),
    (
        # Version 5 indexes a tool call's JSON arguments by their values, escapes read: the index
        # is derived data, so it is emptied and the next search of each session rebuilds it.
        "DELETE FROM {search_docs}",
        "DELETE FROM {search_progress}",
    ),
)


def migrate(conn: Any, sql: Statements, where: str, *, create: bool = True) -> None:
    """Bring the schema to the newest version, in one transaction on `conn`. A schema that is
    at it already is only read, so a server that takes no writes (a read-only standby) can be
    opened to read. With `create` False, a schema with no ctxfold tables is a
    `StoreUnavailableError` and nothing is made (a reader given a mistyped schema)."""
    version = _stored_version(conn, sql, where)
    if version == len(MIGRATIONS):
        return
    if version is None and not create:
        raise StoreUnavailableError(
            f"no ctxfold tables in {where}; nothing was created there: check the URL and its schema"
        )
    with conn.transaction():
        # Two processes opening a new schema at once would both try to create it.
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (MIGRATION_LOCK,))
        if sql.create_schema is not None:
            conn.execute(sql.create_schema)
        conn.execute(sql.create_versions)
        version = _known(int(conn.execute(sql.current_version).fetchone()[0]), where)
        for number, statements in enumerate(MIGRATIONS[version:], start=version + 1):
            for statement in statements:
                conn.execute(sql.migration(statement))
            conn.execute(sql.record_version, (number,))


def _stored_version(conn: Any, sql: Statements, where: str) -> int | None:
    """The schema's version, found by reading alone; None when its tables or the schema itself
    are not there yet."""
    try:
        with conn.transaction():
            version = int(conn.execute(sql.current_version).fetchone()[0])
    except Exception as exc:  # the driver's error: only "not there yet" is an answer
        if getattr(exc, "sqlstate", None) in _NOT_THERE:
            return None
        raise
    return _known(version, where)


def _known(version: int, where: str) -> int:
    """`version`, when this ctxfold can read it; a newer one is a `SchemaVersionError`."""
    if version > len(MIGRATIONS):
        raise SchemaVersionError(
            f"{where} has ctxfold schema version {version}, newer than this ctxfold "
            f"understands ({len(MIGRATIONS)}); upgrade ctxfold to open it"
        )
    return version


_NOT_THERE = frozenset({"42P01", "3F000"})
"""SQLSTATEs of a missing table (undefined_table) and a missing schema (invalid_schema_name)."""


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
            "search_progress": table("search_progress"),
            # An index lives in its table's schema, so its own name is never qualified.
            "search_gin": sql.Identifier("search_docs_doc_gin"),
        }
        events, keys = self._names["events"], self._names["append_keys"]
        snapshots, docs = self._names["snapshots"], self._names["search_docs"]
        progress = self._names["search_progress"]
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
        self._insert_head = q(
            "INSERT INTO {} (session_id, seq, type, data, created_at) VALUES "
        ).format(events)
        self._insert_row = q("(%s, %s, %s, %s, %s)")
        self._inserts: dict[int, Any] = {}
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

        # The search index follows the log: a search first indexes what is new.
        self.search_state = q(
            "SELECT (SELECT seq FROM {} WHERE session_id = %s), "
            "(SELECT COALESCE(MAX(seq), 0) FROM {} WHERE session_id = %s)"
        ).format(progress, events)
        self.lock_search = q("SELECT pg_advisory_xact_lock(hashtext(%s), hashtext(%s))")
        self.messages_after = q(
            "SELECT seq, data::text FROM {} WHERE session_id = %s AND seq > %s "
            "AND type = 'message' ORDER BY seq LIMIT %s"
        ).format(events)
        self.insert_search = q(
            "INSERT INTO {} (session_id, seq, doc) "
            "SELECT %s, u.n, to_tsvector('simple', u.x) "
            "FROM unnest(%s::bigint[], %s::text[]) AS u(n, x) ON CONFLICT DO NOTHING"
        ).format(docs)
        self.save_progress = q(
            "INSERT INTO {} AS p (session_id, seq) VALUES (%s, %s) ON CONFLICT (session_id) "
            "DO UPDATE SET seq = GREATEST(p.seq, EXCLUDED.seq)"
        ).format(progress)

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

    def insert_events(self, rows: int) -> Any:
        """One multi-row INSERT for `rows` events (five parameters each)."""
        statement = self._inserts.get(rows)
        if statement is None:
            statement = self._insert_head + self._sql.SQL(", ").join([self._insert_row] * rows)
            self._inserts[rows] = statement
        return statement

    def migration(self, statement: str) -> Any:
        return self._sql.SQL(statement).format(**self._names)
