"""SQLiteStore keeps the store contract, in a file and in memory, and opens files with care."""

from __future__ import annotations

import gc
import sqlite3
from pathlib import Path

import pytest

from ctxfold.errors import (
    InvalidInputError,
    SchemaVersionError,
    StoreCorruptError,
    StoreUnavailableError,
)
from ctxfold.events import NewEvent
from ctxfold.storage import SQLiteStore, StoreBase, default_sqlite_path
from ctxfold.testing.store_contract import EventStoreContract


class TestSQLiteFile(EventStoreContract):
    persistent = True

    @pytest.fixture(autouse=True)
    def _path(self, tmp_path: Path) -> None:
        self.path = tmp_path / "events.db"

    def make_store(self) -> SQLiteStore:
        return SQLiteStore(self.path)

    def reopen(self, store: StoreBase) -> SQLiteStore:
        store.close()
        return SQLiteStore(self.path)


class TestSQLiteMemory(EventStoreContract):
    persistent = False

    def make_store(self) -> SQLiteStore:
        return SQLiteStore(":memory:")


def test_each_memory_store_is_private() -> None:
    """Two ':memory:' stores never see each other's events."""
    with SQLiteStore(":memory:") as one, SQLiteStore(":memory:") as two:
        one.append("s", [NewEvent("turn")])
        assert two.sessions() == []


def test_missing_folders_are_created(tmp_path: Path) -> None:
    """A path in folders that do not exist yet works: the folders are made."""
    path = tmp_path / "a" / "b" / "events.db"
    with SQLiteStore(path) as store:
        store.append("s", [NewEvent("turn")])
    assert path.is_file()


def test_a_reader_is_not_blocked_by_an_open_write(tmp_path: Path) -> None:
    """While another connection holds a write transaction, the store still reads (WAL)."""
    path = tmp_path / "events.db"
    with SQLiteStore(path) as store:
        store.append("s", [NewEvent("turn", {"n": 1})])
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute("INSERT INTO events VALUES ('s', 2, 'turn', '{\"n\":2}', 0.0)")
            assert [e.data for e in store.read("s")] == [{"n": 1}]
            other.execute("ROLLBACK")
        finally:
            other.close()


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    """Opening a file that is not SQLite raises InvalidInputError naming the path."""
    path = tmp_path / "notes.txt"
    path.write_text("these are not the events you are looking for\n" * 100)
    with pytest.raises(InvalidInputError, match=r"notes\.txt"):
        SQLiteStore(path)


def test_a_database_from_a_newer_ctxfold_is_refused(tmp_path: Path) -> None:
    """A file whose schema version is newer than this ctxfold's is refused, not misread."""
    path = tmp_path / "events.db"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO schema_version (version) VALUES (99)")
    conn.close()
    with pytest.raises(SchemaVersionError, match="upgrade ctxfold"):
        SQLiteStore(path)


@pytest.mark.parametrize("kwargs", [{"path": ""}, {"path": ":memory:", "synchronous": "SOMETIMES"}])
def test_bad_arguments_are_refused(kwargs: dict[str, str]) -> None:
    """An empty path or an unknown synchronous level is an InvalidInputError."""
    with pytest.raises(InvalidInputError):
        SQLiteStore(**kwargs)


def test_default_path_follows_xdg_data_home() -> None:
    """The default database lives under XDG_DATA_HOME when it is an absolute path."""
    path = default_sqlite_path({"XDG_DATA_HOME": "/data/me", "HOME": "/home/me"})
    assert path == Path("/data/me/ctxfold/ctxfold.db")


@pytest.mark.parametrize("xdg", [None, "", "relative/dir"])
def test_default_path_falls_back_to_local_share(xdg: str | None) -> None:
    """Without a usable XDG_DATA_HOME the database is in ~/.local/share/ctxfold."""
    env = {"HOME": "/home/me"} if xdg is None else {"HOME": "/home/me", "XDG_DATA_HOME": xdg}
    assert default_sqlite_path(env) == Path("/home/me/.local/share/ctxfold/ctxfold.db")


