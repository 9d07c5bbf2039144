"""ctxfold as a LangChain v1 agent middleware: `CtxfoldMiddleware`.

```python
agent = create_agent(
    model, tools, checkpointer=InMemorySaver(),
    middleware=[CtxfoldMiddleware(budget=Budget.for_model("gpt-4o"))],
)
agent.invoke({"messages": [...]}, {"configurable": {"thread_id": "chat-1"}})
```

At every model call the middleware logs the thread's new messages in the thread's ctxfold
session (one session per thread id), compacts when the budget says so, and calls the model with
the projection: ``handler(request.override(messages=<projection>))``. The graph state is never
rewritten, so the checkpointer still holds every message, and a tool call is never separated
from its result, whatever the window. New messages are logged before the model sees them, except
a run's new user message when nothing has to be compacted: that goes in with the model's final
answer, which is logged as the model returns it (one append a run, and no graph step of its own).
What is logged is the graph state's messages: a message only the request holds (a middleware's
per-call context) is sent, not logged; a removal from the state, or a message replaced in it
under the same id, brings the projection back to what the state holds.

Needs the ``langchain`` extra: ``pip install 'ctxfold[langchain]'`` (langchain 1.2.11 or later, on
langgraph 1.1.5 or later).
"""

from __future__ import annotations

import asyncio
import functools
import operator
import threading
import uuid
import weakref
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from ctxfold.errors import ConflictError, InvalidInputError, MissingDependencyError
from ctxfold.events import MESSAGE, Event, NewEvent, Reset, Retraction
from ctxfold.integrations._common import (
    KEY,
    PerConversation,
    Segments,
    SourceIndex,
    check_recall,
    fits_ahead,
    hashable,
    make_compactor,
    needs_compaction,
    source_of,
    with_source,
)
from ctxfold.messages import Message
from ctxfold.overflow import is_context_overflow

MINIMUM = "1.2.11"
"""The oldest langchain this integration works with (the extra's lower bound, with
langchain-core 1.2.10): the first that runs on a langgraph with `LANGGRAPH_MINIMUM`."""
LANGGRAPH_MINIMUM = "1.1.5"
"""The oldest langgraph whose `Runtime.execution_info` holds the run's `thread_id`, which names
the conversation's session (1.1.4 has the field, without the thread id)."""

try:
    from langchain.agents.factory import _patch_invalid_tool_calls
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

    from ctxfold.integrations import _langchain_messages as conv
    from ctxfold.integrations._langchain_messages import SentTo
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        "ctxfold.integrations.langchain", "langchain", "langchain", minimum=MINIMUM
    ) from exc


def _check_langgraph() -> None:
    # An older langgraph imports fine and fails only in a run, where the thread id reads as None.
    import dataclasses

    import langgraph.runtime

    info = getattr(langgraph.runtime, "ExecutionInfo", None)
    if dataclasses.is_dataclass(info):
        fields = {field.name for field in dataclasses.fields(info)}
    else:  # a NamedTuple before langgraph 1.1.5, or none at all
        fields = set(getattr(info, "_fields", ()))
    if "thread_id" not in fields:
        raise MissingDependencyError(
            "ctxfold.integrations.langchain", "langgraph", "langchain", minimum=LANGGRAPH_MINIMUM
        )


_check_langgraph()

if TYPE_CHECKING:
    from langchain.agents.middleware import ModelRequest
    from langchain_core.tools import BaseTool
    from langgraph.runtime import Runtime

    from ctxfold.compactor import Compactor
    from ctxfold.integrations._common import RecallTool
    from ctxfold.session import Session
    from ctxfold.session.projection import Item
    from ctxfold.storage.base import EventStore
    from ctxfold.tokens import Budget

SYSTEM = "system-prompt"
"""The source key of the agent's system prompt, logged once at the head of a thread's session
so that the budget counts it; the request's own system message is what the model is sent."""


