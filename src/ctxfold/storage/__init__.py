"""Event stores: the durable, append-only log behind every session.

`MemoryStore` for tests, `SQLiteStore` (the embedded default), `PostgresStore` (needs the
``postgres`` extra) for workers that share sessions; `open_store` picks one from a URL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxfold.events import Event, NewEvent
from ctxfold.storage.base import StoreBase, StoreClosedError
from ctxfold.storage.memory import MemoryStore
from ctxfold.storage.sqlite import SQLiteStore, default_sqlite_path
from ctxfold.storage.url import open_store

if TYPE_CHECKING:
    from ctxfold.storage.postgres import PostgresStore

__all__ = [
    "Event",
    "MemoryStore",
    "NewEvent",
    "PostgresStore",
    "SQLiteStore",
    "StoreBase",
    "StoreClosedError",
    "default_sqlite_path",
    "open_store",
]


def __getattr__(name: str) -> Any:
    # PostgresStore is importable without psycopg; it says what to install when it is built.
    if name == "PostgresStore":
        from ctxfold.storage.postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
