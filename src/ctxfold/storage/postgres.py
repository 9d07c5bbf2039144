"""PostgresStore: the store to use when several agent workers share sessions (psycopg 3).

An append takes a transaction-scoped advisory lock on its session before it reads the last seq,
so concurrent writers of one session queue there while writers of other sessions go on. The
primary key (session_id, seq) makes a duplicate impossible even for a writer that skips the lock.
A batch is one multi-row INSERT (per 1,000 events), sent with its idempotency key and its NOTIFY
in one round trip.

Event data is kept in a ``json`` column, not ``jsonb``: ``json`` keeps the exact text that was
appended (key order, number spelling, ``\\u0000`` in strings), which is what an audit log owes
its reader, and PostgreSQL's JSON operators work on it all the same.

Driver errors never escape raw: a server that cannot be reached, is shut down or stays busy is a
`StoreUnavailableError` naming the URL without its password; a value PostgreSQL refuses is an
`InvalidInputError`.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote

from ctxfold.errors import (
    ConflictError,
    CtxfoldError,
    InvalidInputError,
    MissingDependencyError,
    StoreClosedError,
    StoreUnavailableError,
)
from ctxfold.events import Event
from ctxfold.storage.base import PriorAppend, StoreBase
from ctxfold.storage.checks import EncodedBatch, check_session_id, decode_event, redacted
from ctxfold.storage.postgres_schema import Statements, migrate
from ctxfold.storage.search import SearchHit, SearchQuery, index_words, stored_text
from ctxfold.storage.watch import Watch

MAX_NAME_BYTES = 63
"""PostgreSQL's longest name, in bytes; it silently cuts longer ones, so they are refused."""

# Events per INSERT statement (five parameters each, well under PostgreSQL's 65,535).
_INSERT_ROWS = 1000
# Message events indexed per round trip when a search catches the index up.
_INDEX_BATCH = 2000

DEFAULT_CONNECT_TIMEOUT = 5.0
"""Seconds to wait for the server to accept a connection, unless the URL or the caller says."""

_CHECK_ADVICE = (
    "check that the server is running and reachable at that host and port, that the database "
    "exists, and that the user may connect"
)