class CtxfoldMiddleware(AgentMiddleware):
    """Keeps a LangChain agent's model calls within a budget without touching its state.

    - `store`: where the logs live; None opens SQLite at ctxfold's default path.
    - `budget`, or `compactor` for full control: when and how far to compact. With neither the
      model sees the projection as it stands (still logged, never compacted).
    - `recall`: True registers ctxfold's recall (`ctxfold.session.recall.Recall`) as a tool for the
      agent, or pass a `RecallTool` of your own.

    Each thread id (``config["configurable"]["thread_id"]``, so run the agent with a
    checkpointer) is one ctxfold session of the same id. Messages are matched to the log by
    their LangChain id (by position when they have none), and the match is kept in the log, so a
    restarted process appends nothing twice.
    """

    def __init__(
        self,
        store: EventStore | None = None,
        budget: Budget | None = None,
        compactor: Compactor | None = None,
        *,
        recall: RecallTool | bool | None = None,
    ) -> None:
        super().__init__()
        self.store = store
        self.compactor = make_compactor(budget, compactor)
        self.recall = check_recall(recall)
        self.tools: list[BaseTool] = [self._recall_tool()] if self.recall else []
        self._threads = PerConversation(
            store,
            _Thread,
            what="thread id (run the agent with a checkpointer and "
            "config={'configurable': {'thread_id': ...}})",
        )

    @property
    def name(self) -> str:
        return "CtxfoldMiddleware"

    # -- the hooks -------------------------------------------------------------------------
    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Any]
    ) -> Any:
        """Log what is new, compact if due, and call the model with the projection; after a
        context overflow, recover and retry once. A final answer is logged as soon as the model
        returns it."""
        thread = self._thread(request.runtime)
        state = _state(request)
        history, extras = _split(request.messages, state)
        sent_to = _sent_to(request)
        messages = thread.ahead(history, state, self.compactor, sent_to)
        if messages is None:
            thread.record(history, request.system_message, state, sent_to)
            if needs_compaction(self.compactor, thread.session, fresh=False):
                assert self.compactor is not None
                self.compactor.maybe_compact(thread.session)
        try:
            if messages is None:
                messages = thread.projection(history, fresh=False)
            response = handler(request.override(messages=_sent(messages, extras, history)))
        except Exception as exc:
            if self.compactor is None or not is_context_overflow(exc):
                raise
            thread.record(history, request.system_message, state, sent_to)
            self.compactor.recover_from_overflow(thread.session)
            messages = thread.projection(history, fresh=False)
            response = handler(request.override(messages=_sent(messages, extras, history)))
        thread.record_answer(response, len(history), sent_to)
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[Any]],
    ) -> Any:
        """`wrap_model_call` for async agents; store I/O runs in worker threads."""
        known = self._threads.known(_thread_id(request.runtime))
        state = _state(request)
        history, extras = _split(request.messages, state)
        sent_to = _sent_to(request)
        ahead = None
        if known is not None:
            ahead = known.ahead(history, state, self.compactor, sent_to)
        if known is not None and ahead is not None:
            thread, messages = known, ahead
        else:
            # One trip to a worker thread when no compaction is due, the usual case.
            thread, prepared = await asyncio.to_thread(
                self._prepare, request, history, state, sent_to
            )
            if prepared is None:
                assert self.compactor is not None
                await self.compactor.amaybe_compact(thread.session)
                prepared = await asyncio.to_thread(thread.projection, history, fresh=False)
            messages = prepared
        try:
            response = await handler(request.override(messages=_sent(messages, extras, history)))
        except Exception as exc:
            if self.compactor is None or not is_context_overflow(exc):
                raise
            await asyncio.to_thread(self._prepare, request, history, state, sent_to)
            await self.compactor.arecover_from_overflow(thread.session)
            messages = await asyncio.to_thread(thread.projection, history, fresh=False)
            response = await handler(request.override(messages=_sent(messages, extras, history)))
        if thread.pending or _answer(response) is not None:
            await asyncio.to_thread(thread.record_answer, response, len(history), sent_to)
        return response

    def session(self, thread_id: str) -> Session:
        """The ctxfold session that logs a thread."""
        return self._thread_for(thread_id).session

    # -- internals -------------------------------------------------------------------------
    def _prepare(
        self,
        request: ModelRequest[Any],
        history: Sequence[Any],
        state: Sequence[Any] | None,
        sent_to: SentTo,
    ) -> tuple[_Thread, list[AnyMessage] | None]:
        """Log what is new in `history`; then the projection, or None when the compactor must
        look first."""
        thread = self._thread(request.runtime)
        thread.record(history, request.system_message, state, sent_to)
        if needs_compaction(self.compactor, thread.session, fresh=False):
            return thread, None
        return thread, thread.projection(history, fresh=False)

    def _thread(self, runtime: Runtime[Any] | None) -> _Thread:
        return self._thread_for(_thread_id(runtime))

    def _thread_for(self, thread_id: Any) -> _Thread:
        return self._threads[_session_id(thread_id)]

    def _recall_tool(self) -> BaseTool:
        from langchain_core.tools import StructuredTool
        from langgraph.config import get_config

        recall = self.recall
        assert recall is not None

        def invoke(**arguments: Any) -> str:
            thread_id = _session_id(get_config().get("configurable", {}).get("thread_id"))
            return recall(self._thread_for(thread_id).session, arguments)

        return StructuredTool.from_function(
            func=invoke,
            name=recall.name,
            description=recall.description,
            args_schema=dict(recall.parameters),
        )


