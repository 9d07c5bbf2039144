"""Event stores: the durable, append-only log behind every session.

`MemoryStore` for tests, `SQLiteStore` (the embedded default), `PostgresStore` (needs the
``postgres`` extra) for workers that share sessions; `open_store` picks one from a URL. Every
store is a `StoreBase`: appends (idempotent with a key), reads and streams, full-text search,
projection snapshots and live subscriptions, with one contract suite in `ctxfold.testing`.
"""

from __future__ import annotations

from ctxfold.errors import StoreClosedError
from ctxfold.events import Event, NewEvent
from ctxfold.storage.base import EventStore, StoreBase
from ctxfold.storage.checks import MAX_IDEMPOTENCY_KEY_BYTES, MAX_SESSION_ID_BYTES
from ctxfold.storage.memory import MemoryStore
from ctxfold.storage.postgres import PostgresStore
from ctxfold.storage.search import SearchHit
from ctxfold.storage.sqlite import SQLiteStore, default_sqlite_path
from ctxfold.storage.url import open_store

__all__ = [
    "MAX_IDEMPOTENCY_KEY_BYTES",
    "MAX_SESSION_ID_BYTES",
    "Event",
    "EventStore",
    "MemoryStore",
    "NewEvent",
    "PostgresStore",
    "SQLiteStore",
    "SearchHit",
    "StoreBase",
    "StoreClosedError",
    "default_sqlite_path",
    "open_store",
]