class PostgresStore(StoreBase):
    """A store in PostgreSQL, over a pool of at most `pool_size` connections.

    - `url`: a libpq connection string or URL.
    - `schema`: put the tables in that schema (created when missing) instead of the connection's
      default; a URL's ``schema`` query parameter says the same, as `open_store` reads it. At
      most 63 bytes, and not starting with ``pg_`` (PostgreSQL's own prefix).
    - `connect_timeout`: seconds to wait for the server to accept a connection (default: the
      URL's ``connect_timeout``, else 5). libpq counts it in whole seconds, at least 2.
    - `pool_timeout`: seconds an operation waits for a free connection of the pool (default 5).
    - `create`: make the tables when the schema has none (default). False, for readers: a schema
      with no ctxfold tables is a `StoreUnavailableError`, and nothing is made.

    The store connects once when it is made, so a server that is down, a database that does not
    exist or a refused login fails here, within `connect_timeout`, with a `StoreUnavailableError`
    that says what to check. Tables are created, and later versions migrated, at that moment.
    A connection the server dropped (a restart, ``pg_terminate_backend``) makes the operation
    that was using it raise `StoreUnavailableError`; the next operation gets a fresh connection.
    `subscribe` uses ``LISTEN``/``NOTIFY``, with one extra connection per subscription. Safe to
    call from several threads and processes.

    >>> store = PostgresStore("postgresql://db.internal/agents", schema="ctx")  # doctest: +SKIP
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        pool_size: int = 4,
        connect_timeout: float | None = None,
        pool_timeout: float = 5.0,
        create: bool = True,
    ) -> None:
        try:
            import psycopg
            from psycopg import sql
            from psycopg_pool import ConnectionPool, PoolTimeout
        except ImportError:
            raise MissingDependencyError("PostgresStore", "psycopg", "postgres") from None
        if not isinstance(url, str) or not url:
            raise InvalidInputError(f"PostgresStore needs a postgresql:// URL, not {url!r:.80}")
        # The schema may come in the URL, as open_store takes it; a libpq key=value string has
        # no query to hold one.
        in_url = None
        if url.lower().startswith(("postgresql://", "postgres://")):
            url, in_url = split_schema(url)
        if in_url is not None and schema is not None and in_url != schema:
            raise InvalidInputError(
                f"the URL names schema {in_url!r} and schema= names {schema!r}; name one"
            )
        schema = schema if schema is not None else in_url
        if schema is not None:
            _check_schema(schema)
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise InvalidInputError(f"pool_size must be an integer of 1 or more, not {pool_size!r}")
        if connect_timeout is None:
            connect_timeout = _timeout_in(psycopg, url)
        for name, value in (("connect_timeout", connect_timeout), ("pool_timeout", pool_timeout)):
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not 0 < value < math.inf
            ):
                raise InvalidInputError(
                    f"{name} must be a number of seconds above 0, not {value!r}"
                )
        self.schema = schema
        self.url = redacted(url)
        """The URL with its password masked: safe to print."""
        self._url = url
        self._psycopg = psycopg
        self._pool_timeout_error = PoolTimeout
        self._pool_timeout = float(pool_timeout)
        self._connect_timeout = max(2, math.ceil(connect_timeout))
        self.snapshot_errors = (psycopg.Error,)
        self._sql = Statements(sql, schema)
        self._closed = False
        self._lock = threading.Lock()
        # Connect once before the pool exists: the driver's own error says what is wrong (refused,
        # no such database, bad password) at once, where a pool would only time out later.
        with self._connect() as conn:
            self._mapped(
                lambda: migrate(conn, self._sql, self._where(), create=create),
                "creating the tables",
            )
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            open=False,
            name="ctxfold",
            timeout=self._pool_timeout,
            kwargs={"connect_timeout": self._connect_timeout},
            # A connection the server dropped while idle is replaced before anyone uses it.
            check=ConnectionPool.check_connection,
        )
        try:
            self._pool.open(wait=True, timeout=float(self._connect_timeout))
        except PoolTimeout as exc:
            self._pool.close()
            raise StoreUnavailableError(
                f"PostgreSQL at {self.url} accepted one connection but not the pool's within "
                f"{self._connect_timeout} s; {_CHECK_ADVICE}"
            ) from exc

    # -- the log -------------------------------------------------------------------------------

    def _write_batch(
        self,
        session_id: str,
        batch: EncodedBatch,
        expected_seq: int | None,
        idempotency_key: str | None,
        created_at: float,
    ) -> int | PriorAppend:
        sql = self._sql
        try:
            with self._connection(f"an append to session {session_id!r}") as conn:
                with conn.pipeline():
                    conn.execute(sql.lock_session, (self.schema or "", session_id))
                    state = conn.execute(
                        sql.append_state, (session_id, session_id, idempotency_key)
                    )
                last, first_seq, last_seq, digest = state.fetchone()
                if first_seq is not None:
                    return PriorAppend(int(first_seq), int(last_seq), str(digest))
                last = int(last)
                if expected_seq is not None and expected_seq != last:
                    raise ConflictError(session_id, expected_seq, last)
                events = batch.events
                if not events:
                    return last + 1
                with conn.pipeline():
                    for start in range(0, len(events), _INSERT_ROWS):
                        chunk = events[start : start + _INSERT_ROWS]
                        params: list[object] = []
                        for i, event in enumerate(chunk, start=last + 1 + start):
                            params += (session_id, i, event.type, event.data, created_at)
                        conn.execute(sql.insert_events(len(chunk)), params)
                    if idempotency_key is not None:
                        conn.execute(
                            sql.insert_key,
                            (
                                session_id,
                                idempotency_key,
                                last + 1,
                                last + len(events),
                                batch.digest,
                            ),
                        )
                    # Delivered when the transaction commits, and only then.
                    conn.execute(sql.notify, (self._channel(session_id), str(last + len(events))))
        except self._psycopg.errors.UniqueViolation:
            # The one place a duplicate seq becomes a conflict: a writer that skipped the lock won.
            raise ConflictError(session_id, expected_seq, self.last_seq(session_id)) from None
        return last + 1

    def _read_page(self, session_id: str, after: int, limit: int | None) -> list[Event]:
        with self._connection(f"a read of session {session_id!r}") as conn:
            rows = conn.execute(self._sql.read, (session_id, after, limit)).fetchall()
        return [decode_event(session_id, *row) for row in rows]

    def sessions(self) -> list[str]:
        """Every session id with at least one event, sorted (by code point, as Python sorts)."""
        with self._connection("listing the sessions") as conn:
            rows = conn.execute(self._sql.sessions).fetchall()
        return sorted(row[0] for row in rows)

    def last_seq(self, session_id: str) -> int:
        """The session's last seq, 0 when it has no events."""
        check_session_id(session_id)
        with self._connection(f"a read of session {session_id!r}") as conn:
            return int(conn.execute(self._sql.last_seq, (session_id,)).fetchone()[0])

    # -- search and snapshots ------------------------------------------------------------------

    def _search(
        self, session_id: str, query: SearchQuery, seqs: list[int] | None, limit: int
    ) -> list[SearchHit]:
        params: tuple[object, ...] = (query.tsquery(), session_id, limit)
        statement = self._sql.search
        if seqs is not None:
            statement, params = self._sql.search_among, (query.tsquery(), session_id, seqs, limit)
        with self._connection(f"a search of session {session_id!r}") as conn:
            self._index_new_messages(conn, session_id)
            rows = conn.execute(statement, params).fetchall()
        return [
            SearchHit(seq, float(score), decode_event(session_id, seq, type_, data, created_at))
            for seq, score, type_, data, created_at in rows
        ]

    def _index_new_messages(self, conn: Any, session_id: str) -> None:
        """Bring the session's part of the search index up to its last seq, in `conn`'s
        transaction.

        The index follows the log at search time, not at append time: ``to_tsvector`` and the
        GIN entries would otherwise about double what each append costs the server, for the
        benefit of a rare search. A read-only check when nothing is new; concurrent searches of
        one session take turns on a lock of their own, which appends never wait for."""
        sql = self._sql
        done, last = conn.execute(sql.search_state, (session_id, session_id)).fetchone()
        if last <= (done or 0):
            return
        conn.execute(sql.lock_search, (f"{self.schema or ''} search", session_id))
        done, last = conn.execute(sql.search_state, (session_id, session_id)).fetchone()
        done = done or 0
        while done < last:
            rows = conn.execute(sql.messages_after, (session_id, done, _INDEX_BATCH)).fetchall()
            found = [(seq, index_words(text)) for seq, data in rows if (text := stored_text(data))]
            if found:
                seqs, words = zip(*found, strict=True)
                conn.execute(sql.insert_search, (session_id, list(seqs), list(words)))
            # A short batch reaches the end: everything up to the last seq is then indexed.
            done = rows[-1][0] if len(rows) == _INDEX_BATCH else last
            conn.execute(sql.save_progress, (session_id, done))

    def _save_snapshot(self, session_id: str, seq: int, data: str) -> None:
        with self._connection(f"saving a snapshot of session {session_id!r}") as conn:
            # Derived data: the commit need not wait for the WAL flush. A crash may lose the
            # snapshot, never an event: a later synchronous commit flushes the WAL over it.
            conn.execute("SET LOCAL synchronous_commit = off")
            conn.execute(self._sql.save_snapshot, (session_id, seq, data))
            conn.execute(self._sql.prune_snapshots, (session_id, seq))

    def _load_snapshot(self, session_id: str) -> tuple[int, str] | None:
        with self._connection(f"loading a snapshot of session {session_id!r}") as conn:
            row = conn.execute(self._sql.load_snapshot, (session_id,)).fetchone()
        return (int(row[0]), str(row[1])) if row is not None else None

    def _drop_snapshots(self, session_id: str) -> None:
        with self._connection(f"dropping the snapshots of session {session_id!r}") as conn:
            conn.execute(self._sql.drop_snapshots, (session_id,))

    # -- subscriptions -------------------------------------------------------------------------

    def _watch(self, session_id: str) -> Watch:
        return _Listen(self, self._channel(session_id))

    def _channel(self, session_id: str) -> str:
        # A channel is a name (at most 63 bytes), so it is a digest of the schema and session.
        key = f"{self.schema or ''}\x00{session_id}".encode()
        return "ctxfold_" + hashlib.blake2b(key, digest_size=12).hexdigest()

    # -- lifetime ------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the pool and end every subscription; later calls raise `StoreClosedError`.
        Closing twice is fine."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._pool.close()
        self._end_subscriptions()

    def __repr__(self) -> str:
        return f"PostgresStore(schema={self.schema!r})"

    def _where(self) -> str:
        return f"schema {self.schema or '(default)'} at {self.url}"

    @contextmanager
    def _connection(self, action: str) -> Iterator[Any]:
        """A pooled connection in a transaction (committed on exit), with driver errors mapped."""
        if self._closed:
            raise StoreClosedError(f"{self!r} is closed")
        try:
            with self._pool.connection() as conn:
                yield conn
        except self._pool_timeout_error as exc:
            raise StoreUnavailableError(
                f"no connection to PostgreSQL at {self.url} came free within "
                f"{self._pool_timeout:g} s for {action}: the server may be down or unreachable, "
                f"or all {self._pool.max_size} connections of the pool are busy; check the "
                "server, or raise pool_size or pool_timeout"
            ) from exc
        except self._psycopg.Error as exc:
            mapped = self._map(exc, action)
            if mapped is None:
                raise
            raise mapped from exc

    def _connect(self, autocommit: bool = False) -> Any:
        """One connection outside the pool, made within the connect timeout."""
        try:
            return self._psycopg.connect(
                self._url, connect_timeout=self._connect_timeout, autocommit=autocommit
            )
        except self._psycopg.Error as exc:
            raise StoreUnavailableError(
                f"cannot connect to PostgreSQL at {self.url}: {_first_line(exc)}; {_CHECK_ADVICE}"
            ) from exc

    def _mapped(self, call: Any, action: str) -> Any:
        try:
            return call()
        except self._psycopg.Error as exc:
            mapped = self._map(exc, action)
            if mapped is None:
                raise
            raise mapped from exc

    def _map(self, exc: Any, action: str) -> CtxfoldError | None:
        """The ctxfold error for a driver error, or None for one that is a ctxfold bug."""
        state = exc.sqlstate or ""
        detail = _first_line(exc)
        if state == "42939" or state.startswith(("22", "54")):
            # reserved_name, data exceptions, program limits: PostgreSQL refused a value.
            return InvalidInputError(f"PostgreSQL refused a value during {action}: {detail}")
        if state in ("25006", "42501"):
            # read_only_sql_transaction, insufficient_privilege: the server takes no such write.
            return StoreUnavailableError(
                f"PostgreSQL at {self.url} refused {action}: {detail}; this server or role takes "
                "no such write (a read-only standby, default_transaction_read_only, or a role "
                "without the privilege): point ctxfold at the primary, or grant the role what it "
                "needs"
            )
        if state in ("57014", "55P03"):
            # query_canceled, lock_not_available: a timeout of the server's, the role's or the
            # URL's own (statement_timeout, lock_timeout), or an administrator, cut it short.
            return StoreUnavailableError(
                f"PostgreSQL at {self.url} canceled {action}: {detail}; a statement_timeout or "
                "lock_timeout (set on the server, the role or in the URL's options) or an "
                "administrator cut it short: allow more time, then retry (an append retried "
                "with the same idempotency_key never lands twice)"
            )
        if state.startswith(("08", "53", "57P")) or (
            not state and isinstance(exc, self._psycopg.OperationalError)
        ):
            # Connection failures, resources exhausted, shutdown or crash of the server.
            return StoreUnavailableError(
                f"PostgreSQL at {self.url} became unavailable during {action}: {detail}; check "
                "that the server is up and reachable, then retry (an append retried with the "
                "same idempotency_key never lands twice)"
            )
        return None


