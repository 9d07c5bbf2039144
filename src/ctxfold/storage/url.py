"""open_store: a store from a URL, so a command line or a config file can name one."""

from __future__ import annotations

from pathlib import Path

from ctxfold.errors import InvalidInputError
from ctxfold.storage.base import StoreBase
from ctxfold.storage.checks import redacted
from ctxfold.storage.memory import MemoryStore
from ctxfold.storage.sqlite import MEMORY, SQLiteStore

SUPPORTED = (
    "memory://",
    "sqlite:///relative/path.db, sqlite:////absolute/path.db or sqlite:///:memory:",
    "postgresql://user@host:port/database[?schema=name] (or postgres://)",
)


def open_store(url: str, *, create: bool = True) -> StoreBase:
    """Open the store a URL names.

    - ``memory://``: a `MemoryStore`;
    - ``sqlite:///path``: a `SQLiteStore`; the path is what follows the third slash, so
      ``sqlite:///data/ctxfold.db`` is relative to the working directory and
      ``sqlite:////var/lib/ctxfold.db`` is absolute; ``sqlite:///:memory:`` is in memory;
    - ``postgresql://…`` or ``postgres://…``: a `PostgresStore`; a ``schema`` query parameter
      names the schema and is not passed on to the server; ``connect_timeout`` (seconds, libpq's
      own parameter) sets how long to wait for the server (5 s when absent).

    `create=False` opens a SQLite file only if it exists, and a PostgreSQL schema only if it
    holds ctxfold's tables (else `StoreUnavailableError`, and nothing is made): for readers.

    >>> open_store("sqlite:///:memory:")
    SQLiteStore(':memory:')
    """
    if not isinstance(url, str):
        raise InvalidInputError(f"a store URL must be a string, not {url!r}")
    scheme, separator, rest = url.partition("://")
    scheme = scheme.lower() if separator else ""
    if scheme == "memory" and rest == "":
        return MemoryStore()
    if scheme == "sqlite":
        return SQLiteStore(_sqlite_path(url, rest), create=create)
    if scheme in ("postgresql", "postgres"):
        return _open_postgres(url, create)
    raise InvalidInputError(
        f"cannot open a store from {redacted(url)!r}; supported URLs: " + "; ".join(SUPPORTED)
    )


def sqlite_file(url: str) -> Path | None:
    """The file a ``sqlite:///`` URL names (``~`` expanded), for a caller that must know whether
    it is there before opening it; None for any other store and for ``sqlite:///:memory:``.
    A malformed SQLite URL raises `InvalidInputError`, as `open_store` does.

    >>> str(sqlite_file("sqlite:///data/agent.db"))
    'data/agent.db'
    >>> sqlite_file("postgresql://db/agents") is None
    True
    """
    scheme, separator, rest = url.partition("://")
    if not separator or scheme.lower() != "sqlite":
        return None
    path = _sqlite_path(url, rest)
    return None if path == MEMORY else Path(path).expanduser()


def _sqlite_path(url: str, rest: str) -> str:
    # "sqlite:///x" leaves "/x": an empty host, then the path after the slash.
    if not rest.startswith("/") or len(rest) < 2 or "?" in rest or "#" in rest:
        raise InvalidInputError(
            f"cannot open a store from {url!r}: a SQLite URL is sqlite:///relative/path.db, "
            "sqlite:////absolute/path.db or sqlite:///:memory:, with no host or query"
        )
    return rest[1:]


def _open_postgres(url: str, create: bool) -> StoreBase:
    from ctxfold.storage.postgres import PostgresStore

    return PostgresStore(url, create=create)  # which reads a schema query parameter
