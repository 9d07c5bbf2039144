"""SQLiteStore: the embedded default, one database file in WAL mode.

Appends run in ``BEGIN IMMEDIATE`` transactions, so writers in other threads and other processes
queue on SQLite's write lock (up to `busy_timeout` seconds) and read the last seq only once they
hold it: two appends never pick the same seq. The primary key (session_id, seq) makes a duplicate
impossible even for a writer that does not follow that rule.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from ctxfold.errors import ConflictError, InvalidInputError, SchemaVersionError, StoreClosedError
from ctxfold.events import Event
from ctxfold.storage.base import (
    EncodedEvent,
    StoreBase,
    check_seq,
    check_session_id,
    decode_event,
)

MEMORY = ":memory:"

# Each entry brings a database from the version before it to its own; never edit a shipped one.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE events (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        type TEXT NOT NULL,
        data TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (session_id, seq)
    )
    """,
)

_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
# Idle connections kept for reuse; more threads than this still work, they just reconnect.
_MAX_IDLE = 8


def default_sqlite_path(env: Mapping[str, str] | None = None) -> Path:
    """Where the CLI keeps its database when none is named.

    ``$XDG_DATA_HOME/ctxfold/ctxfold.db``, or ``~/.local/share/ctxfold/ctxfold.db`` when
    XDG_DATA_HOME is unset, empty or relative (the XDG spec says to ignore a relative one).
    `env` defaults to the process environment.
    """
    env = os.environ if env is None else env
    xdg = env.get("XDG_DATA_HOME", "")
    if xdg and os.path.isabs(xdg):
        base = Path(xdg)
    else:
        home = env.get("HOME")
        base = (Path(home) if home else Path.home()) / ".local" / "share"
    return base / "ctxfold" / "ctxfold.db"


