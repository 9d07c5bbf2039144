"""The contract every store keeps, as a pytest suite a store's tests subclass.

>>> class TestMyStore(EventStoreContract):  # doctest: +SKIP
...     persistent = True
...     def make_store(self):
...         return MyStore(self.path)
...     def reopen(self, store):
...         store.close()
...         return MyStore(self.path)

A store is a `ctxfold.storage.StoreBase` subclass. A difference between backends is a capability
flag on the subclass (`persistent`), never a check of the store's type. Needs pytest.
"""

from __future__ import annotations

from ctxfold.testing.store_contract._base import UNICODE_TEXTS, turn
from ctxfold.testing.store_contract.derived import SearchContract, SnapshotContract
from ctxfold.testing.store_contract.live import StreamContract, SubscribeContract
from ctxfold.testing.store_contract.log import LogContract
from ctxfold.testing.store_contract.retry import RetryContract
from ctxfold.testing.store_contract.sessions import SessionContract


class EventStoreContract(
    LogContract,
    RetryContract,
    StreamContract,
    SearchContract,
    SnapshotContract,
    SubscribeContract,
    SessionContract,
):
    """What every store guarantees, and what a `Session` over it does (recall, watch, retried
    appends); subclass it and implement `make_store` (and `reopen`)."""


__all__ = ["UNICODE_TEXTS", "EventStoreContract", "turn"]