class _Listen:
    """A subscription's own connection, listening on its session's channel."""

    def __init__(self, store: PostgresStore, channel: str) -> None:
        self._store = store
        self._conn = store._connect(autocommit=True)
        try:
            sql = store._psycopg.sql
            store._mapped(
                lambda: self._conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel))),
                "starting a subscription",
            )
        except BaseException:
            self._conn.close()
            raise

    def arm(self) -> None:
        pass  # LISTEN queues every notification from the moment it ran.

    def wait(self, timeout: float) -> bool:
        return bool(
            self._store._mapped(
                lambda: any(True for _ in self._conn.notifies(timeout=timeout, stop_after=1)),
                "a subscription",
            )
        )

    def close(self) -> None:
        self._conn.close()


def _check_schema(schema: object) -> None:
    if not isinstance(schema, str) or not schema or "\x00" in schema:
        raise InvalidInputError(f"schema must be a non-empty name, not {schema!r}")
    size = len(schema.encode("utf-8"))
    if size > MAX_NAME_BYTES:
        raise InvalidInputError(
            f"schema name {schema!r} is {size} bytes long in UTF-8; PostgreSQL names are at most "
            f"{MAX_NAME_BYTES} bytes (it would cut this one short, and two stores could end up "
            "sharing one table), so use a shorter name"
        )
    if schema.startswith("pg_"):
        raise InvalidInputError(
            f"schema name {schema!r} starts with 'pg_', which PostgreSQL reserves for its own "
            "schemas; use another name"
        )


