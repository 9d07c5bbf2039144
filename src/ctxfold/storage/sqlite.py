"""SQLiteStore: the embedded default, one database file in WAL mode.

Appends run in ``BEGIN IMMEDIATE`` transactions, so writers in other threads and other processes
queue on SQLite's write lock (up to `busy_timeout` seconds) and read the last seq only once they
hold it: two appends never pick the same seq. The primary key (session_id, seq) makes a duplicate
impossible even for a writer that does not follow that rule. The schema and its migrations are in
`ctxfold.storage.sqlite_schema`.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ctxfold.errors import (
    ConflictError,
    InvalidInputError,
    StoreClosedError,
    StoreCorruptError,
    StoreError,
    StoreUnavailableError,
)
from ctxfold.events import Event
from ctxfold.storage.base import PriorAppend, StoreBase
from ctxfold.storage.checks import EncodedBatch, check_session_id, decode_event, decode_row
from ctxfold.storage.search import SearchHit, SearchQuery, stored_text
from ctxfold.storage.sqlite_schema import migrate, session_token

MEMORY = ":memory:"

_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
# Idle connections kept for reuse; more threads than this still work, they just reconnect.
_MAX_IDLE = 8
# Message events indexed per write transaction when a search catches the index up.
_INDEX_BATCH = 2000

_INSERT_EVENT = (
    "INSERT INTO events (session_id, seq, type, data, created_at) VALUES (?, ?, ?, ?, ?)"
)
_READ = (
    "SELECT seq, type, data, created_at FROM events "
    "WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?"
)
_READ_DATA = (
    "SELECT seq, type, data FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?"
)
_READ_BYTES = (
    "SELECT seq, type, CAST(data AS BLOB) FROM events "
    "WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?"
)
_SEARCH = """
    SELECT e.seq, -bm25(search_index, 0.0, 1.0) AS score, e.type, e.data, e.created_at
    FROM search_index
    JOIN search_docs AS d ON d.docid = search_index.rowid
    JOIN events AS e ON e.session_id = d.session_id AND e.seq = d.seq
    WHERE search_index MATCH ? AND d.session_id = ? {only}
    ORDER BY score DESC, e.seq DESC
    LIMIT ?