class SQLiteStore(StoreBase):
    """An `EventStore` in one SQLite file (or ``":memory:"``, private to this object).

    `synchronous` is SQLite's durability setting: ``"FULL"`` (the default) makes every
    acknowledged append survive a power cut; ``"NORMAL"`` is faster and survives a crash of the
    process but not of the machine. `busy_timeout` is how long, in seconds, an append waits for
    another writer before giving up. Safe to call from several threads and processes.

    >>> from ctxfold.events import NewEvent
    >>> with SQLiteStore(":memory:") as store:
    ...     store.append("s", [NewEvent("turn")])[0].seq
    1
    """

    def __init__(
        self, path: str | os.PathLike[str], *, synchronous: str = "FULL", busy_timeout: float = 30.0
    ) -> None:
        if synchronous.upper() not in _SYNCHRONOUS:
            raise InvalidInputError(
                f"synchronous must be one of {', '.join(_SYNCHRONOUS)}, not {synchronous!r}"
            )
        text = os.fspath(path)
        if not text:
            raise InvalidInputError("SQLiteStore needs a file path or ':memory:', not ''")
        self.path = text
        self._synchronous = synchronous.upper()
        self._busy_timeout = busy_timeout
        self._lock = threading.Lock()
        self._idle: list[sqlite3.Connection] = []
        self._closed = False
        if text == MEMORY:
            # One connection is the whole database, so every thread shares it, one at a time.
            self._shared: sqlite3.Connection | None = self._connect()
            self._shared_lock = threading.Lock()
        else:
            self._shared = None
            Path(text).expanduser().parent.mkdir(parents=True, exist_ok=True)
        try:
            with self._connection() as conn:
                self._migrate(conn)
        except sqlite3.DatabaseError as exc:
            self.close()
            raise InvalidInputError(
                f"{self.path!r} cannot be opened as a ctxfold SQLite database: {exc}"
            ) from None
        except BaseException:
            self.close()
            raise

    def _write_batch(
        self,
        session_id: str,
        batch: Sequence[EncodedEvent],
        expected_seq: int | None,
        created_at: float,
    ) -> int:
        with self._connection() as conn, self._write(conn, session_id, expected_seq):
            last = _last_seq(conn, session_id)
            if expected_seq is not None and expected_seq != last:
                raise ConflictError(session_id, expected_seq, last)
            conn.executemany(
                "INSERT INTO events (session_id, seq, type, data, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                [
                    (session_id, last + 1 + i, e.type, e.data, created_at)
                    for i, e in enumerate(batch)
                ],
            )
        return last + 1

    def read(self, session_id: str, after: int = 0) -> list[Event]:
        """The session's events with a seq above `after`, in seq order."""
        check_session_id(session_id)
        check_seq(after, "after")
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT seq, type, data, created_at FROM events "
                "WHERE session_id = ? AND seq > ? ORDER BY seq",
                (session_id, after),
            ).fetchall()
        return [decode_event(session_id, *row) for row in rows]

    def sessions(self) -> list[str]:
        """Every session id with at least one event, sorted."""
        with self._connection() as conn:
            # Every session starts at seq 1, so this lists each once without a DISTINCT.
            rows = conn.execute("SELECT session_id FROM events WHERE seq = 1").fetchall()
        return sorted(row[0] for row in rows)

    def last_seq(self, session_id: str) -> int:
        """The session's last seq, 0 when it has no events."""
        check_session_id(session_id)
        with self._connection() as conn:
            return _last_seq(conn, session_id)

    def close(self) -> None:
        """Close every connection; later calls raise `StoreClosedError`. Closing twice is fine."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            shared, self._shared = self._shared, None
        for conn in idle:
            conn.close()
        if shared is not None:
            with self._shared_lock:
                shared.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    @contextmanager
    def _write(
        self, conn: sqlite3.Connection, session_id: str, expected_seq: int | None
    ) -> Iterator[None]:
        """One write transaction; the only place a duplicate seq becomes a `ConflictError`."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except sqlite3.IntegrityError:
            _rollback(conn)
            raise ConflictError(session_id, expected_seq, _last_seq(conn, session_id)) from None
        except BaseException:
            _rollback(conn)
            raise
        conn.execute("COMMIT")

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        if self._shared is not None:
            with self._shared_lock:
                if self._closed:
                    raise StoreClosedError(f"{self!r} is closed")
                yield self._shared
            return
        with self._lock:
            if self._closed:
                raise StoreClosedError(f"{self!r} is closed")
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._connect()
        try:
            yield conn
        finally:
            with self._lock:
                keep = not self._closed and len(self._idle) < _MAX_IDLE
                if keep:
                    self._idle.append(conn)
            if not keep:
                conn.close()

    def _connect(self) -> sqlite3.Connection:
        path = self.path if self.path == MEMORY else os.path.expanduser(self.path)
        # isolation_level=None: transactions are opened by hand, so BEGIN IMMEDIATE is possible.
        conn = sqlite3.connect(
            path, timeout=self._busy_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            if path != MEMORY:
                conn.execute("PRAGMA journal_mode = WAL")
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise InvalidInputError(
                f"{self.path!r} cannot be opened as a ctxfold SQLite database: {exc}"
            ) from None
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        # BEGIN IMMEDIATE: two processes opening a new file at once migrate one after the other.
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
            version = row[0] or 0
            if version > len(MIGRATIONS):
                raise SchemaVersionError(
                    f"{self.path!r} has schema version {version}, newer than this ctxfold "
                    f"understands ({len(MIGRATIONS)}); upgrade ctxfold to open it"
                )
            for number, statement in enumerate(MIGRATIONS[version:], start=version + 1):
                conn.execute(statement)
                conn.execute("INSERT INTO schema_version (version) VALUES (?)", (number,))
        except BaseException:
            _rollback(conn)
            raise
        conn.execute("COMMIT")


def _rollback(conn: sqlite3.Connection) -> None:
    # SQLite ends some failed transactions by itself; a second ROLLBACK would hide the real error.
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def _last_seq(conn: sqlite3.Connection, session_id: str) -> int:
    row = conn.execute("SELECT MAX(seq) FROM events WHERE session_id = ?", (session_id,)).fetchone()
    return int(row[0] or 0)