class _Thread:
    """One thread's session, the index of what it holds, and its converted projection."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.index = _Index()
        self._views: dict[int, tuple[Message, Any, Any]] = {}
        """Per item id: its message; its LangChain form (`_SKIP` for the logged system prompt,
        None until needed for a state message); and its key in the graph state when it is a
        state message no strategy changed."""
        self._segments: Segments[AnyMessage] = Segments()
        self._where: dict[Any, int] = {}
        """The position of each logged state message in the graph state, by key."""
        self._logged = 0
        """How many leading messages of the graph state are known to be in the log."""
        self._newest: Any = None
        """The source key of the last of those, to tell that the state still starts with them."""
        self._pending: list[Message] = []
        """What `ahead` left for `record_answer` to log with the model's answer."""
        self._contents: list[Any] = []
        """Per position of the graph state, up to the last message `_replaced` looked at: the
        content the message there was logged with (or holds, when it is not logged yet)."""
        self._aligned = 0
        """How many leading `_contents` the last `_replaced` found the state to hold still."""
        self._anchor: weakref.ref[Any] | None = None
        """The state's message at the last of `_contents`, weakly: while the state holds that very
        object there, its messages are the ones looked at before (the same run)."""
        self._lock = threading.Lock()

    @property
    def pending(self) -> bool:
        """Whether a call went ahead with new messages not logged yet."""
        return bool(self._pending)

    def ahead(
        self,
        messages: Sequence[Any],
        state: Sequence[Any] | None,
        compactor: Compactor | None,
        sent_to: SentTo,
    ) -> list[AnyMessage] | None:
        """The projection for a call whose new messages are all the user's (the first call of
        a run), when the log holds everything before them and no compaction is due with them
        counted in, worked out with no look at the store and nothing appended: they go in with
        the model's answer, one append (`record_answer`). Else None, and the call goes through
        `record` and `projection` as any other.

        Should the process stop before the answer is logged, the log holds nothing of the call
        and the next call logs those messages from the graph state, once; another writer's
        events show from the next look at the store on."""
        with self._lock:
            self._pending = []
            if not 0 < self.index.last_seq == self.session.last_seq:
                return None
            start = self._logged
            if not 0 < start <= len(messages) or _source(messages, start - 1) != self._newest:
                return None
            observed = messages if state is None else state
            if self._unconfirmed_answer(observed):
                return None  # `record` takes it back first
            if self._replaced(observed):
                return None  # `record` follows the state first
            self._checked_up_to(observed)
            new: list[Message] = []
            given: list[AnyMessage] = []
            for position in range(start, len(messages)):
                message = messages[position]
                source = _source(messages, position)
                self._where[hashable(source)] = position
                if source in self.index:
                    continue
                if not isinstance(message, HumanMessage):
                    return None
                converted = conv.to_message(message, index=position, sent_to=sent_to)
                new.append(with_source(converted, source))
                given.append(message)
            if not new or not fits_ahead(compactor, self.session, new):
                return None
            self._pending = new
            return self._project(messages, self.session.items(fresh=False)) + given

    def record(
        self,
        messages: Sequence[Any],
        system: Any,
        state: Sequence[Any] | None,
        sent_to: SentTo,
    ) -> None:
        """Append the messages the log does not hold yet, in one atomic append (the system
        message first when the session is new). `state` is the graph state's messages when
        `messages` (the request's) may be fewer; it tells whether an answer `record_answer`
        logged reached the state. `sent_to` is where the call goes (`_sent_to`), which prices
        the media of what is logged.

        The graph state only grows between model calls, so the messages up to the newest one
        this thread logged or found logged are not looked at again while that message is still
        where it was: a call costs O(new messages), but for a run's first, which reads each
        message's content once to find one replaced in place (`_replaced`)."""
        try:
            self._record(messages, system, state, sent_to, look=False)
        except ConflictError:
            # Another writer appended since this thread last looked: look, and decide again.
            self._record(messages, system, state, sent_to, look=True)

    def _record(
        self,
        messages: Sequence[Any],
        system: Any,
        state: Sequence[Any] | None,
        sent_to: SentTo,
        *,
        look: bool,
    ) -> None:
        with self._lock:
            self._pending = []
            expected = self.index.look(self.session, always=look)
            new: list[Message | NewEvent] = []
            if system is not None and self.index.last_seq == 0:
                new.append(with_source(conv.to_message(system, index=-1, sent_to=sent_to), SYSTEM))
            observed = messages if state is None else state
            start = self._logged
            reset = False
            if not 0 < start <= len(messages) or _source(messages, start - 1) != self._newest:
                # The state changed otherwise: positions may have moved, or messages gone.
                start, self._where = 0, {}
                self._segments.forget()
                reset = state is not None and self._removed(state)
            if reset:
                self._aligned = 0  # positions moved
            replaced = [] if reset else self._replaced(observed)
            retract = self._retractable(replaced, observed)
            if replaced and retract is None:
                reset = True  # replaced before the newest item, or inside a summary
            if reset:
                # The projection starts over from the state as it is now (the log keeps all).
                new = [NewEvent.of(Reset())]
                if system is not None:
                    new.append(
                        with_source(conv.to_message(system, index=-1, sent_to=sent_to), SYSTEM)
                    )
                for position, message in enumerate(observed):
                    if not _answers_invalid_call(observed, position):
                        source = _source(observed, position)
                        converted = conv.to_message(message, index=position, sent_to=sent_to)
                        new.append(with_source(converted, source))
            elif retract is not None:
                # The newest item, replaced: taken back and logged again as the state holds it.
                position = replaced[0]
                converted = conv.to_message(observed[position], index=position, sent_to=sent_to)
                new.append(NewEvent.of(Retraction(retract)))
                new.append(with_source(converted, _source(observed, position)))
            for position in range(start, len(messages)):
                message = messages[position]
                source = _source(messages, position)
                self._where[hashable(source)] = position
                if reset:
                    continue
                if source not in self.index and not _answers_invalid_call(messages, position):
                    converted = conv.to_message(message, index=position, sent_to=sent_to)
                    new.append(with_source(converted, source))
            lost = None if reset or retract is not None else self._lost_answer(observed)
            if lost is not None:
                new.insert(0, NewEvent.of(Retraction(lost)))
            if new:
                self.index.fold(self.session.append(new, expected_seq=expected))
            if messages:
                self._logged, self._newest = len(messages), _source(messages, len(messages) - 1)
            self._checked_up_to(observed)

    def record_answer(self, response: Any, position: int, sent_to: SentTo) -> None:
        """Log the model's answer in `response` (see `_answer`) now, rather than at the next
        model call: a run that ends with it leaves the whole thread in the log without a graph
        step of its own after the model's. `position` is where the answer will stand in the
        graph state (named in an error); `sent_to`, where the call went (`_sent_to`).

        The answer is marked as logged from the response: should the graph state never get it
        (the process stopped before LangGraph saved the model's step, or a middleware outside
        this one dropped the response), the next `record` takes it back out of the projection
        (`_lost_answer`). An answer that cannot be stored is left to the next model call, which
        refuses it with the error naming it, as it would any state message."""
        answer = _answer(response)
        with self._lock:
            batch = list(self._pending)
            if answer is not None and answer.id not in self.index:
                try:
                    message = conv.to_message(answer, index=position, sent_to=sent_to)
                except InvalidInputError:
                    message = None
                if message is not None:
                    kept = {"source": answer.id, ANSWER: True}
                    batch.append(message.replace(extra={**message.extra, KEY: kept}))
            for always in (False, True):
                expected = self.index.look(self.session, always=always)
                batch = [m for m in batch if source_of(m) not in self.index]
                if not batch:
                    break
                try:
                    self.index.fold(self.session.append(batch, expected_seq=expected))
                    break
                except ConflictError:
                    if always:
                        raise
            self._pending = []

    def _replaced(self, state: Sequence[Any]) -> list[int]:
        """Positions in `state` (the graph state's messages) of the messages the log holds under
        their id with other content: replaced in place (``update_state`` with the same id, a
        middleware that returns an edited message under its id). A replacement is told by its
        content (text or content blocks), compared with what the log holds.

        While the state holds the objects looked at before (the same run: LangGraph keeps them
        from step to step), only the messages after those are looked at, so a call costs O(new
        messages). The first call of a run reads each message's content once and compares it,
        by position, with `_contents` (C loops: attribute reads and a list comparison; nothing
        converted, nothing decoded): the checkpointer hands each run fresh copies, and a
        replacement written between runs may be any of them. So a middleware that replaces an
        older message in the middle of a run is followed from the next run's first call."""
        contents = self._contents
        known = len(contents)
        anchor = self._anchor() if self._anchor is not None else None
        logged = self.index.content
        try:
            if 0 < known <= len(state) and state[known - 1] is anchor:
                aligned = known
            else:
                aligned = min(known, len(state))
                held = list(map(_CONTENT, state[:aligned]))
                if held != contents[:aligned]:
                    # Replaced, or moved (a message the projection does not show was removed):
                    # from the first difference on, each message is matched by its id.
                    aligned = next(i for i, a in enumerate(held) if a != contents[i])
            tail = state[aligned:]
            now = list(map(_CONTENT, tail))
            was = list(map(logged.get, map(_ID, tail), now))  # a new message stands for itself
        except (AttributeError, TypeError):
            self._aligned = 0
            return []  # not messages: `conv.to_message` names them when they are logged
        self._aligned = aligned
        if was == now:
            return []
        replaced: list[int] = []
        for offset, (before, after) in enumerate(zip(was, now, strict=True)):
            if before is after or before == after:
                continue
            if conv.logged_with(tail[offset], before):
                # The same content in the form a store keeps (a surrogate, a tuple): from now
                # on compared as the state holds it.
                logged[tail[offset].id] = after
            else:
                replaced.append(aligned + offset)
        return replaced

    def _checked_up_to(self, state: Sequence[Any]) -> None:
        """Every message of `state` is now as logged (or new): keep what each holds for the
        next `_replaced`, from where the last one found a difference (O(new messages) inside a
        run)."""
        contents = self._contents
        del contents[self._aligned :]
        tail = state[self._aligned :]
        try:
            contents.extend(map(self.index.content.get, map(_ID, tail), map(_CONTENT, tail)))
            self._anchor = weakref.ref(state[-1]) if state else None
        except (AttributeError, TypeError):  # not messages: looked at in full each call
            contents.clear()
            self._anchor = None
        self._aligned = len(contents)

    def _retractable(self, replaced: Sequence[int], state: Sequence[Any]) -> int | None:
        """The item id of the replaced message when it is the only one and the projection's
        newest item, and no message logged after it follows it in `state`: a retraction and the
        message as the state holds it then bring the projection to the state (an answer a
        middleware rewrites after every model call costs two events a run, not a copy of the
        thread). Else None, and a replacement resets the projection to the state."""
        if len(replaced) != 1:
            return None
        position = replaced[0]
        seq = self.index.seq_of.get(hashable(_source(state, position)))
        items = self.session.items(fresh=False)
        if seq is None or not items or items[-1].id != seq:
            return None
        if any(_source(state, after) in self.index for after in range(position + 1, len(state))):
            return None
        return seq

    def _removed(self, state: Sequence[Any]) -> bool:
        """Whether the graph state no longer holds a message the projection shows or stands for
        (a ``RemoveMessage``, by id or ``REMOVE_ALL_MESSAGES``, a trimming middleware): then the
        projection must start over from the state (`_record` appends a reset event and the
        state's messages), since only the newest item can be retracted. An answer
        `record_answer` logged that the state never got is `_lost_answer`'s."""
        present = {m.id for m in state if getattr(m, "id", None)}
        source_at = {seq: source for source, seq in self.index.seq_of.items()}
        lost = None
        if self._unconfirmed_answer(state):
            assert self.index.newest is not None
            lost = source_of(self.index.newest)
        for item in self.session.items(fresh=False):
            first, last = item.span
            for seq in range(first, last + 1):
                source = source_at.get(seq)
                gone = source not in present and source not in (SYSTEM, lost)
                if isinstance(source, str) and gone:
                    return True
        return False

    def _unconfirmed_answer(self, state: Sequence[Any]) -> bool:
        """Whether the newest logged message is an answer `record_answer` logged that the graph
        state does not hold (so `_lost_answer` may have to take it back)."""
        newest = self.index.newest
        kept = newest.extra.get(KEY) if newest is not None else None
        if not isinstance(kept, dict) or not kept.get(ANSWER):
            return False
        answer_id = kept.get("source")
        # From the end: an answer the state holds stands a few messages from it.
        return not any(getattr(m, "id", None) == answer_id for m in reversed(state))

    def _lost_answer(self, state: Sequence[Any]) -> int | None:
        """The item id of an answer `record_answer` logged that the graph state (`state`, its
        messages) does not hold, while that answer is still the newest item of the projection;
        else None."""
        if not self._unconfirmed_answer(state):
            return None
        newest = self.index.newest
        assert newest is not None
        seq = self.index.seq_of.get(hashable(source_of(newest)))
        items = self.session.items()
        return seq if items and items[-1].id == seq else None

    def projection(self, messages: Sequence[Any], *, fresh: bool = True) -> list[AnyMessage]:
        """The projection as LangChain messages, the logged system prompt left out; converted
        only as far as it changed since the last call. `messages` is the graph state `record`
        was just given (positions are read from it).

        The state is not kept between calls: holding on to last call's list kept every message
        object LangGraph deserialized for it alive until the next call, which then paid for
        freeing them all (several ms at 10,000 messages).

        A message no strategy changed is handed back as the graph state's own object (the model
        call then sees exactly what the state holds, and LangChain compares nothing twice);
        summaries, notes and cleared results are converted."""
        with self._lock:
            return self._project(messages, self.session.items(fresh=fresh))

    def _project(self, messages: Sequence[Any], items: Sequence[Item]) -> list[AnyMessage]:
        """`projection` of `items`; the lock is held."""
        segments = self._segments
        new, _ = segments.new_items(items, self._views)
        for item in new:
            cached = self._views.get(item.id)
            if cached is None or cached[0] is not item.message:
                source = source_of(item.message)
                if source == SYSTEM:
                    cached = (item.message, _SKIP, None)
                elif conv.unchanged(item.message):
                    cached = (item.message, None, hashable(source))  # converted if needed
                else:
                    cached = (item.message, conv.from_message(item.message), None)
                self._views[item.id] = cached
            if cached[1] is _SKIP:
                continue
            position = self._where.get(cached[2]) if cached[2] is not None else None
            if position is not None:
                segments.add_position(position)
                continue
            if cached[1] is None:
                converted = conv.from_message(item.message)
                cached = self._views[item.id] = (item.message, converted, cached[2])
            segments.add(cast("AnyMessage", cached[1]))
        segments.done(items)
        return segments.render(messages)


