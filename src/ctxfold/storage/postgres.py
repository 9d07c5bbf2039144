"""PostgresStore: the store to use when several agent workers share sessions (psycopg 3).

An append takes a transaction-scoped advisory lock on its session before it reads the last seq,
so concurrent writers of one session queue there while writers of other sessions go on. The
primary key (session_id, seq) makes a duplicate impossible even for a writer that skips the lock.

Event data is kept in a ``json`` column, not ``jsonb``: ``json`` keeps the exact text that was
appended (key order, number spelling, ``\\u0000`` in strings), which is what an audit log owes
its reader, and PostgreSQL's JSON operators work on it all the same.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from ctxfold.errors import (
    ConflictError,
    InvalidInputError,
    MissingDependencyError,
    SchemaVersionError,
    StoreClosedError,
)
from ctxfold.events import Event
from ctxfold.storage.base import (
    EncodedEvent,
    StoreBase,
    check_seq,
    check_session_id,
    decode_event,
)

# Each entry brings a schema from the version before it to its own; never edit a shipped one.
# "{events}" is the events table, qualified with the store's schema.
MIGRATIONS: tuple[str, ...] = (
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
)

_MIGRATION_LOCK = "ctxfold migrations"


class PostgresStore(StoreBase):
    """An `EventStore` in PostgreSQL, over a pool of at most `pool_size` connections.

    `url` is a libpq connection string or URL. `schema` puts the tables in that schema (created
    when missing) instead of the connection's default; tables are created, and later versions
    migrated, when the store opens. `connect_timeout` is in seconds. Safe to call from several
    threads and processes.

    >>> store = PostgresStore("postgresql://db.internal/agents", schema="ctx")  # doctest: +SKIP
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        pool_size: int = 4,
        connect_timeout: float = 10.0,
    ) -> None:
        try:
            import psycopg
            from psycopg import sql
            from psycopg_pool import ConnectionPool
        except ImportError:
            raise MissingDependencyError("PostgresStore", "psycopg", "postgres") from None
        if schema is not None and (not isinstance(schema, str) or not schema or "\x00" in schema):
            raise InvalidInputError(f"schema must be a non-empty name, not {schema!r}")
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise InvalidInputError(f"pool_size must be an integer of 1 or more, not {pool_size!r}")
        self.schema = schema
        self._unique_violation = psycopg.errors.UniqueViolation
        self._sql = _Statements(sql, schema)
        self._closed = False
        self._lock = threading.Lock()
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            open=False,
            name="ctxfold",
            kwargs={"connect_timeout": max(1, round(connect_timeout))},
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout)
            self._migrate()
        except BaseException:
            self._pool.close()
            raise

    def _write_batch(
        self,
        session_id: str,
        batch: Sequence[EncodedEvent],
        expected_seq: int | None,
        created_at: float,
    ) -> int:
        self._check_open()
        try:
            with self._pool.connection() as conn, conn.cursor() as cur:
                cur.execute(self._sql.lock_session, (self.schema or "", session_id))
                cur.execute(self._sql.last_seq, (session_id,))
                last = _first(cur.fetchone())
                if expected_seq is not None and expected_seq != last:
                    raise ConflictError(session_id, expected_seq, last)
                if batch:
                    cur.executemany(
                        self._sql.insert,
                        [
                            (session_id, last + 1 + i, e.type, e.data, created_at)
                            for i, e in enumerate(batch)
                        ],
                    )
        except self._unique_violation:
            # The one place a duplicate seq becomes a conflict: a writer that skipped the lock won.
            raise ConflictError(session_id, expected_seq, self.last_seq(session_id)) from None
        return last + 1

    def read(self, session_id: str, after: int = 0) -> list[Event]:
        """The session's events with a seq above `after`, in seq order."""
        check_session_id(session_id)
        check_seq(after, "after")
        self._check_open()
        with self._pool.connection() as conn:
            rows = conn.execute(self._sql.read, (session_id, after)).fetchall()
        return [decode_event(session_id, *row) for row in rows]

    def sessions(self) -> list[str]:
        """Every session id with at least one event, sorted (by code point, as Python sorts)."""
        self._check_open()
        with self._pool.connection() as conn:
            rows = conn.execute(self._sql.sessions).fetchall()
        return sorted(row[0] for row in rows)

    def last_seq(self, session_id: str) -> int:
        """The session's last seq, 0 when it has no events."""
        check_session_id(session_id)
        self._check_open()
        with self._pool.connection() as conn:
            return _first(conn.execute(self._sql.last_seq, (session_id,)).fetchone())

    def close(self) -> None:
        """Close the pool; later calls raise `StoreClosedError`. Closing twice is fine."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._pool.close()

    def __repr__(self) -> str:
        return f"PostgresStore(schema={self.schema!r})"

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"{self!r} is closed")

    def _migrate(self) -> None:
        with self._pool.connection() as conn, conn.cursor() as cur:
            # Two processes opening a new schema at once would both try to create it.
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (_MIGRATION_LOCK,))
            if self._sql.create_schema is not None:
                cur.execute(self._sql.create_schema)
            cur.execute(self._sql.create_versions)
            cur.execute(self._sql.current_version)
            version = _first(cur.fetchone())
            if version > len(MIGRATIONS):
                raise SchemaVersionError(
                    f"schema {self.schema or '(default)'} has ctxfold schema version {version}, "
                    f"newer than this ctxfold understands ({len(MIGRATIONS)}); upgrade ctxfold"
                )
            for number, statement in enumerate(MIGRATIONS[version:], start=version + 1):
                cur.execute(self._sql.migration(statement))
                cur.execute(self._sql.record_version, (number,))


class _Statements:
    """The store's SQL, composed once with the schema quoted as an identifier."""

    def __init__(self, sql: Any, schema: str | None) -> None:
        self._sql = sql

        def table(name: str) -> Any:
            return sql.Identifier(schema, name) if schema is not None else sql.Identifier(name)

        self._events = table("events")
        versions = table("ctxfold_schema_version")
        events = self._events
        self.create_schema = (
            sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))
            if schema is not None
            else None
        )
        self.create_versions = sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (version integer PRIMARY KEY, "
            "applied_at timestamptz NOT NULL DEFAULT now())"
        ).format(versions)
        self.current_version = sql.SQL("SELECT COALESCE(MAX(version), 0) FROM {}").format(versions)
        self.record_version = sql.SQL("INSERT INTO {} (version) VALUES (%s)").format(versions)
        # Two int4 keys: the schema and the session, so stores in other schemas never wait.
        self.lock_session = sql.SQL("SELECT pg_advisory_xact_lock(hashtext(%s), hashtext(%s))")
        self.last_seq = sql.SQL(
            "SELECT COALESCE(MAX(seq), 0) FROM {} WHERE session_id = %s"
        ).format(events)
        self.insert = sql.SQL(
            "INSERT INTO {} (session_id, seq, type, data, created_at) VALUES (%s, %s, %s, %s, %s)"
        ).format(events)
        self.read = sql.SQL(
            "SELECT seq, type, data::text, created_at FROM {} "
            "WHERE session_id = %s AND seq > %s ORDER BY seq"
        ).format(events)
        # Every session starts at seq 1, so this lists each once without a DISTINCT.
        self.sessions = sql.SQL("SELECT session_id FROM {} WHERE seq = 1").format(events)

    def migration(self, statement: str) -> Any:
        return self._sql.SQL(statement).format(events=self._events)


def _first(row: Any) -> int:
    return int(row[0]) if row is not None and row[0] is not None else 0
