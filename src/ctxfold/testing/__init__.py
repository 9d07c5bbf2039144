"""Helpers for testing code built on ctxfold, and for testing new stores.

`EventStoreContract` (in `ctxfold.testing.store_contract`, which needs pytest) is the suite
every store passes; subclass it to check a store of your own.
"""

from __future__ import annotations

from typing import Any

__all__ = ["EventStoreContract"]


def __getattr__(name: str) -> Any:
    # Imported on first use so that `import ctxfold.testing` does not need pytest.
    if name == "EventStoreContract":
        from ctxfold.testing.store_contract import EventStoreContract

        return EventStoreContract
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