class _Index(SourceIndex):
    """`SourceIndex` that also keeps the content each LangChain id was last logged with, read
    from the stored message in the event's data as the event is folded (no message decoded for
    it): what `_Thread._replaced` compares a state message with when it first looks at it (a
    message logged before it was in the graph state, or by another process)."""

    def __init__(self) -> None:
        super().__init__()
        self.content: dict[str, Any] = {}

    def fold(self, events: Iterable[Event]) -> None:
        super().fold(self._noting(events))

    def _noting(self, events: Iterable[Event]) -> Iterator[Event]:
        content = self.content
        for event in events:
            if event.type == MESSAGE:
                found = _logged_content(event.data)
                if found is not None:
                    content[found[0]] = found[1]
            yield event


def _logged_content(data: Mapping[str, Any]) -> tuple[str, Any] | None:
    """The LangChain id and content of the message a message event's `data` stores, or None for
    one that has no id (logged by position), the system prompt, a summary or a note."""
    message = data.get("message")
    extra = message.get("extra") if isinstance(message, Mapping) else None
    if not isinstance(extra, Mapping):
        return None
    kept, stored = extra.get(KEY), extra.get(conv.NAMESPACE)
    source = kept.get("source") if isinstance(kept, Mapping) else None
    fields = stored.get("data") if isinstance(stored, Mapping) else None
    if not isinstance(source, str) or source == SYSTEM or not isinstance(fields, Mapping):
        return None
    return source, fields.get("content")


