"""MemoryStore keeps the store contract."""

from __future__ import annotations

from ctxfold.storage import MemoryStore
from ctxfold.testing.store_contract import EventStoreContract


class TestMemoryStore(EventStoreContract):
    persistent = False

    def make_store(self) -> MemoryStore:
        return MemoryStore()