@pytest.mark.parametrize(("level", "code"), [("FULL", 2), ("EXTRA", 3), ("NORMAL", 1)])
def test_a_snapshot_commits_without_the_flush_and_appends_keep_their_level(
    tmp_path: Path, level: str, code: int
) -> None:
    """A snapshot is derived data, so it commits at NORMAL (no flush in WAL mode) however strong
    the store's level; the appends before and after it commit at the store's own level."""
    store = SQLiteStore(tmp_path / "events.db", synchronous=level)
    store.append("s", [NewEvent("turn")])
    statements: list[str] = []
    with store._connection() as conn:  # the one connection every call below reuses
        conn.set_trace_callback(statements.append)
    store.save_snapshot("s", 1, '{"n": 1}')
    store.append("s", [NewEvent("turn")])
    with store._connection() as conn:
        conn.set_trace_callback(None)
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == code
    snapshot = next(i for i, s in enumerate(statements) if "INTO snapshots" in s)
    append = next(i for i, s in enumerate(statements) if "INTO events" in s)
    pragmas = [(i, s) for i, s in enumerate(statements) if s.startswith("PRAGMA synchronous")]
    if level == "NORMAL":
        assert pragmas == []
    else:
        assert [s for _, s in pragmas] == [
            "PRAGMA synchronous = NORMAL",
            f"PRAGMA synchronous = {level}",
        ]
        assert pragmas[0][0] < snapshot < pragmas[1][0] < append
    store.close()
    with SQLiteStore(tmp_path / "events.db") as reopened:
        assert reopened.load_snapshot("s") == (1, '{"n": 1}')
        assert reopened.last_seq("s") == 2


@pytest.mark.parametrize("where", ["file", "memory"])
def test_a_store_dropped_without_close_closes_its_connections(where: str, tmp_path: Path) -> None:
    """A store that goes out of scope unclosed (the README's example does) closes the
    connections it held when it is collected, instead of leaving them to Python, which warns
    about each one left open from 3.13 on."""
    store = SQLiteStore(str(tmp_path / "log.db") if where == "file" else ":memory:")
    store.append("s", [NewEvent("note", {"n": 1})])
    held = list(store._idle) if where == "file" else [store._shared]
    assert held and all(conn.execute("SELECT 1").fetchone() == (1,) for conn in held)
    del store
    gc.collect()
    for conn in held:
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            conn.execute("SELECT 1")


def test_close_then_collection_closes_nothing_twice(tmp_path: Path) -> None:
    """`close` empties the pool the collection would close; both are safe together."""
    store = SQLiteStore(str(tmp_path / "log.db"))
    store.append("s", [NewEvent("note", {"n": 1})])
    held = list(store._idle)
    store.close()
    del store
    gc.collect()
    for conn in held:
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            conn.execute("SELECT 1")


def _limit_next_connection(store: SQLiteStore, pragma: str) -> None:
    """Set `pragma` on the connection the store's next call will take (its newest idle one)."""
    with store._connection() as conn:
        conn.execute(pragma)


@pytest.mark.guarantee("sqlite-failure-one-error")
def test_a_full_disk_is_a_store_error_and_the_append_does_not_land(tmp_path: Path) -> None:
    """SQLite's "database or disk is full" (here: the file may not grow, which SQLite reports
    the same way) is a StoreUnavailableError naming the file, the append and what to do, not a
    raw driver error; none of the batch is written, and the store goes on working."""
    with SQLiteStore(tmp_path / "events.db") as store:
        store.append("s", [NewEvent("turn", {"n": 0})])
        with store._connection() as conn:
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
    with SQLiteStore(tmp_path / "events.db") as store:
        _limit_next_connection(store, f"PRAGMA max_page_count = {pages}")
        batch = [NewEvent("turn", {"text": "x" * 2_000, "n": n}) for n in range(1, 50)]
        with pytest.raises(StoreUnavailableError) as caught:
            store.append("s", batch)
        message = str(caught.value)
        assert "events.db" in message and "an append to session 's'" in message
        assert "disk is full" in message and "nothing of this append was written" in message
        assert store.last_seq("s") == 1
    with SQLiteStore(tmp_path / "events.db") as store:
        assert store.append("s", batch[:1])[0].seq == 2