_CONTENT = operator.attrgetter("content")
_ID = operator.attrgetter("id")


ANSWER = "answer"
"""Marks, under ``extra["ctxfold"]``, an answer logged from the model's response before the graph
state held it (`_Thread.record_answer`)."""


def _thread_id(runtime: Runtime[Any] | None) -> Any:
    info = getattr(runtime, "execution_info", None)
    return _session_id(getattr(info, "thread_id", None))


def _session_id(thread_id: Any) -> Any:
    """The session id for a thread id: LangGraph also takes an int or a `uuid.UUID`, which name
    the session of their `str()` (``1`` and ``"1"`` are one thread to LangGraph's savers too)."""
    if isinstance(thread_id, (int, uuid.UUID)) and not isinstance(thread_id, bool):
        return str(thread_id)
    return thread_id


def _sent_to(request: ModelRequest[Any]) -> SentTo:
    """Whose rules price the media `request` sends: the provider of the chat model it calls
    (`conv.model_provider`), worked out once, and only when a message to log holds media, so a
    call without media pays nothing for it. It wins over what a message says of itself
    (`conv._priced_by` says why)."""
    return functools.cache(functools.partial(conv.model_provider, request.model))


def _state(request: ModelRequest[Any]) -> Sequence[Any] | None:
    """The graph state's messages, which a middleware ahead of this one may have left out of
    the request's."""
    state = getattr(request, "state", None)
    messages = state.get("messages") if isinstance(state, dict) else None
    return messages if isinstance(messages, list) else None


