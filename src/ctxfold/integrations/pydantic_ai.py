"""ctxfold as a pydantic-ai capability: `CtxfoldCapability`.

```python
agent = Agent(model, capabilities=[CtxfoldCapability(budget=Budget.for_model("gpt-4o"))])
result = await agent.run("fix the failing test", conversation_id="chat-1")
```

Before every model request the capability appends the conversation's new messages to the
ctxfold session named by ``ctx.conversation_id``, compacts when the budget says so, and sets the
request's messages to the projection. Only what this one request sends changes:
`result.all_messages()` still returns every message, and a tool call is never separated from its
return. After a context-overflow error it recovers and makes one more attempt.

Needs the ``pydantic-ai`` extra: ``pip install 'ctxfold[pydantic-ai]'``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ctxfold.errors import InvalidInputError, MissingDependencyError
from ctxfold.integrations._common import (
    SourceIndex,
    check_recall,
    make_compactor,
    open_session,
    plain_extra,
    source_of,
    with_source,
)
from ctxfold.messages import Message
from ctxfold.overflow import is_context_overflow

try:
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.exceptions import RetryModelRequest
    from pydantic_ai.messages import ModelMessage

    from ctxfold.integrations import _pydantic_ai_messages as conv
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        "ctxfold.integrations.pydantic_ai", "pydantic-ai-slim", "pydantic-ai"
    ) from exc

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelResponse
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.run import AgentRunResult
    from pydantic_ai.tools import RunContext
    from pydantic_ai.toolsets import AbstractToolset

    from ctxfold.compactor import Compactor
    from ctxfold.integrations._common import RecallTool
    from ctxfold.session import Session
    from ctxfold.storage.base import EventStore
    from ctxfold.tokens import Budget


class CtxfoldCapability(AbstractCapability[Any]):
    """Keeps a pydantic-ai agent's model requests within a budget without touching its history.

    - `store`: where the logs live; None opens SQLite at ctxfold's default path.
    - `budget`, or `compactor` for full control: when and how far to compact. With neither the
      model sees the projection as it stands (logged, never compacted).
    - `recall`: True registers ctxfold's recall (`ctxfold.Recall`) as a tool, or pass a
      `RecallTool` of your own.

    Each conversation id (``agent.run(..., conversation_id=...)``, or carried on the message
    history) is one ctxfold session of the same id. Messages are matched to the log by their
    position in the conversation's history; the match is kept in the log, so a restarted
    process that passes the same history appends nothing twice.
    """

    id: str | None = "ctxfold"

    def __init__(
        self,
        store: EventStore | None = None,
        budget: Budget | None = None,
        compactor: Compactor | None = None,
        *,
        recall: RecallTool | bool | None = None,
    ) -> None:
        self.store = store
        self.compactor = make_compactor(budget, compactor)
        self.recall = check_recall(recall)
        self._conversations: dict[str, _Conversation] = {}
        self._lock = threading.Lock()

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # built in code, with a store: not from a YAML or JSON spec

    # -- hooks -----------------------------------------------------------------------------
    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Log the conversation's new messages, compact if due, send the projection."""
        conversation = await asyncio.to_thread(self._conversation, ctx.conversation_id)
        await asyncio.to_thread(conversation.record, request_context.messages)
        if self.compactor is not None:
            await self.compactor.amaybe_compact(conversation.session)
        messages = await asyncio.to_thread(conversation.projection)
        return dataclasses.replace(request_context, messages=messages)

    async def after_run(
        self, ctx: RunContext[Any], *, result: AgentRunResult[Any]
    ) -> AgentRunResult[Any]:
        """Log the run's last response (no model request has carried it yet), so the log
        holds the whole conversation when the run ends."""
        conversation = await asyncio.to_thread(self._conversation, ctx.conversation_id)
        await asyncio.to_thread(conversation.record, result.all_messages())
        return result

    async def on_model_request_error(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        error: Exception,
    ) -> ModelResponse:
        """After the first context overflow of a request: recover and make one more attempt."""
        if self.compactor is None or request_context.attempt > 1 or not is_context_overflow(error):
            raise error
        conversation = await asyncio.to_thread(self._conversation, ctx.conversation_id)
        await self.compactor.arecover_from_overflow(conversation.session)
        raise RetryModelRequest()

    async def prepare_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """On the attempt after a recovery, send the recovered projection."""
        if request_context.attempt == 1:
            return request_context
        conversation = await asyncio.to_thread(self._conversation, ctx.conversation_id)
        messages = await asyncio.to_thread(conversation.projection)
        return dataclasses.replace(request_context, messages=messages)

    def get_toolset(self) -> AbstractToolset[Any] | None:
        """The `recall` given at construction as a tool bound to the run's conversation."""
        recall = self.recall
        if recall is None:
            return None
        from pydantic_ai.tools import Tool
        from pydantic_ai.toolsets import FunctionToolset

        async def invoke(ctx: RunContext[Any], **arguments: Any) -> str:
            session = (await asyncio.to_thread(self._conversation, ctx.conversation_id)).session
            return await asyncio.to_thread(recall, session, arguments)

        tool = Tool[Any].from_schema(
            invoke,
            name=recall.name,
            description=recall.description,
            json_schema=dict(recall.parameters),
            takes_ctx=True,
        )
        return FunctionToolset([tool])

    def session(self, conversation_id: str) -> Session:
        """The ctxfold session that logs a conversation."""
        return self._conversation(conversation_id).session

    # -- internals -------------------------------------------------------------------------
    def _conversation(self, conversation_id: Any) -> _Conversation:
        with self._lock:
            found = (
                self._conversations.get(conversation_id)
                if isinstance(conversation_id, str)
                else None
            )
            if found is None:
                session = open_session(self.store, conversation_id, what="conversation id")
                found = self._conversations[conversation_id] = _Conversation(session)
            return found