def _timeout_in(psycopg: Any, url: str) -> float:
    """The URL's own ``connect_timeout``, else the default (seconds)."""
    try:
        given = psycopg.conninfo.conninfo_to_dict(url).get("connect_timeout")
        return float(given) if given else DEFAULT_CONNECT_TIMEOUT
    except (psycopg.Error, TypeError, ValueError) as exc:
        # libpq's message quotes the URL it could not read, password and all.
        said = str(exc).replace(url, redacted(url))
        raise InvalidInputError(f"{redacted(url)!r} is not a PostgreSQL URL: {said}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def split_schema(url: str) -> tuple[str, str | None]:
    """A PostgreSQL URL without its ``schema`` query parameter, and that schema (None without
    one). The other parameters go on to the server as given, spaces included: libpq reads
    ``%20`` as a space but ``+`` as a plus sign, so ``options=-c%20statement_timeout%3D5000``
    must not come out as ``-c+statement_timeout=5000``.

    >>> split_schema("postgresql://db/app?schema=agents&options=-c%20statement_timeout%3D5000")
    ('postgresql://db/app?options=-c%20statement_timeout%3D5000', 'agents')
    """
    # Cut textually: the URL is never parsed and put back together, so every other part reaches
    # libpq as the user wrote it (an empty host in postgresql:///db, a bracketed IPv6 host, the
    # escapes of each parameter).
    base, mark, rest = url.partition("?")
    query, hash_mark, fragment = rest.partition("#")
    kept: list[str] = []
    schemas: list[str] = []
    for pair in query.split("&") if mark else ():
        key, _, value = pair.partition("=")
        if unquote(key) == "schema":
            schemas.append(unquote(value))
        elif pair:
            kept.append(pair)
    if len(schemas) > 1 or (schemas and not schemas[0]):
        raise InvalidInputError(
            f"{redacted(url)!r}: give the schema query parameter once, with a name"
        )
    if not schemas:
        return url, None
    rebuilt = base + ("?" + "&".join(kept) if kept else "") + hash_mark + fragment
    return rebuilt, schemas[0]