def _split(
    messages: Sequence[Any], state: Sequence[Any] | None
) -> tuple[Sequence[Any], list[tuple[int, Any]]]:
    """The request's messages that the graph state holds (the thread's history, which is
    logged), and the others: messages a middleware or LangChain added to this one request (a
    retrieved context, the error result LangChain adds for an invalid tool call), each with the
    position in that history it follows (-1 for the start). Those are sent, never logged: the
    next request brings them again if they still apply, and logging them would show the model
    one more copy at every call."""
    if state is None or messages is state:
        return messages, []
    if len(messages) == len(state) and (
        not messages or (messages[0] is state[0] and messages[-1] is state[-1])
    ):
        return messages, []
    held = {id(m) for m in state}
    ids = {m.id for m in state if getattr(m, "id", None)}
    history: list[Any] = []
    extras: list[tuple[int, Any]] = []
    for message in messages:
        if id(message) in held or getattr(message, "id", None) in ids:
            history.append(message)
        else:
            extras.append((len(history) - 1, message))
    return (history, extras) if extras else (messages, [])


def _sent(
    projected: list[AnyMessage], extras: list[tuple[int, Any]], history: Sequence[Any]
) -> list[AnyMessage]:
    """What the model is sent: `projected` with the request's own messages (`_split`) put
    back, each after the history message it followed, or after the nearest earlier one still
    projected. A tool result whose call is not projected (a compaction took it) is left out, so
    the request stays valid; an invalid tool call gets LangChain's error result right after it,
    as LangChain would send it (`_answers_invalid_call`)."""
    if not extras:
        return _patch_invalid_tool_calls(projected)
    at = {m.id: i for i, m in enumerate(projected) if m.id}
    after: dict[int, list[AnyMessage]] = {}
    for position, message in extras:
        slot = None
        while position >= 0 and slot is None:
            slot = at.get(getattr(history[position], "id", None) or "")
            if isinstance(message, ToolMessage):
                break  # only right after its call
            position -= 1
        if slot is None and isinstance(message, ToolMessage):
            continue
        after.setdefault(-1 if slot is None else slot, []).append(message)
    out = list(after.get(-1, ()))
    for index, message in enumerate(projected):
        out.append(message)
        out.extend(after.get(index, ()))
    return _patch_invalid_tool_calls(out)


