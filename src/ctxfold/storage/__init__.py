"""Event stores: the durable, append-only log behind every session.

`MemoryStore` for tests, `SQLiteStore` (the embedded default), `PostgresStore` (needs the
``postgres`` extra) for workers that share sessions; `open_store` picks one from a URL.
"""

from __future__ import annotations

from ctxfold.errors import StoreClosedError
from ctxfold.events import Event, NewEvent
from ctxfold.storage.base import StoreBase
from ctxfold.storage.memory import MemoryStore
from ctxfold.storage.postgres import PostgresStore
from ctxfold.storage.sqlite import SQLiteStore, default_sqlite_path
from ctxfold.storage.url import open_store

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
