"""The SQLite schema of `SQLiteStore`, as numbered migrations, and the runner that applies them.

- ``events``: the log, primary key (session_id, seq).
- ``append_keys``: the idempotency key of each keyed append, with the seqs it got (version 2).
- ``snapshots``: derived projection snapshots, newest per session (version 3).
- ``search_docs``, ``search_index`` (FTS5) and ``search_progress``: the full-text index of message
  events (version 4). It is derived data, brought up to date by each search rather than by each
  append: an append then writes only its own rows, and the events written before this version
  are indexed by the first search, like any other. Version 5 rebuilds it, since tool-call
  arguments are indexed by their JSON values from then on.
"""

from __future__ import annotations

import hashlib
import sqlite3

from ctxfold.errors import SchemaVersionError

# Each entry brings a database from the version before it to its own, one statement at a time;
# never edit a shipped one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
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
    ),
    (
        """
        CREATE TABLE append_keys (
            session_id TEXT NOT NULL,
            key TEXT NOT NULL,
            first_seq INTEGER NOT NULL,
            last_seq INTEGER NOT NULL,
            digest TEXT NOT NULL,
            PRIMARY KEY (session_id, key)
        ) WITHOUT ROWID
        """,
    ),
    (
        """
        CREATE TABLE snapshots (
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            data TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)
        )
        """,
    ),
    (
        """
        CREATE TABLE search_docs (
            docid INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL
        )
        """,
        # Contentless: the words live in the log already; the index keeps only its postings.
        # `sess` holds one token per session, so a search reads only that session's postings.
        """
        CREATE VIRTUAL TABLE search_index USING fts5(
            sess, body, content='', tokenize='unicode61 remove_diacritics 0'
        )
        """,
        # The last seq of each session whose messages are in the index. Events past it,
        # including every event written before this version, are indexed by the next search.
        """
        CREATE TABLE search_progress (
            session_id TEXT PRIMARY KEY,
            seq INTEGER NOT NULL
        ) WITHOUT ROWID
        """,
    ),
    (
        # Version 5 indexes a tool call's JSON arguments by their values, escapes read: the index
        # is derived data, so it is emptied and the next search of each session rebuilds it.
        "DELETE FROM search_docs",
        "INSERT INTO search_index (search_index) VALUES ('delete-all')",
        "DELETE FROM search_progress",
    ),
)


def session_token(session_id: str) -> str:
    """The one FTS5 word that stands for a session in the index (letters and digits only)."""
    return "s" + hashlib.blake2b(session_id.encode("utf-8"), digest_size=12).hexdigest()


def migrate(conn: sqlite3.Connection, path: str) -> None:
    """Bring the database on `conn` to the newest schema, in one transaction."""
    # BEGIN IMMEDIATE: two processes opening a new file at once migrate one after the other.
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
        version = row[0] or 0
        if version > len(MIGRATIONS):
            raise SchemaVersionError(
                f"{path!r} has schema version {version}, newer than this ctxfold "
                f"understands ({len(MIGRATIONS)}); upgrade ctxfold to open it"
            )
        for number, statements in enumerate(MIGRATIONS[version:], start=version + 1):
            for statement in statements:
                conn.execute(statement)
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (number,))
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
