"""`AsyncSession`: a `Session` for asyncio agents, without blocking the event loop.

Each call runs the synchronous method in a worker thread (`asyncio.to_thread`). There is one
control flow, the synchronous one; this class only moves it off the loop. Stores are
thread-safe.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

from ctxfold.errors import InvalidInputError
from ctxfold.events import Event, NewEvent
from ctxfold.messages import Message
from ctxfold.protocols import TokenCounter
from ctxfold.session.projection import Item
from ctxfold.session.recall import DEFAULT_MAX_TOKENS, Recalled
from ctxfold.session.session import Session


class AsyncSession:
    """A `Session` for asyncio code: every call runs in a worker thread, off the event loop.

    >>> import asyncio
    >>> from ctxfold.storage import MemoryStore
    >>> async def main() -> int:
    ...     session = AsyncSession(MemoryStore().session("a"))
    ...     await session.append(Message("user", "hi"))
    ...     return len(await session.messages())
    >>> asyncio.run(main())
    1
    """

    def __init__(self, session: Session) -> None:
        if not isinstance(session, Session):
            hint = (
                "it is one already: use it as it is"
                if isinstance(session, AsyncSession)
                else "pass store.session(id), e.g. AsyncSession(store.session('chat-1'))"
            )
            raise InvalidInputError(
                f"AsyncSession wraps a Session, not {type(session).__name__} {session!r:.80}; "
                + hint
            )
        self.sync = session
        self.id = session.id

    async def append(
        self,
        items: Message | NewEvent | Iterable[Message | NewEvent],
        *,
        expected_seq: int | None = None,
        idempotency_key: str | None = None,
    ) -> list[Event]:
        return await asyncio.to_thread(
            self.sync.append, items, expected_seq=expected_seq, idempotency_key=idempotency_key
        )

    async def messages(self) -> Sequence[Message]:
        return await asyncio.to_thread(self.sync.messages)

    async def items(self) -> Sequence[Item]:
        return await asyncio.to_thread(self.sync.items)

    async def events(self, after: int = 0) -> list[Event]:
        return await asyncio.to_thread(self.sync.events, after)

    async def record_usage(self, prompt_tokens: int, **kwargs: Any) -> Event:
        return await asyncio.to_thread(self.sync.record_usage, prompt_tokens, **kwargs)

    async def message_count(self) -> int:
        return await asyncio.to_thread(self.sync.message_count)

    async def estimate(self, counter: TokenCounter | None = None) -> int:
        return await asyncio.to_thread(self.sync.estimate, counter)

    async def pin(self, *item_ids: int) -> Event:
        return await asyncio.to_thread(self.sync.pin, *item_ids)

    async def unpin(self, *item_ids: int) -> Event:
        return await asyncio.to_thread(self.sync.unpin, *item_ids)

    async def retract(self, item_id: int | None = None) -> Item:
        return await asyncio.to_thread(self.sync.retract, item_id)

    async def reset(self) -> Event:
        return await asyncio.to_thread(self.sync.reset)

    async def recall(
        self,
        query: str | None = None,
        *,
        ref: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> Recalled:
        return await asyncio.to_thread(self.sync.recall, query, ref=ref, max_tokens=max_tokens)

    async def call_recall(self, arguments: str | Mapping[str, Any]) -> str:
        return await asyncio.to_thread(self.sync.call_recall, arguments)

    def watch(
        self,
        after: int = 0,
        *,
        idle_timeout: float | None = None,
        stop: threading.Event | None = None,
    ) -> AsyncIterator[Event]:
        """`Session.watch` for asyncio code: ``async for event in session.watch(): ...``; the
        waiting runs in a worker thread, and leaving the loop or cancelling ends it."""
        return self.sync.store.asubscribe(self.id, after, idle_timeout=idle_timeout, stop=stop)


__all__ = ["AsyncSession"]