def _answers_invalid_call(messages: Sequence[Any], position: int) -> bool:
    """Whether the message at `position` is the error result LangChain adds for an invalid tool
    call of the AI message before it (``_patch_invalid_tool_calls``). It is never logged: the
    log's AI message keeps its invalid calls, and `_sent` adds the result again right after it,
    wherever the projection shows it. (LangChain writes it into the graph state after the AI
    message's own tool results were logged, so logging it would put it after them.)"""
    message = messages[position]
    if not isinstance(message, ToolMessage):
        return False
    while position > 0 and isinstance(messages[position - 1], ToolMessage):
        position -= 1
    call = messages[position - 1] if position > 0 else None
    if not isinstance(call, AIMessage):
        return False
    return any(c.get("id") == message.tool_call_id for c in call.invalid_tool_calls)


def _answer(response: Any) -> AIMessage | None:
    """The model's answer in a `wrap_model_call` result when it completes a step on its own: a
    single `AIMessage` that calls no tool, with an id (LangChain's chat models give each one
    theirs, and the graph state keeps it). None for anything else: a response with tool calls
    is logged at the next model call together with the tool results that answer it, so the log
    never holds a call a restarted process could not answer; a message without an id would be
    given one only by the graph state."""
    response = getattr(response, "model_response", response)
    result = [response] if isinstance(response, AIMessage) else getattr(response, "result", None)
    if not isinstance(result, list) or len(result) != 1:
        return None
    message = result[0]
    if not isinstance(message, AIMessage) or message.tool_calls or not message.id:
        return None
    if message.invalid_tool_calls:
        return None
    return message


_SKIP = object()
"""Stands for the logged system prompt, which the model gets from the request instead."""


def _source(messages: Sequence[Any], position: int) -> Any:
    """The key a state message is logged under: its id, or its position when it has none."""
    message = messages[position]
    return message.id or ["#", position]


__all__ = ["CtxfoldMiddleware"]