class _Conversation:
    """One conversation's session, the index of what it holds, and its converted projection."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.index = SourceIndex()
        self._views: dict[int, tuple[Message, Any, ModelMessage]] = {}
        self._lock = threading.Lock()

    def record(self, history: Sequence[Any]) -> None:
        """Append the messages of `history` the log does not hold yet, in one atomic append."""
        with self._lock:
            self.index.refresh(self.session)
            self._check_continues(history)
            new: list[Message] = []
            for position, message in enumerate(history):
                if ["m", position, 0] in self.index:
                    continue
                for part, converted in enumerate(conv.to_messages(message, index=position)):
                    new.append(with_source(converted, ["m", position, part]))
            if new:
                self.index.fold(self.session.append(new))

    def _check_continues(self, history: Sequence[Any]) -> None:
        """Refuse a history that does not continue the log: positions are the mapping, so a
        history that is shorter, or differs at the newest logged message, would be misread."""
        newest = self.index.newest
        if newest is None:
            return
        _, position, part = source_of(newest)
        if position < len(history):
            given = conv.to_messages(history[position], index=position)
            if part < len(given) and given[part].extra == plain_extra(newest):
                return
        raise InvalidInputError(
            f"conversation {self.session.id!r}: the message history passed ({len(history)} "
            f"messages) does not continue what ctxfold logged for it (message {position} "
            "differs or is missing); pass the last run's result.all_messages() as "
            "message_history, or start a new conversation_id"
        )

    def projection(self) -> list[ModelMessage]:
        """The projection as pydantic-ai messages, split requests regrouped."""
        with self._lock:
            pieces: list[tuple[Any, ModelMessage]] = []
            fresh: dict[int, tuple[Message, Any, ModelMessage]] = {}
            for item in self.session.items():
                cached = self._views.get(item.id)
                if cached is None or cached[0] is not item.message:
                    key = conv.group_key(item.message)
                    cached = (item.message, key, conv.to_model_message(item.message))
                fresh[item.id] = cached
                pieces.append((cached[1], cached[2]))
            self._views = fresh
            return conv.regroup(pieces)


__all__ = ["CtxfoldCapability"]
