"""ctxfold as a pydantic-ai capability: `CtxfoldCapability`.

```python
agent = Agent(model, capabilities=[CtxfoldCapability(budget=Budget.for_model("gpt-4o"))])
result = await agent.run("fix the failing test", conversation_id="chat-1")
```

Before every model request the capability sets the request's messages to the projection of
the ctxfold session named by ``ctx.conversation_id``, compacting first when the budget says so.
New messages are logged before the model sees them, except a run's new prompt when nothing has to
be compacted: that goes in with the run's last response when the run ends, one append a run.
Only what this one request sends changes: `result.all_messages()` still returns every message,
and a tool call is never separated from its return. What an earlier capability added to or
changed in this one request is sent where it put it and never logged (`_split`, `_sent`). After a
context-overflow error it recovers and makes one more attempt.

Needs the ``pydantic-ai`` extra: ``pip install 'ctxfold[pydantic-ai]'`` (pydantic-ai-slim 2.64 or
later, on Python 3.11 or later).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import operator
import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from ctxfold.errors import ConflictError, InvalidInputError, MissingDependencyError
from ctxfold.events import MESSAGE, Event, NewEvent, Retraction
from ctxfold.integrations._common import (
    PerConversation,
    Segments,
    SourceIndex,
    check_recall,
    fits_ahead,
    hashable,
    make_compactor,
    needs_compaction,
    source_of,
)
from ctxfold.messages import Message
from ctxfold.overflow import is_context_overflow

MINIMUM = "2.64"
"""The oldest pydantic-ai-slim this integration works with (the extra's lower bound): the first
with `RetryModelRequest`, which the recovery from a context overflow raises. It needs Python
3.11."""

try:
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.exceptions import RetryModelRequest
    from pydantic_ai.messages import ModelMessage, ModelRequest

    from ctxfold.integrations import _pydantic_ai_messages as conv
    from ctxfold.integrations._pydantic_ai_messages import SentTo
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        "ctxfold.integrations.pydantic_ai",
        "pydantic-ai-slim",
        "pydantic-ai",
        minimum=MINIMUM,
        python=(3, 11),
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
    - `recall`: True registers ctxfold's recall (`ctxfold.session.recall.Recall`) as a tool, or pass
      a `RecallTool` of your own.

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
        self._conversations = PerConversation(store, _Conversation, what="conversation id")

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # built in code, with a store: not from a YAML or JSON spec

    # -- hooks -----------------------------------------------------------------------------
    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Send the projection, with the conversation's new messages; log them and compact
        first when due.

        The first request of a run that continues the log, when no compaction is due, goes
        ahead from what the session holds, with no look at the store: the new prompt is logged
        together with the response when the run ends (`after_run`), one trip to a worker thread
        and one append for the run (see `_Conversation.ahead`).

        The run's history (``ctx.messages``) is what is logged: a capability listed before this
        one may have added messages to this request, or replaced some, and those are sent where
        it put them, never logged (`_split`, `_sent`)."""
        history, extras = _split(request_context.messages, ctx.messages)
        known = self._conversations.known(ctx.conversation_id)
        sent_to = _sent_to(request_context.model)
        if known is not None:
            ahead = known.ahead(history, self.compactor, sent_to)
            if ahead is request_context.messages:
                known.extras = extras
                return request_context  # the projection is the history as given
            if ahead is not None:
                known.extras = extras
                return dataclasses.replace(request_context, messages=_sent(ahead, extras, history))
        # One trip to a worker thread when no compaction is due, the usual case.
        conversation, messages = await asyncio.to_thread(
            self._prepare, ctx.conversation_id, history, sent_to
        )
        conversation.extras = extras
        if messages is None:
            assert self.compactor is not None
            await self.compactor.amaybe_compact(conversation.session)
            messages = await asyncio.to_thread(conversation.projection)
        return dataclasses.replace(request_context, messages=_sent(messages, extras, history))

    async def after_run(
        self, ctx: RunContext[Any], *, result: AgentRunResult[Any]
    ) -> AgentRunResult[Any]:
        """Log what the run added that the log does not hold yet (at least its last response,
        which no model request has carried), so the log holds the whole conversation when the
        run ends."""
        messages = result.all_messages()
        await asyncio.to_thread(self._record, ctx.conversation_id, messages, _sent_to(ctx.model))
        return result

    async def on_model_request_error(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        error: Exception,
    ) -> ModelResponse:
        """After the first context overflow of a request: log what the request carried, recover
        and make one more attempt."""
        if self.compactor is None or request_context.attempt > 1 or not is_context_overflow(error):
            raise error
        conversation = await asyncio.to_thread(
            self._caught_up, ctx.conversation_id, _sent_to(request_context.model)
        )
        await self.compactor.arecover_from_overflow(conversation.session)
        raise RetryModelRequest()

    async def prepare_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """On the attempt after a recovery, send the recovered projection, with what an earlier
        capability added to the request put back where it was."""
        if request_context.attempt == 1:
            return request_context
        conversation = await asyncio.to_thread(self._conversation, ctx.conversation_id)
        messages = await asyncio.to_thread(conversation.projection)
        sent = _sent(messages, conversation.extras, conversation.history)
        return dataclasses.replace(request_context, messages=sent)

    def get_toolset(self) -> AbstractToolset[Any] | None:
        """The `recall` given at construction as a tool bound to the run's conversation."""
        recall = self.recall
        if recall is None:
            return None
        from pydantic_ai.tools import Tool
        from pydantic_ai.toolsets import FunctionToolset
        from pydantic_core import SchemaValidator, core_schema

        async def invoke(ctx: RunContext[Any], **arguments: Any) -> str:
            session = (await asyncio.to_thread(self._conversation, ctx.conversation_id)).session
            given = arguments.get(_RAW, arguments) if len(arguments) == 1 else arguments
            return await asyncio.to_thread(recall, session, given)

        tool = Tool[Any].from_schema(
            invoke,
            name=recall.name,
            description=recall.description,
            json_schema=dict(recall.parameters),
            takes_ctx=True,
        )
        # Arguments that are not a JSON object (null, a list, a number) reach `recall` as they
        # came, under a key of their own, so it answers them with its short error text instead
        # of pydantic-ai failing the run on them.
        tool.function_schema = dataclasses.replace(
            tool.function_schema,
            validator=SchemaValidator(core_schema.no_info_plain_validator_function(_as_keywords)),
        )
        return FunctionToolset([tool])

    def session(self, conversation_id: str) -> Session:
        """The ctxfold session that logs a conversation."""
        return self._conversation(conversation_id).session

    # -- internals -------------------------------------------------------------------------
    def _prepare(
        self, conversation_id: Any, history: Sequence[Any], sent_to: SentTo
    ) -> tuple[_Conversation, list[ModelMessage] | None]:
        """Log what is new; then the projection, or None when the compactor must look first."""
        conversation = self._record(conversation_id, history, sent_to)
        if needs_compaction(self.compactor, conversation.session, fresh=False):
            return conversation, None
        return conversation, conversation.projection(fresh=False)

    def _record(
        self, conversation_id: Any, history: Sequence[Any], sent_to: SentTo
    ) -> _Conversation:
        conversation = self._conversation(conversation_id)
        conversation.record(history, sent_to)
        return conversation

    def _caught_up(self, conversation_id: Any, sent_to: SentTo) -> _Conversation:
        """The conversation, with what its last request carried logged (a request that went
        ahead leaves its new messages to the end of the run)."""
        conversation = self._conversation(conversation_id)
        conversation.record(conversation.history, sent_to)
        return conversation

    def _conversation(self, conversation_id: Any) -> _Conversation:
        return self._conversations[conversation_id]


class _Conversation:
    """One conversation's session, the index of what it holds, and its converted projection."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.index = _Index()
        self._history: Sequence[Any] = ()
        self._split: dict[int, int] = {}
        """How many logged messages each history position was split into."""
        self._pieces: dict[int, _Piece] = {}
        self._segments: Segments[ModelMessage] = Segments()
        """The projection but its newest group, which may still grow."""
        self._group: list[_Piece] = []
        self._checked: tuple[Any, Message] | None = None
        """The history message last found to match the newest logged one, and that one."""
        self._converted: dict[int, tuple[Any, list[Message]]] = {}
        """What `ahead` converted and left to `record`, by position: the history's message
        and its logged form."""
        self._mirror: tuple[int, int] | None = None
        """(seq, n): while the session's last seq is seq, the projection is exactly the
        history's first n messages, each the history's own object: a request then sends the
        history as it is, with nothing projected (`ahead`)."""
        self.extras = _Extras()
        """What the last request carried that the history does not (`_split`)."""
        self._lock = threading.Lock()

    @property
    def history(self) -> Sequence[Any]:
        """The history the last request was made from."""
        return self._history

    def ahead(
        self, history: Sequence[Any], compactor: Compactor | None, sent_to: SentTo
    ) -> list[ModelMessage] | None:
        """The projection for a request whose new messages are all requests (a run's first
        request: the user's prompt) when no compaction is due with them counted in, worked out
        from what the session holds, with no look at the store and nothing appended; else None,
        and the request goes through `record` and `projection` as any other. `history` itself
        when the projection is the history as it is (`_mirror`), the usual case until the
        first compaction: nothing is converted or copied for it.

        The new messages are logged with the rest of the run when it ends (`after_run`), in one
        append. Should the process stop before then, the log holds nothing of the run, so a new
        process given the history as the application kept it continues the log with no gap and
        nothing twice; another writer's events show from the next look at the store on."""
        with self._lock:
            newest = self.index.newest
            if newest is None:
                return None  # not looked at in this process yet
            start = source_of(newest)[1] + 1
            tail = history[start:]
            if not tail or not all(isinstance(m, ModelRequest) for m in tail):
                return None
            if not self._continues(history):
                return None  # `record` takes back an unfinished run's messages, or refuses
            adding: list[Message] = []
            converted: dict[int, tuple[Any, list[Message]]] = {}
            for position in range(start, len(history)):
                given = history[position]
                # A plain prompt is counted from its text; `record` converts it in full in the
                # worker thread, with the response. Anything else is converted here, once.
                counted = conv.counted_form(given)
                if counted is None:
                    counted = conv.to_messages(given, index=position, sourced=True, sent_to=sent_to)
                    converted[position] = (given, counted)
                adding.extend(counted)
            if not fits_ahead(compactor, self.session, adding):
                return None
            self._converted = converted
            self._history = list(history)
            if self._mirror == (self.session.last_seq, start):
                # What the last `record` appended left the projection the history's own
                # messages: `_project` folds those items in when a projection is next needed.
                return history if isinstance(history, list) else list(history)
            out = self._project(fresh=False)
            out.extend(tail)
            return out

    def record(self, history: Sequence[Any], sent_to: SentTo) -> None:
        """Append the messages of `history` the log does not hold yet, in one atomic append,
        their media priced for where the request goes (`sent_to`, see `_sent_to`).

        Positions are logged in order, so every position up to the newest logged one is in the
        log already (`_continues` has just made sure the history still holds it): only the
        positions after it are looked at."""
        try:
            self._record(history, sent_to, look=False)
        except ConflictError:
            # Another writer appended since this conversation last looked: look, decide again.
            self._record(history, sent_to, look=True)

    def _record(self, history: Sequence[Any], sent_to: SentTo, *, look: bool) -> None:
        with self._lock:
            expected = self.index.look(self.session, always=look)
            retractions: list[NewEvent] = []
            if self._continues(history):
                newest = self.index.newest
                start = source_of(newest)[1] + 1 if newest is not None else 0
            else:
                retractions, start = self._take_back(history)
                self._checked = None
                for stale in [p for p in self._split if p >= start]:
                    del self._split[stale]
            self._history = list(history)
            early, self._converted = self._converted, {}
            # The projection stays the history's own messages when it was before this append
            # and the append adds every new position, whole, and nothing else lands with it.
            mirrored = not retractions and self._mirror == (self.session.last_seq, start)
            logged: dict[int, list[Message]] = {}
            for position in range(start, len(history)):
                if not retractions and ("m", position, 0) in self.index.seq_of:
                    mirrored = False
                    continue
                kept = early.get(position)
                logged[position] = (
                    kept[1] if kept is not None and kept[0] is history[position] else []
                )
            # What `ahead` left unconverted (a run's prompt) and what came since (its response),
            # in one pass.
            unconverted = [position for position, messages in logged.items() if not messages]
            converted = conv.to_messages_at(history, unconverted, sourced=True, sent_to=sent_to)
            logged.update(zip(unconverted, converted, strict=True))
            new: list[Message] = []
            for position, messages in logged.items():
                self._split[position] = len(messages)
                mirrored = mirrored and bool(messages)
                new.extend(messages)
            if retractions:
                # Taken back and continued in one atomic append: the log never shows the
                # history half taken back.
                self.index.fold(self.session.append([*retractions, *new], expected_seq=expected))
                self._mirror = None
            elif new:
                seq = self.session.last_seq
                stored = self.session.append(new, expected_seq=expected)
                self.index.fold(stored)
                # Freshly converted pieces of whole positions project back to those positions
                # (`_whole`); the seqs say no other writer's event was folded with them.
                last = self.session.last_seq
                if mirrored and stored[0].seq == seq + 1 and last == seq + len(new):
                    self._mirror = (last, len(history))
                newest = self.index.newest
                if newest is not None:
                    # Just converted from this very object: the next call that passes it again
                    # need not convert it a second time to know the history continues the log.
                    self._checked = (history[source_of(newest)[1]], newest)

    def _continues(self, history: Sequence[Any]) -> bool:
        """Whether `history` continues the log: positions are the mapping, so a history that is
        shorter, or differs at the newest logged message, would be misread."""
        newest = self.index.newest
        if newest is None:
            return True
        _, position, part = source_of(newest)
        if position >= len(history):
            return False
        checked = self._checked
        if checked is not None and checked[0] is history[position] and checked[1] is newest:
            return True  # the very objects found to match before
        if self._matches(history, position, part, newest):
            self._checked = (history[position], newest)
            return True
        return False

    @staticmethod
    def _matches(history: Sequence[Any], position: int, part: int, logged: Message) -> bool:
        given = conv.to_messages(history[position], index=position)
        # The framework's own message decides: a message an earlier ctxfold logged may lack
        # what this one derives from it (its media record).
        return part < len(given) and given[part].extra.get(conv.NAMESPACE) == logged.extra.get(
            conv.NAMESPACE
        )

    def _take_back(self, history: Sequence[Any]) -> tuple[list[NewEvent], int]:
        """The retractions that take back what a run that did not reach its end logged beyond
        `history`, and the first position `history` adds; else the refusal.

        A run logs its rounds before each model request and its last response only at its end,
        so when the log holds the history as given and, after it, the messages of one run
        (one ``run_id``) that end with a request, that run failed or was cancelled after a tool
        round, and the application retries from the history it kept: its messages leave the
        projection (the log keeps them) and the retry goes on from the history. Anything else
        (another run's messages, a compaction past the history) is refused."""
        items = self.session.items(fresh=False)
        if not items or items[-1].message.role == "assistant":
            self._refuse(history)  # the log's newest message is a response: its run ended
        tail: list[int] = []
        runs: set[Any] = set()
        start = 0
        for item in reversed(items):
            source = source_of(item.message)
            if not (isinstance(source, list) and len(source) == 3):
                self._refuse(history)  # a summary or note: compacted past the history
            _, position, part = source
            if position < len(history) and self._matches(history, position, part, item.message):
                if part != len(conv.to_messages(history[position], index=position)) - 1:
                    self._refuse(history)  # the history's message there holds more
                start = position + 1
                break
            tail.append(item.id)
            kept = item.message.extra.get(conv.NAMESPACE)
            header = kept.get("header") if isinstance(kept, dict) else None
            runs.add(header.get("run_id") if isinstance(header, dict) else None)
        if len(runs) != 1:
            self._refuse(history)  # the messages after the history are not one run's
        return [NewEvent.of(Retraction(item_id)) for item_id in tail], start

    def _refuse(self, history: Sequence[Any]) -> NoReturn:
        newest = self.index.newest
        position = source_of(newest)[1] if newest is not None else 0
        raise InvalidInputError(
            f"conversation {self.session.id!r}: the message history passed ({len(history)} "
            f"messages) does not continue what ctxfold logged for it (message {position} "
            "differs or is missing); pass the last run's result.all_messages() as "
            "message_history, or start a new conversation_id"
        )

    def projection(self, *, fresh: bool = True) -> list[ModelMessage]:
        """The projection as pydantic-ai messages, split requests regrouped; worked out only as
        far as it changed since the last call.

        A history message whose logged pieces are all projected, in order, with nothing changed,
        is handed back as the history's own object (pydantic-ai then sees exactly what it holds
        and compares nothing twice); summaries, notes and cleared results are converted."""
        with self._lock:
            return self._project(fresh=fresh)

    def _project(self, *, fresh: bool) -> list[ModelMessage]:
        """`projection`; the lock is held."""
        if fresh:
            self.session.refresh()
        # The seq first: an event folded in between can only make `_mirror` look out of date.
        seq = self.session.last_seq
        items = self.session.items(fresh=False)
        new, restarted = self._segments.new_items(items, self._pieces)
        if restarted:
            self._group = []
        for item in new:
            piece = self._pieces.get(item.id)
            if piece is None or piece.message is not item.message:
                piece = self._pieces[item.id] = _Piece(item.message)
            group = self._group
            if group and piece.joins(group[-1]):
                group.append(piece)
            else:
                if group:
                    self._close(group)
                self._group = [piece]
        self._segments.done(items)
        out = self._segments.render(self._history)
        mirrored = self._segments.prefix()
        if self._group:
            position = self._whole(self._group)
            out.append(self._history[position] if position is not None else _merged(self._group))
            mirrored = position + 1 if position is not None and position == mirrored else None
        self._mirror = (seq, mirrored) if mirrored is not None else None
        return out

    def _close(self, group: list[_Piece]) -> None:
        position = self._whole(group)
        if position is None:
            self._segments.add(_merged(group))
        else:
            self._segments.add_position(position)

    def _whole(self, group: Sequence[_Piece]) -> int | None:
        """The history position `group` is all of, unchanged, or None."""
        origins = [piece.origin for piece in group]
        first = origins[0]
        if first is None or any(o is None or o != (first[0], n) for n, o in enumerate(origins)):
            return None
        position = first[0]
        if position >= len(self._history):
            return None
        if position not in self._split:
            self._split[position] = len(conv.to_messages(self._history[position], index=position))
        return position if self._split[position] == len(group) else None


@dataclasses.dataclass(frozen=True)
class _Extras:
    """What a request carries that the run's history does not, put there by a capability
    listed before this one for this request only (`_split`).

    - `added`: each added message with the history position it follows (-1: the start).
    - `replaced`: the ids of the history messages the request carries another message in place
      of (a system prompt rewritten for this request)."""

    added: tuple[tuple[int, ModelMessage], ...] = ()
    replaced: frozenset[int] = frozenset()


def _split(messages: Sequence[Any], history: Sequence[Any]) -> tuple[Sequence[Any], _Extras]:
    """The history to log and the request's own messages (`_Extras`), from the request's
    messages and the run's history (``ctx.messages``).

    With no capability ahead that edits the request, its messages are the history's own
    objects, in order: they are the history, and nothing is looked at twice. Messages equal to
    the history's, one for one, are the history too (copies of it, as a run context rebuilt from
    serialized messages would hold)."""
    if len(messages) == len(history) and (
        all(map(operator.is_, messages, history)) or all(map(operator.eq, messages, history))
    ):
        return messages, _Extras()
    where = {id(m): position for position, m in enumerate(history)}
    added: list[tuple[int, ModelMessage]] = []
    carried: set[int] = set()
    after = -1
    for message in messages:
        position = where.get(id(message))
        if position is None:
            added.append((after, message))
        else:
            carried.add(position)
            after = position
    # A history message left out with an added one in its gap was replaced for this request: the
    # model gets the replacement alone. One left out with nothing in its place is still sent.
    gaps = {position + 1 for position, _ in added}
    replaced = frozenset(
        id(history[p]) for p in range(len(history)) if p not in carried and p in gaps
    )
    return history, _Extras(tuple(added), replaced)


def _sent(
    projected: list[ModelMessage], extras: _Extras, history: Sequence[Any]
) -> list[ModelMessage]:
    """What the model is sent: `projected` with the request's own messages (`_split`) put back,
    each after the history message it followed, or after the nearest earlier one still projected
    as that very message (else at the start; after the newest, at the end), and without the
    history messages they replaced. A projected message that compaction rewrote is not the
    history's object, so a replaced one compacted into a summary stays as the log has it."""
    if not extras.added:
        return projected
    at = {id(m): index for index, m in enumerate(projected)}
    slots: dict[int, list[ModelMessage]] = {}
    newest = len(history) - 1
    for position, message in extras.added:
        slot = len(projected) - 1 if position == newest else None
        while slot is None and position >= 0:
            slot = at.get(id(history[position]))
            position -= 1
        slots.setdefault(-1 if slot is None else slot, []).append(message)
    out = list(slots.get(-1, ()))
    for index, message in enumerate(projected):
        if id(message) not in extras.replaced:
            out.append(message)
        out.extend(slots.get(index, ()))
    return out


def _sent_to(model: Any) -> SentTo:
    """Whose rules price the media a request to `model` sends (`conv.model_provider`), worked
    out once, and only when a message to log holds media: a request without media pays nothing
    for it. It wins over what the history tells (`conv._first` says why), so a run's first
    prompt, logged before any response names a model, is priced for the model it goes to."""
    return functools.cache(functools.partial(conv.model_provider, model))


_RAW = "\x00arguments"
"""The keyword under which the recall tool receives arguments that are not a JSON object."""


def _as_keywords(arguments: Any) -> dict[str, Any]:
    return arguments if isinstance(arguments, dict) else {_RAW: arguments}


class _Index(SourceIndex):
    """`SourceIndex` that honours a run taken back (`_Conversation._take_back`): a message
    logged at a position the log already holds starts the history over from there, so the
    positions from it on are those of the messages logged since. A retraction alone (the
    application's) frees no position."""

    def __init__(self) -> None:
        super().__init__()
        self._keyed: list[tuple[int, Any]] = []
        """(position, key) of each keyed message still mapped, in seq order."""

    def fold(self, events: Iterable[Event]) -> None:
        for event in events:
            self.last_seq = event.seq
            if event.type != MESSAGE:
                continue
            message = event.message
            source = source_of(message)
            if source is None:
                continue
            key = hashable(source)
            if key in self.seq_of:
                keyed = self._keyed
                while keyed and keyed[-1][0] >= key[1]:
                    self.seq_of.pop(keyed.pop()[1], None)
            self.seq_of[key] = event.seq
            self._keyed.append((key[1], key))
            self.newest = message


class _Piece:
    """One projected message on its way back to pydantic-ai: its group key, where in the
    history it came from when nothing changed it, and its converted form, made when needed."""

    def __init__(self, message: Message) -> None:
        self.message = message
        self.key = conv.group_key(message)
        self.request = message.role != "assistant"
        source = source_of(message)
        faithful = isinstance(source, list) and len(source) == 3 and conv.faithful(message)
        self.origin: tuple[int, int] | None = (source[1], source[2]) if faithful else None
        self._model: ModelMessage | None = None

    def joins(self, previous: _Piece) -> bool:
        """Whether this piece belongs to the request `previous` is part of."""
        return self.key is not None and self.key == previous.key and previous.request

    @property
    def model(self) -> ModelMessage:
        if self._model is None:
            self._model = conv.to_model_message(self.message)
        return self._model


def _merged(group: Sequence[_Piece]) -> ModelMessage:
    (merged,) = conv.regroup([(piece.key, piece.model) for piece in group])
    return merged


__all__ = ["CtxfoldCapability"]