@pytest.mark.guarantee("sqlite-failure-one-error")
def test_a_lock_held_past_busy_timeout_is_a_store_error_naming_the_timeout(tmp_path: Path) -> None:
    """An append that waited busy_timeout for another writer's lock fails with a
    StoreUnavailableError that says so and how to wait longer; a search, which brings its index
    up to date, says the same for itself."""
    path = tmp_path / "events.db"
    with SQLiteStore(path, busy_timeout=0.05) as store:
        store.append("s", [NewEvent("message", {"message": {"role": "user", "content": "hi"}})])
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            with pytest.raises(StoreUnavailableError, match=r"busy_timeout, 0\.05 s"):
                store.append("s", [NewEvent("turn")])
            with pytest.raises(StoreUnavailableError, match="during a search of session 's'"):
                store.search("s", "hi")
            other.execute("ROLLBACK")
        finally:
            other.close()
        assert store.last_seq("s") == 1
        assert [hit.seq for hit in store.search("s", "hi")] == [1]


@pytest.mark.guarantee("sqlite-failure-one-error")
def test_a_read_only_connection_is_a_store_error(tmp_path: Path) -> None:
    """A write SQLite refuses as read-only is a StoreUnavailableError that says to check the
    permissions, and nothing is written."""
    with SQLiteStore(tmp_path / "events.db") as store:
        _limit_next_connection(store, "PRAGMA query_only = 1")
        with pytest.raises(StoreUnavailableError, match="check their permissions"):
            store.append("s", [NewEvent("turn")])
    with SQLiteStore(tmp_path / "events.db") as store:
        assert store.last_seq("s") == 0


@pytest.mark.guarantee("sqlite-failure-one-error")
def test_a_damaged_file_is_a_store_corrupt_error_naming_it(tmp_path: Path) -> None:
    """A file whose pages were overwritten (here: every page after the first, where the schema
    is) is a StoreCorruptError that names the file and says to restore it, when it is opened or
    read, not a raw driver error or an 'internal error'."""
    path = tmp_path / "events.db"
    with SQLiteStore(path) as store:
        store.append("s", [NewEvent("turn", {"text": "x" * 500, "n": n}) for n in range(200)])
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(path.read_bytes())
    data[4096:] = b"\xa5" * (len(data) - 4096)
    path.write_bytes(bytes(data))
    # Opening reads the schema's version, which may already meet a damaged page; a read surely.
    damaged = r"events\.db.*restore it from a copy"
    with pytest.raises(StoreCorruptError, match=damaged), SQLiteStore(path) as store:
        store.read("s")


@pytest.mark.guarantee("sqlite-failure-one-error")
def test_a_row_that_is_not_utf8_is_a_store_corrupt_error(tmp_path: Path) -> None:
    """A log row whose text is not UTF-8 (no ctxfold write makes one) is a StoreCorruptError
    naming the read it broke, in a read, a search and a session's view alike."""
    path = tmp_path / "events.db"
    with SQLiteStore(path) as store:
        store.append("s", [NewEvent("message", {"message": {"role": "user", "content": "hi"}})])
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(
            "INSERT INTO events VALUES ('s', 2, 'message', CAST(X'7B22FF22' AS TEXT), 0.0)"
        )
    finally:
        conn.close()
    with SQLiteStore(path) as store:
        with pytest.raises(StoreCorruptError, match="during a read of session 's'") as caught:
            store.read("s")
        # The row's text stays out of the message (the driver's own quotes it).
        assert "a row's text is not UTF-8" in str(caught.value) and '{"' not in str(caught.value)
        with pytest.raises(StoreCorruptError, match="during a search of session 's'"):
            store.search("s", "hi")
        with pytest.raises(StoreCorruptError):
            store.session("s").messages()


@pytest.mark.guarantee("sqlite-failure-one-error")
def test_a_row_that_is_not_json_is_a_store_corrupt_error_naming_it(tmp_path: Path) -> None:
    """A log row whose text is not JSON (no store writes one) is a StoreCorruptError naming the
    session and the event, in a read and in a session's view, rather than a JSONDecodeError."""
    path = tmp_path / "events.db"
    with SQLiteStore(path) as store:
        store.append("s", [NewEvent("turn")])
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("INSERT INTO events VALUES ('s', 2, 'turn', 'not json', 0.0)")
    finally:
        conn.close()
    with SQLiteStore(path) as store:
        for read in (lambda: store.read("s"), lambda: store.session("s").messages()):
            with pytest.raises(StoreCorruptError, match=r"session 's', event 2: .* not JSON"):
                read()
