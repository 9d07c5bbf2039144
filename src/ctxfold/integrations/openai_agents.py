"""ctxfold as the memory of an OpenAI Agents SDK agent: `CtxfoldSession`.

```python
session = CtxfoldSession("chat-1", compactor=Compactor(Budget.for_model("gpt-4o")))
config = RunConfig(call_model_input_filter=session.model_input_filter)
result = await Runner.run(agent, "fix the failing test", session=session, run_config=config)
```

`CtxfoldSession` implements `agents.memory.Session`. It stores every item the Runner gives it in
the ctxfold log and hands back exactly the stored items (`get_items`), so the SDK's own
bookkeeping (its rewind compares the stored tail before it calls `pop_item`) works as with any
session. The compacted projection reaches the model only through `model_input_filter`: the
Runner reads the session once per run, so the filter is where a long run shrinks, before every
model call. `pop_item` and `clear_session` append events; nothing is ever deleted.

Needs the ``agents`` extra: ``pip install 'ctxfold[agents]'`` (openai-agents 0.21 or later).
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ctxfold.errors import InvalidInputError, MissingDependencyError
from ctxfold.events import (
    COMPACTION,
    MESSAGE,
    RESET,
    RETRACTION,
    Compaction,
    Event,
    NewEvent,
    Reset,
    Retraction,
)
from ctxfold.integrations import _agents_items as conv
from ctxfold.integrations._common import (
    Segments,
    check_recall,
    make_compactor,
    needs_compaction,
    open_session,
)
from ctxfold.messages import Message
from ctxfold.overflow import is_context_overflow
from ctxfold.session import Session

MINIMUM = "0.21"
"""The oldest openai-agents this integration is tested with (the extra's lower bound): the first
with `agents.testing`, whose scripted model the tests drive it with. Its `call_model_input_filter`
types (`agents.run_config`) date from 0.8."""

try:
    from agents.memory.session_settings import (
        SessionSettings,
        coerce_session_settings,
        resolve_session_limit,
    )
    from agents.models.interface import Model
    from agents.run_config import CallModelData, ModelInputData
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        "ctxfold.integrations.openai_agents", "openai-agents", "agents", minimum=MINIMUM
    ) from exc

if TYPE_CHECKING:
    from agents.retry import ModelRetryAdvice, ModelRetryAdviceRequest
    from agents.tool import FunctionTool

    from ctxfold.compactor import Compactor
    from ctxfold.integrations._common import RecallTool
    from ctxfold.storage.base import EventStore
    from ctxfold.tokens import Budget

log = logging.getLogger("ctxfold.integrations.openai_agents")


class CtxfoldSession:
    """An `agents.memory.Session` whose history is a ctxfold session.

    - `session_id`: names the ctxfold session (a non-empty string).
    - `store`: where the log lives; None opens SQLite at ctxfold's default path (the one the
      ``ctxfold`` CLI reads), so ``ctxfold sessions log <id>`` shows the agent's history.
    - `compactor`: keeps the projection within its budget before every model call; or pass
      `budget` for a default compactor. With neither, the model sees the projection as it stands.
    - `recall`: True offers ctxfold's recall (`ctxfold.session.recall.Recall`) to the model, or pass
      a `RecallTool` of your own (see `recall_tool`).
    - `session_settings`: the SDK's `SessionSettings` (or a dict of them); its `limit` is how
      many of the newest items `get_items()` gives when called without one, as with the SDK's
      own sessions. Default: no limit.

    >>> import asyncio
    >>> from ctxfold import MemoryStore
    >>> session = CtxfoldSession("demo", store=MemoryStore())
    >>> asyncio.run(session.add_items([{"role": "user", "content": "hi"}]))
    >>> asyncio.run(session.get_items())
    [{'role': 'user', 'content': 'hi'}]
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        store: EventStore | None = None,
        compactor: Compactor | None = None,
        *,
        budget: Budget | None = None,
        recall: RecallTool | bool | None = None,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
    ) -> None:
        self.session: Session = open_session(store, session_id, what="session id")
        self.session_id = session_id
        self.compactor = make_compactor(budget, compactor)
        self.recall = check_recall(recall)
        self.session_settings = (
            SessionSettings()
            if session_settings is None
            else coerce_session_settings(
                dict(session_settings)
                if isinstance(session_settings, Mapping)
                else session_settings
            )
        )
        self._stored = _StoredItems()
        self._views: dict[int, tuple[Any, list[dict[str, Any]]]] = {}
        self._flat: Segments[dict[str, Any]] = Segments()
        self._warned = False
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"CtxfoldSession({self.session_id!r})"

    # -- agents.memory.Session -------------------------------------------------------------
    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The stored items, oldest first; with `limit` (by default `session_settings.limit`),
        the newest `limit` of them. These are the items as the Runner gave them, never the
        compacted projection."""
        limit = resolve_session_limit(limit, self.session_settings)
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 0
        ):
            raise InvalidInputError(
                f"limit must be None or a number of items, 0 or more, not {limit!r:.80}"
            )
        return await asyncio.to_thread(self._copied, limit)

    async def add_items(self, items: list[Any]) -> None:
        """Append the items to the log, in one atomic append. An item that cannot be carried is
        refused with `InvalidInputError` naming it, and nothing is written."""
        if items:
            await asyncio.to_thread(self._add, items)

    async def pop_item(self) -> Any:
        """Take the newest item back and return it (None when the session holds none).

        Nothing is deleted: a retraction event takes the newest logged message out of the
        projection, and when that message carried several items (a reasoning item and a call,
        say) the ones before the popped item are appended again in the same atomic append.
        Raises `InvalidHistoryError` when the newest item has been compacted already."""
        return await asyncio.to_thread(self._pop)

    async def clear_session(self) -> None:
        """Start the session afresh: a reset event empties the projection and `get_items`; the
        old items stay in the log (``ctxfold sessions log`` shows them)."""
        await asyncio.to_thread(self.session.append, NewEvent.of(Reset()))

    # -- the model's view ------------------------------------------------------------------
    async def model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """For `RunConfig(call_model_input_filter=...)`: compact when the budget says so, then
        send the projection in place of the stored history, followed by whatever the Runner
        has not stored yet.

        When the Runner's input does not start with the whole stored history, in order (a
        `SessionSettings` limit, a `session_input_callback` that rewrote it, another run that
        added to this session meanwhile), there is nothing the projection could stand in for:
        the Runner's input is sent unchanged, uncompacted, and a warning says so once."""
        given = list(data.model_data.input)
        # One trip to a worker thread when no compaction is due, the usual case. The tail is
        # this call's own: runs sharing the session each filter their own input.
        prepared = await asyncio.to_thread(self._prepare, given)
        if prepared is None:
            return ModelInputData(input=given, instructions=data.model_data.instructions)
        history, tail = prepared
        if history is None:
            assert self.compactor is not None
            await self.compactor.amaybe_compact(self.session)
            history = await asyncio.to_thread(self.projected_items)
        return ModelInputData(input=history + tail, instructions=data.model_data.instructions)

    def projected_items(self) -> list[dict[str, Any]]:
        """The projection as input items: what the model is sent in place of the history.

        Converted as far as it changed: when the projection only grew since the last call, only
        the new items are converted; after a compaction, every item whose message is unchanged
        keeps its conversion."""
        with self._lock:
            items = self.session.items()
            new, _ = self._flat.new_items(items, self._views)
            for item in new:
                cached = self._views.get(item.id)
                if cached is None or cached[0] is not item.message:
                    cached = self._views[item.id] = (
                        item.message,
                        conv.message_to_items(item.message),
                    )
                self._flat.add(*cached[1])
            self._flat.done(items)
            return self._flat.render()

    def wrap_model(self, model: Model) -> Model:
        """`model`, retried once after `recover_from_overflow` when the provider says the
        prompt is too long. Needs a compactor (or a budget) and `model_input_filter`: only a
        request that carried the projection can be sent again with a smaller one. Everything
        else (`get_retry_advice`, `close`, attributes) is the wrapped model's own."""
        return _OverflowRetry(model, self)

    def recall_tool(self) -> FunctionTool | None:
        """The `recall` given at construction as an Agents SDK `FunctionTool` bound to this
        session (None without one): ``Agent(tools=[..., session.recall_tool()])``."""
        recall = self.recall
        if recall is None:
            return None
        from agents.tool import FunctionTool

        async def invoke(_ctx: Any, arguments: str) -> str:
            try:
                parsed = json.loads(arguments or "{}")
            except ValueError:
                parsed = None
            if not isinstance(parsed, Mapping):
                # Arguments that are no JSON object: ctxfold's reading of them answers with an
                # error text the model can act on, where a raise would end the run.
                return await asyncio.to_thread(self.session.call_recall, arguments)
            return await asyncio.to_thread(recall, self.session, parsed)

        return FunctionTool(
            name=recall.name,
            description=recall.description,
            params_json_schema=dict(recall.parameters),
            on_invoke_tool=invoke,
            strict_json_schema=False,
        )

    # -- internals -------------------------------------------------------------------------
    def _refreshed(self) -> list[dict[str, Any]]:
        with self._lock:
            self._stored.fold(self.session.events(after=self._stored.last_seq))
            return self._stored.items

    def _copied(self, limit: int | None) -> list[Any]:
        """The stored items (the newest `limit`), as a fresh copy, as a database read gives: the
        Runner may change what it is handed. Each item's JSON text is kept, so the copy is one
        parse of them all."""
        with self._lock:
            self._refreshed()
            texts = self._stored.texts
            if limit is not None:
                texts = texts[-limit:] if limit > 0 else []
            copied: list[Any] = json.loads("[" + ",".join(texts) + "]")
            return copied

    def _prepare(
        self, given: Sequence[Any]
    ) -> tuple[list[dict[str, Any]] | None, list[Any]] | None:
        """(the projected items, or None when the compactor must look first; the items the
        Runner has not stored yet), or None when the input does not hold the stored history."""
        with self._lock:
            tail = self._unstored_tail(given)
            if tail is None:
                return None
            if needs_compaction(self.compactor, self.session):
                return None, tail
            return self.projected_items(), tail

    def _add(self, items: Sequence[Any]) -> None:
        with self._lock:
            start = len(self._refreshed())
            self.session.append(conv.items_to_messages(items, first_index=start))

    def _pop(self) -> Any:
        with self._lock:
            stored = self._refreshed()
            if not stored:
                return None
            seq, count = self._stored.counts[-1]
            kept = stored[len(stored) - count : -1]
            batch: list[Message | NewEvent] = [NewEvent.of(Retraction(seq))]
            batch.extend(conv.items_to_messages(kept))
            popped = copy.deepcopy(stored[-1])
            self.session.append(batch)
            return popped

    def _unstored_tail(self, given: Sequence[Any]) -> list[Any] | None:
        """The items of the model input after the stored history (usually none: the Runner
        stores each turn before the next model call); None when the input does not start with
        the whole stored history, in order."""
        stored = self._refreshed()
        tail = _after(stored, given)
        if tail is None:
            level = logging.DEBUG if self._warned else logging.WARNING
            self._warned = True
            log.log(
                level,
                "ctxfold: session %r: the model input does not start with the %d stored items "
                "(a session limit, a session_input_callback, or another run on this session?); "
                "sending the Runner's input unchanged, uncompacted",
                self.session_id,
                len(stored),
            )
        return tail

    def _after_projection(self, sent: Any) -> list[Any] | None:
        """What followed the projection in a request the model was sent; None when the request
        did not start with the projection."""
        with self._lock:
            return _after(self.projected_items(), sent) if isinstance(sent, list) else None


