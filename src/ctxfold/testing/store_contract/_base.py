"""What every part of the store contract shares: the store fixture, flags and small helpers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar, Literal

import pytest

from ctxfold.errors import ConfigurationError
from ctxfold.events import NewEvent
from ctxfold.messages import Message, ToolCall
from ctxfold.storage.base import StoreBase

UNICODE_TEXTS = {
    "emoji": "deploy done 🚀✅ 👩🏽‍💻 family 👨‍👩‍👧‍👦",
    "cjk": "日本語のテキスト、中文文本，한국어 텍스트",
    "rtl": "مرحبا بالعالم שלום עולם",
    "combining": "e\u0301 n\u0303 Å \u200d zero\u200bwidth",
    "controls": "nul:\x00 bell:\x07 esc:\x1b tab:\t cr:\r lf:\n del:\x7f",
    "astral": "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𓂀 \U0010fffd",
    "escapes": 'quote " backslash \\ slash / \\u0000 literal',
}


def turn(n: int, **extra: Any) -> NewEvent:
    """A small event whose data says which one it is."""
    return NewEvent("turn", {"n": n, **extra})


def said(
    role: Literal["system", "user", "assistant", "tool"],
    content: str | None,
    *calls: tuple[str, str],
) -> NewEvent:
    """A message event; each of `calls` is a (name, arguments) tool call, and a tool message
    answers the call ``call_0``."""
    tool_calls = tuple(ToolCall(f"call_{i}", name, args) for i, (name, args) in enumerate(calls))
    answers = "call_0" if role == "tool" else None
    return NewEvent.message(Message(role, content, tool_calls, tool_call_id=answers))


class ContractBase:
    """The fixture and flags every part of `EventStoreContract` uses."""

    persistent: ClassVar[bool] = False
    """True when `reopen` gives a new store over the same data (files and servers)."""

    def make_store(self) -> StoreBase:
        """A new, empty store for one test."""
        raise ConfigurationError(f"{type(self).__name__} must implement make_store()")

    def reopen(self, store: StoreBase) -> StoreBase:
        """Close `store` and open it again over the same data; only called when `persistent`."""
        raise ConfigurationError(
            f"{type(self).__name__} is persistent, so it must implement reopen()"
        )

    @pytest.fixture
    def store(self) -> Iterator[StoreBase]:
        """The store under test, closed at the end."""
        self._opened: list[StoreBase] = []
        first = self.make_store()
        self._opened.append(first)
        yield first
        for opened in self._opened:
            opened.close()

    def _reopen(self, store: StoreBase) -> StoreBase:
        if not self.persistent:
            pytest.skip(f"{type(self).__name__} declares persistent = False")
        again = self.reopen(store)
        self._opened.append(again)
        return again
