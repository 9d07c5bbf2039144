"""Helpers for testing code built on ctxfold, and for testing new stores.

- `FunctionSummarizer`: a summarizer test double that records the requests it got.
- `FixedCounter`: a token counter charging one token per word, so test budgets are round.
- `FakeLLMServer`: a local HTTP server on 127.0.0.1 that answers like the OpenAI and Anthropic
  APIs (completions, errors, timeouts), for testing LLM summarizers with the real SDK clients.
- `EventStoreContract` (in `ctxfold.testing.store_contract`, which needs pytest): the suite every
  store passes; subclass it to check a store of your own.
"""

from __future__ import annotations

from typing import Any

from ctxfold.testing.counters import FixedCounter
from ctxfold.testing.doubles import FunctionSummarizer
from ctxfold.testing.fake_llm import FakeLLMServer

__all__ = ["EventStoreContract", "FakeLLMServer", "FixedCounter", "FunctionSummarizer"]


def __getattr__(name: str) -> Any:
    # Imported on first use so that `import ctxfold.testing` does not need pytest.
    if name == "EventStoreContract":
        from ctxfold.testing.store_contract import EventStoreContract

        return EventStoreContract
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