def _after(head: Sequence[Mapping[str, Any]], given: Sequence[Any]) -> list[Any] | None:
    """`given` past `head`, when it starts with the items of `head` (as the SDK replays them:
    ids and status may differ); else None."""
    if len(given) < len(head):
        return None
    for mine, theirs in zip(head, given, strict=False):
        replayed = _as_dict(theirs)
        if mine != replayed and conv.fingerprint(mine) != conv.fingerprint(replayed):
            return None
    return list(given[len(head) :])


class _StoredItems:
    """The items the log holds, in order, folded event by event: messages add their items; a
    retraction takes back the newest ones, as the projection does; a reset empties the list."""

    def __init__(self) -> None:
        self.last_seq = 0
        self.items: list[dict[str, Any]] = []
        self.texts: list[str] = []
        """The JSON text of each item, made once, for the copies `get_items` hands out."""
        self.counts: list[tuple[int, int]] = []
        """(seq, number of items) per message event still standing."""
        self._start: dict[int, int] = {}
        """The first original seq each compaction stands for, to retract a summary by."""

    def fold(self, events: Sequence[Event]) -> None:
        for event in events:
            self.last_seq = event.seq
            if event.type == MESSAGE:
                raw = conv.raw_items(event.message)
                self.items.extend(raw)
                self.texts.extend(json.dumps(item, ensure_ascii=False) for item in raw)
                self.counts.append((event.seq, len(raw)))
            elif event.type == COMPACTION:
                compaction = Compaction.from_data(event.data)
                first = compaction.covers[0] if compaction.covers else compaction.first
                self._start[event.seq] = self._start.get(first, first)
            elif event.type == RETRACTION:
                retracted = Retraction.from_data(event.data).id
                self._drop_from(self._start.get(retracted, retracted))
            elif event.type == RESET:
                self._drop_from(0)

    def _drop_from(self, seq: int) -> None:
        # A retraction takes the newest item, or the newest step with its results: everything
        # from that seq on leaves.
        while self.counts and self.counts[-1][0] >= seq:
            _, count = self.counts.pop()
            del self.items[len(self.items) - count :]
            del self.texts[len(self.texts) - count :]