"""


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
    """A store in one SQLite file (or ``":memory:"``, private to this object).

    **Durability.** The file is in WAL mode, and `synchronous` is SQLite's durability setting:

    - ``"FULL"`` (the default, as strong as the OpenAI Agents SDK's `SQLiteSession`, which keeps
      SQLite's default of FULL): the write-ahead log is flushed to disk (fsync) before an append
      returns, so every acknowledged append survives the process being killed, the operating
      system crashing and the power failing (as far as the disk honours fsync);
    - ``"NORMAL"``: faster; an acknowledged append survives the process being killed, but the
      last appends before an operating-system crash or a power cut may be lost (never half of
      one: a batch is whole or absent either way);
    - ``"EXTRA"`` adds a sync of the directory; ``"OFF"`` hands durability to the OS.

    Snapshots (`save_snapshot`, derived data) commit at ``"NORMAL"`` at most, without a flush of
    their own: a power cut may lose the newest one, which costs the next start speed, never an
    event (the next append's flush covers it too).

    `busy_timeout` is how long, in seconds, an append waits for another writer before giving up.
    `poll_interval` is how often, in seconds, `subscribe` checks for other processes' appends
    (appends by this store object wake it at once). Search uses SQLite's FTS5; the index is
    brought up to date by each search (the events appended since the last one are indexed
    then), so appends pay nothing for it. Safe to call from several threads and processes.

    When SQLite fails as a store (a full disk, a lock held past `busy_timeout`, a file it may no
    longer write or read), an append, read or search raises `StoreUnavailableError` naming the
    file and what to do, and a damaged file `StoreCorruptError`; an append that raises either
    wrote nothing.

    `create=False` opens only a file that exists: a missing one is a `StoreUnavailableError`
    naming it, and no file or folder is made (a reader given a mistyped path must not leave an
    empty database behind and report it empty).

    `close` (or a ``with`` block) closes its connections at once; a store dropped unclosed
    closes them when it is collected, so Python (3.13 on) has none left open to warn about.

    >>> from ctxfold.events import NewEvent
    >>> with SQLiteStore(":memory:") as store:
    ...     store.append("s", [NewEvent("turn")])[0].seq
    1
    """

    snapshot_errors = (sqlite3.DatabaseError,)

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: str = "FULL",
        busy_timeout: float = 30.0,
        poll_interval: float = 0.1,
        create: bool = True,
    ) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidInputError(
                "SQLiteStore needs a file path or ':memory:', "
                f"not {type(path).__name__} {path!r:.80}"
            )
        for name, value in (("busy_timeout", busy_timeout), ("poll_interval", poll_interval)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise InvalidInputError(
                    f"{name} must be a number of seconds, 0 or more, not {value!r}"
                )
        if not isinstance(synchronous, str) or synchronous.upper() not in _SYNCHRONOUS:
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
            # One connection is the whole database, so every thread shares it, one at a time;
            # every writer is this object, so subscribers need no polling.
            self._shared: sqlite3.Connection | None = self._connect()
            self._shared_lock = threading.Lock()
            self.poll_interval = None
        else:
            self._shared = None
            self.poll_interval = poll_interval
            file = Path(text).expanduser()
            if not create and not file.exists():
                full = str(file.absolute())
                where = repr(text) if full == text else f"{text!r} ({full})"
                raise StoreUnavailableError(
                    f"no SQLite database at {where}; nothing was created there: check the path"
                )
            file.parent.mkdir(parents=True, exist_ok=True)
        # A store dropped without `close` closes its connections when it is collected, rather
        # than leave each to Python, which warns about every connection left open (3.13 on).
        # Every transaction was committed or rolled back when it ended: nothing is lost.
        weakref.finalize(self, _close_all, self._idle, self._shared)
        try:
            with self._connection() as conn:
                migrate(conn, self.path)
        except sqlite3.DatabaseError as exc:
            self.close()
            # A damaged file, a full disk, a lock held too long: said as for any other call.
            # Anything else (a file that is no database at all, say) is the wrong file.
            failure = self._failure(exc, "its opening")
            if failure is not None:
                raise failure from None
            raise InvalidInputError(
                f"{self.path!r} cannot be opened as a ctxfold SQLite database: {exc}"
            ) from None
        except BaseException:
            self.close()
            raise

    def _write_batch(
        self,
        session_id: str,
        batch: EncodedBatch,
        expected_seq: int | None,
        idempotency_key: str | None,
        created_at: float,
    ) -> int | PriorAppend:
        # `_transaction` and `_connection` spelled out: this runs once per append, and the two
        # context managers cost as much CPU as a small append's own statements.
        conn = self._acquire()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                written = self._write(
                    conn, session_id, batch, expected_seq, idempotency_key, created_at
                )
                conn.execute("COMMIT")
            except BaseException:
                # SQLite ends some failed transactions by itself; a second ROLLBACK would hide
                # the error.
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return written
        except sqlite3.IntegrityError:
            # The one place a duplicate seq becomes a conflict: a writer that skipped the
            # write lock won.
            raise ConflictError(session_id, expected_seq, _last_seq(conn, session_id)) from None
        except sqlite3.DatabaseError as exc:
            failure = self._failure(exc, f"an append to session {session_id!r}", append=True)
            if failure is None:
                raise
            raise failure from exc
        finally:
            self._release(conn)

    @staticmethod
    def _write(
        conn: sqlite3.Connection,
        session_id: str,
        batch: EncodedBatch,
        expected_seq: int | None,
        key: str | None,
        created_at: float,
    ) -> int | PriorAppend:
        if key is not None:
            row = conn.execute(
                "SELECT first_seq, last_seq, digest FROM append_keys "
                "WHERE session_id = ? AND key = ?",
                (session_id, key),
            ).fetchone()
            if row is not None:
                return PriorAppend(*row)
        last = _last_seq(conn, session_id)
        if expected_seq is not None and expected_seq != last:
            raise ConflictError(session_id, expected_seq, last)
        events = batch.events
        conn.executemany(
            _INSERT_EVENT,
            [(session_id, last + 1 + i, e.type, e.data, created_at) for i, e in enumerate(events)],
        )
        if key is not None and events:
            conn.execute(
                "INSERT INTO append_keys (session_id, key, first_seq, last_seq, digest) "
                "VALUES (?, ?, ?, ?, ?)",
                (session_id, key, last + 1, last + len(events), batch.digest),
            )
        return last + 1

    def _read_page(self, session_id: str, after: int, limit: int | None) -> list[Event]:
        with self._connection(f"a read of session {session_id!r}") as conn:
            rows = conn.execute(_READ, (session_id, after, -1 if limit is None else limit))
            return [decode_event(session_id, *row) for row in rows]

    def _read_data_page(
        self, session_id: str, after: int, limit: int | None
    ) -> list[tuple[int, str, Any]]:
        with self._connection(f"a read of session {session_id!r}") as conn:
            rows = conn.execute(_READ_DATA, (session_id, after, -1 if limit is None else limit))
            return [(seq, type_, decode_row(session_id, seq, data)) for seq, type_, data in rows]

    def _read_text_page(
        self, session_id: str, after: int, limit: int | None
    ) -> list[tuple[int, str, str | bytes]]:
        # As bytes: the reader's decoder takes UTF-8 as it is, so the driver need not make a
        # str of each row first (a tenth of a cold start's read).
        with self._connection(f"a read of session {session_id!r}") as conn:
            return conn.execute(
                _READ_BYTES, (session_id, after, -1 if limit is None else limit)
            ).fetchall()

    def sessions(self) -> list[str]:
        """Every session id with at least one event, sorted."""
        with self._connection("the listing of sessions") as conn:
            # Every session starts at seq 1, so this lists each once without a DISTINCT.
            rows = conn.execute("SELECT session_id FROM events WHERE seq = 1").fetchall()
        return sorted(row[0] for row in rows)

    def last_seq(self, session_id: str) -> int:
        """The session's last seq, 0 when it has no events."""
        check_session_id(session_id)
        with self._connection(f"a read of session {session_id!r}") as conn:
            return _last_seq(conn, session_id)

    def _search(
        self, session_id: str, query: SearchQuery, seqs: list[int] | None, limit: int
    ) -> list[SearchHit]:
        match = f'sess : "{session_token(session_id)}" AND body : ({query.fts5()})'
        params: list[object] = [match, session_id]
        only = ""
        if seqs is not None:
            only = "AND d.seq IN (SELECT value FROM json_each(?))"
            params.append("[" + ",".join(map(str, seqs)) + "]")
        params.append(limit)
        with self._connection(f"a search of session {session_id!r}") as conn:
            _index_new_messages(conn, session_id)
            try:
                rows = conn.execute(_SEARCH.format(only=only), params).fetchall()
            except sqlite3.OperationalError as exc:
                if "fts5" not in str(exc):
                    raise
                # Words are quoted, so this cannot happen; if it ever does, it is about the query.
                raise InvalidInputError(
                    f"the search query {query.text!r} cannot be run: {exc}"
                ) from None
        return [
            SearchHit(seq, score, decode_event(session_id, seq, type_, data, created_at))
            for seq, score, type_, data, created_at in rows
        ]

    def _save_snapshot(self, session_id: str, seq: int, data: str) -> None:
        # Derived data: committed at NORMAL, which in WAL mode skips the flush (half the time of
        # keeping a checkpoint). A power cut may lose the snapshot, never half of it and never
        # an event: the next append at FULL flushes the log over it too.
        relax = self.path != MEMORY and self._synchronous in ("FULL", "EXTRA")
        conn = self._acquire()
        reusable = True
        try:
            if relax:
                conn.execute("PRAGMA synchronous = NORMAL")
            try:
                with _transaction(conn):
                    conn.execute(
                        "INSERT OR REPLACE INTO snapshots (session_id, seq, data) VALUES (?, ?, ?)",
                        (session_id, seq, data),
                    )
                    conn.execute(
                        "DELETE FROM snapshots WHERE session_id = ? AND seq < ?", (session_id, seq)
                    )
            finally:
                if relax:
                    # A connection left at NORMAL would weaken later appends: closed, not reused.
                    reusable = False
                    conn.execute(f"PRAGMA synchronous = {self._synchronous}")
                    reusable = True
        finally:
            if reusable:
                self._release(conn)
            else:
                conn.close()

    def _load_snapshot(self, session_id: str) -> tuple[int, str] | None:
        with self._connection() as conn:
            row = conn.execute(
                "SELECT seq, data FROM snapshots WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
                (session_id,),
            ).fetchone()
        return (int(row[0]), str(row[1])) if row is not None else None

    def _drop_snapshots(self, session_id: str) -> None:
        with self._connection() as conn, _transaction(conn):
            conn.execute("DELETE FROM snapshots WHERE session_id = ?", (session_id,))

    def close(self) -> None:
        """Close every connection and end every subscription; later calls raise
        `StoreClosedError`. Closing twice is fine."""
        with self._lock:
            self._closed = True
            # The list itself stays: the finalizer set up in __init__ holds it.
            idle = self._idle[:]
            self._idle.clear()
            shared, self._shared = self._shared, None
        for conn in idle:
            conn.close()
        if shared is not None:
            with self._shared_lock:
                shared.close()
        self._end_subscriptions()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    @contextmanager
    def _connection(self, action: str | None = None) -> Iterator[sqlite3.Connection]:
        """A connection for the block; with `action` (what the block does, for the message),
        SQLite's failures of the store itself come out as the `StoreError` `_failure` gives.
        Snapshots pass none: their errors are logged, since they are derived data."""
        conn = self._acquire()
        try:
            yield conn
        except sqlite3.DatabaseError as exc:
            failure = None if action is None else self._failure(exc, action)
            if failure is None:
                raise
            raise failure from exc
        finally:
            self._release(conn)

    def _failure(
        self, exc: sqlite3.DatabaseError, action: str, *, append: bool = False
    ) -> StoreError | None:
        """The error for SQLite failing as a store (a full disk, a lock held too long, a file
        that cannot be written or read any more, a damaged file), naming the file, what failed
        and what to do; None for any other error (a bug of ctxfold's, left as it is)."""
        if isinstance(exc, sqlite3.IntegrityError):
            return None  # a constraint: the caller's to judge (a duplicate seq is a conflict)
        name = getattr(exc, "sqlite_errorname", "") or ""  # Python 3.11 on
        text = str(exc)
        found = next(
            (
                (code, advice, kind)
                for code, fragment, advice, kind in _FAILURES
                if (code and name.startswith(code)) or fragment in text
            ),
            None,
        )
        if found is None:
            return None
        code, advice, kind = found
        if code == "SQLITE_BUSY":
            advice = advice.format(timeout=self._busy_timeout)
        if _NOT_UTF8 in text:
            # The driver's message quotes the row's text: the log's content stays out of errors,
            # which applications send to their logs and trackers.
            text = "a row's text is not UTF-8"
        landed = "; nothing of this append was written" if append else ""
        return kind(
            f"the SQLite database {self.path!r} failed during {action}: {text} ({advice}){landed}"
        )

    def _acquire(self) -> sqlite3.Connection:
        """A connection for this thread's use until `_release`: the shared one (its lock held)
        for ``":memory:"``, else an idle one or a new one."""
        if self.path == MEMORY:
            self._shared_lock.acquire()
            shared = self._shared
            if self._closed or shared is None:
                self._shared_lock.release()
                raise StoreClosedError(f"{self!r} is closed")
            return shared
        with self._lock:
            if self._closed:
                raise StoreClosedError(f"{self!r} is closed")
            conn = self._idle.pop() if self._idle else None
        return conn if conn is not None else self._connect()

    def _release(self, conn: sqlite3.Connection) -> None:
        if self.path == MEMORY:
            # The shared connection: `close` closes it, once every holder has let go of it.
            self._shared_lock.release()
            return
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
            if path != MEMORY:
                conn.execute("PRAGMA journal_mode = WAL")
            # Set after the journal mode, and on every connection: SQLite keeps it per connection.
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise InvalidInputError(
                f"{self.path!r} cannot be opened as a ctxfold SQLite database: {exc}"
            ) from None
        return conn


_NOT_UTF8 = "Could not decode to UTF-8"
_DAMAGED = "the file is damaged: restore it from a copy; SQLite's .recover may save the rest"
_FAILURES: tuple[tuple[str, str, str, type[StoreError]], ...] = (
    # (result code, as Python 3.11+ names it; the words of its message, for 3.10; what to do;
    # the error raised)
    (
        "SQLITE_FULL",
        "database or disk is full",
        "the disk is full: free space, then retry",
        StoreUnavailableError,
    ),
    (
        "SQLITE_BUSY",
        "database is locked",
        "another connection held the lock longer than busy_timeout, {timeout:g} s: retry, or "
        "give a longer busy_timeout",
        StoreUnavailableError,
    ),
    (
        "SQLITE_LOCKED",
        "database table is locked",
        "another connection holds the table: retry",
        StoreUnavailableError,
    ),
    (
        "SQLITE_READONLY",
        "readonly database",
        "this process cannot write the file or its folder: check their permissions",
        StoreUnavailableError,
    ),
    ("SQLITE_IOERR", "disk I/O error", "the disk or the file system failed", StoreUnavailableError),
    (
        "SQLITE_CANTOPEN",
        "unable to open database file",
        "the file or its folder cannot be opened: moved, deleted, or no permission",
        StoreUnavailableError,
    ),
    ("SQLITE_CORRUPT", "malformed", _DAMAGED, StoreCorruptError),
    # A text column holding bytes that are not UTF-8: SQLite wrote no such row for ctxfold.
    ("", _NOT_UTF8, _DAMAGED, StoreCorruptError),
)


def _close_all(idle: list[sqlite3.Connection], shared: sqlite3.Connection | None) -> None:
    """Close what a collected store still held (closing a closed connection does nothing)."""
    for conn in idle:
        conn.close()
    idle.clear()
    if shared is not None:
        shared.close()


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction; BEGIN IMMEDIATE takes the write lock before anything is read."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        # SQLite ends some failed transactions by itself; a second ROLLBACK would hide the error.
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _index_new_messages(conn: sqlite3.Connection, session_id: str) -> None:
    """Bring the session's part of the search index up to its last seq.

    The index follows the log at search time, not at append time: FTS5 writes a new segment
    for every transaction that touches it, which would roughly double the pages each small
    append commits. Catching up here writes the same postings in large batches, and is a
    read-only check when nothing is new. Each batch is its own short write transaction, so a
    first search of a long session never holds writers back for long."""
    token = session_token(session_id)
    while True:
        done, last = conn.execute(
            "SELECT (SELECT seq FROM search_progress WHERE session_id = ?), "
            "(SELECT MAX(seq) FROM events WHERE session_id = ?)",
            (session_id, session_id),
        ).fetchone()
        if (last or 0) <= (done or 0):
            return
        with _transaction(conn):
            done = _first(
                conn.execute(
                    "SELECT seq FROM search_progress WHERE session_id = ?", (session_id,)
                ).fetchone()
            )
            rows = conn.execute(
                "SELECT seq, data FROM events WHERE session_id = ? AND seq > ? "
                "AND type = 'message' ORDER BY seq LIMIT ?",
                (session_id, done, _INDEX_BATCH),
            ).fetchall()
            # A short batch reaches the end: everything up to the last seq is then indexed.
            upto = rows[-1][0] if len(rows) == _INDEX_BATCH else _last_seq(conn, session_id)
            texts = [(seq, text) for seq, data in rows if (text := stored_text(data))]
            if texts:
                # docid is an INTEGER PRIMARY KEY, which VACUUM never renumbers (the events
                # table's own rowid it may), so the index keeps pointing at the right events.
                first = _first(conn.execute("SELECT MAX(docid) FROM search_docs").fetchone()) + 1
                conn.executemany(
                    "INSERT INTO search_docs (docid, session_id, seq) VALUES (?, ?, ?)",
                    [(first + i, session_id, seq) for i, (seq, _) in enumerate(texts)],
                )
                conn.executemany(
                    "INSERT INTO search_index (rowid, sess, body) VALUES (?, ?, ?)",
                    [(first + i, token, text) for i, (_, text) in enumerate(texts)],
                )
            conn.execute(
                "INSERT OR REPLACE INTO search_progress (session_id, seq) VALUES (?, ?)",
                (session_id, upto),
            )


def _last_seq(conn: sqlite3.Connection, session_id: str) -> int:
    return _first(
        conn.execute("SELECT MAX(seq) FROM events WHERE session_id = ?", (session_id,)).fetchone()
    )


def _first(row: tuple[object, ...] | None) -> int:
    value = row[0] if row is not None else None
    return int(value) if isinstance(value, int) else 0