def _as_dict(item: Any) -> Mapping[str, Any]:
    if isinstance(item, Mapping):
        return item
    dumped = item.model_dump(exclude_unset=True) if hasattr(item, "model_dump") else {}
    return dumped if isinstance(dumped, Mapping) else {}


class _OverflowRetry(Model):
    """A `Model` that compacts and retries once when the prompt overflows the window; in all
    else the wrapped model."""

    def __init__(self, model: Model, session: CtxfoldSession) -> None:
        self.wrapped = model
        self.ctx = session

    def __getattr__(self, name: str) -> Any:
        # Only for what this class does not define: the wrapped model's own attributes.
        return getattr(self.wrapped, name)

    async def _recovered_input(self, exc: BaseException, sent: Any) -> list[Any]:
        compactor = self.ctx.compactor
        if compactor is None or not is_context_overflow(exc):
            raise exc
        tail = await asyncio.to_thread(self.ctx._after_projection, sent)
        if tail is None:  # not the projection (no filter, or the Runner's input unchanged)
            raise exc
        await compactor.arecover_from_overflow(self.ctx.session)
        history = await asyncio.to_thread(self.ctx.projected_items)
        return history + tail

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> Any:
        try:
            return await self.wrapped.get_response(system_instructions, input, *args, **kwargs)
        except Exception as exc:
            retry_input = await self._recovered_input(exc, input)
        return await self.wrapped.get_response(system_instructions, retry_input, *args, **kwargs)

    async def stream_response(
        self,
        system_instructions: Any,
        input: Any,
        *args: Any,
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        started = False
        try:
            async for event in self.wrapped.stream_response(
                system_instructions, input, *args, **kwargs
            ):
                started = True
                yield event
            return
        except Exception as exc:
            if started:
                raise
            retry_input = await self._recovered_input(exc, input)
        async for event in self.wrapped.stream_response(
            system_instructions, retry_input, *args, **kwargs
        ):
            yield event

    def get_retry_advice(self, request: ModelRetryAdviceRequest) -> ModelRetryAdvice | None:
        return self.wrapped.get_retry_advice(request)

    async def _cleanup_on_run_end(self, owner: object) -> None:
        await self.wrapped._cleanup_on_run_end(owner)

    async def close(self) -> None:
        await self.wrapped.close()


__all__ = ["CtxfoldSession"]
