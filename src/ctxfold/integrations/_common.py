"""What the framework integrations share: opening a session, the ``ctxfold`` key that maps a
framework's messages to log seqs, and the seam through which recall is offered as a tool.

Each integration stores the framework's own message (or item) verbatim in the `extra` of the
`Message` it appends, under the framework's name, and its own bookkeeping under ``"ctxfold"``:
``extra["ctxfold"]["source"]`` is the key the framework knows that message by (a LangChain
message id, a pydantic-ai position). Because the key lives in the log, a new process with a new
store connection rebuilds the mapping by reading the session, and appends nothing twice.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, cast, runtime_checkable

from ctxfold.errors import ConfigurationError, InvalidInputError
from ctxfold.events import MESSAGE, Event
from ctxfold.messages import Message
from ctxfold.session.frozen import Frozen
from ctxfold.session.projection import Item

if TYPE_CHECKING:
    from ctxfold.compactor import Compactor
    from ctxfold.session import Session
    from ctxfold.storage.base import EventStore
    from ctxfold.tokens import Budget

M = TypeVar("M")
T = TypeVar("T")

KEY = "ctxfold"
"""The namespace in `Message.extra` that holds an integration's own bookkeeping."""


def default_store() -> EventStore:
    """The store an integration opens when given none: SQLite at the CLI's default path, so
    ``ctxfold sessions log`` shows what the agent logged."""
    from ctxfold.storage.sqlite import SQLiteStore, default_sqlite_path

    path = default_sqlite_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return SQLiteStore(str(path))


def open_session(store: EventStore | None, session_id: object, *, what: str) -> Session:
    """A `Session` over `store` (the default store when None) for a framework's session id.

    `what` names the id in the error ("thread id", "conversation id") when it is not a
    non-empty string.
    """
    from ctxfold.session import Session

    if not isinstance(session_id, str) or not session_id:
        raise InvalidInputError(
            f"the {what} must be a non-empty string to name a ctxfold session, "
            f"not {type(session_id).__name__} {session_id!r}"
        )
    return Session(store if store is not None else default_store(), session_id)


class PerConversation(Generic[T]):
    """One object per conversation of the framework's (a thread id, a conversation id), made by
    `make` on first use over the ctxfold session of the same id. Safe from several threads.

    `what` names the id in the error when it is not a non-empty string (see `open_session`).
    """

    def __init__(
        self, store: EventStore | None, make: Callable[[Session], T], *, what: str
    ) -> None:
        self.store = store
        self._make = make
        self._what = what
        self._made: dict[str, T] = {}
        self._lock = threading.Lock()

    def known(self, conversation_id: object) -> T | None:
        """The object already made for `conversation_id`, or None; opens nothing."""
        with self._lock:
            return self._made.get(conversation_id) if isinstance(conversation_id, str) else None

    def __getitem__(self, conversation_id: object) -> T:
        with self._lock:
            found = self._made.get(conversation_id) if isinstance(conversation_id, str) else None
            if found is None:
                session = open_session(self.store, conversation_id, what=self._what)
                found = self._made[session.id] = self._make(session)
            return found


def make_compactor(budget: Budget | None, compactor: Compactor | None) -> Compactor | None:
    """The compactor an integration uses: the one given, else one over `budget`, else none."""
    from ctxfold.compactor import Compactor

    if compactor is not None and budget is not None:
        raise ConfigurationError("pass either budget= or compactor=, not both")
    if compactor is not None:
        if not isinstance(compactor, Compactor):
            raise ConfigurationError(f"compactor must be a ctxfold.Compactor, not {compactor!r}")
        return compactor
    return Compactor(budget) if budget is not None else None


def with_source(message: Message, source: Any) -> Message:
    """`message` with its framework key recorded under ``extra["ctxfold"]``."""
    return message.replace(extra={**message.extra, KEY: {"source": source}})


def source_of(message: Message) -> Any:
    """The framework key recorded with `message`, or None (a summary, a note)."""
    kept = message.extra.get(KEY)
    return kept.get("source") if isinstance(kept, Mapping) else None


class SourceIndex:
    """Which framework keys the log already holds, folded from the log event by event.

    `refresh(session)` reads only the events after the last one it saw, so keeping the index
    current costs O(new events), not a rescan of the session.
    """

    def __init__(self) -> None:
        self.last_seq = 0
        self.seq_of: dict[Any, int] = {}
        self.newest: Message | None = None
        """The most recently logged message that has a framework key."""

    def refresh(self, session: Session) -> None:
        # The session looks for other writers' events anyway; read the log only when it found
        # some this index has not seen.
        session.refresh()
        if session.last_seq > self.last_seq:
            self.fold(session.events(after=self.last_seq))

    def look(self, session: Session, *, always: bool = False) -> int | None:
        """Bring the index up to date before deciding what to append; returns the seq that
        append is to expect, or None.

        When the index has folded every event the session holds (and so has looked before), the
        look at the store is skipped: the append expects the log to end where the index saw it,
        so another writer's append in between makes it fail with `ConflictError` instead of
        going unseen; the caller then looks again (``always=True``) and decides afresh."""
        if not always and 0 < self.last_seq == session.last_seq:
            return self.last_seq
        self.refresh(session)
        return None

    def fold(self, events: Iterable[Event]) -> None:
        for event in events:
            self.last_seq = event.seq
            if event.type == MESSAGE:
                message = event.message
                source = source_of(message)
                if source is not None:
                    self.seq_of[hashable(source)] = event.seq
                    self.newest = message

    def __contains__(self, source: Any) -> bool:
        return hashable(source) in self.seq_of


def appended_since(previous: Sequence[Item], items: Sequence[Item]) -> Sequence[Item] | None:
    """The items added at the end of the projection since `previous` (an earlier
    `Session.items()`), or None when it changed otherwise (a compaction, mask, retraction or
    reset): what lets an integration convert only what is new before a model call."""
    if isinstance(items, Frozen) and items.extends(previous):
        return items[len(previous) :]
    return None


class Segments(Generic[M]):
    """The projection in a framework's own message type, kept up as the projection grows: runs of
    positions in the framework's own message list (handed back as its own objects, so the
    framework sees exactly what it holds) and messages converted from the log (summaries, notes,
    cleared results, or a whole history where the framework keeps no list).

    `new_items` says which projected items to add before a model call: only those appended since
    the last `done`, so a call converts O(new items); after a compaction, mask, retraction or
    reset (or `forget`), all of them, and the segments start over.
    """

    def __init__(self) -> None:
        self._seen: Sequence[Item] | None = ()
        self._parts: list[range | M] = []
        self._ranges = False
        """Whether any part is a run of positions (none where the framework keeps no list)."""

    def new_items(
        self, items: Sequence[Item], cache: MutableMapping[int, Any]
    ) -> tuple[Sequence[Item], bool]:
        """The items to add, and whether the segments started over; then `cache` (an
        integration's conversions, by item id) keeps only the items still projected."""
        new = appended_since(self._seen, items) if self._seen is not None else None
        if new is not None:
            return new, False
        self._parts, self._ranges = [], False
        kept = {item.id for item in items}
        for stale in [key for key in cache if key not in kept]:
            del cache[stale]
        return items, True

    def done(self, items: Sequence[Item]) -> None:
        """`items` are all added: the next `new_items` starts after them."""
        self._seen = items

    def forget(self) -> None:
        """The framework's list changed other than by growing: positions may have moved, so the
        next `new_items` starts over."""
        self._seen = None

    def add_position(self, position: int) -> None:
        """The framework's own message at `position`, after the segments so far."""
        parts = self._parts
        last = parts[-1] if parts else None
        if isinstance(last, range) and last.stop == position:
            parts[-1] = range(last.start, position + 1)
        else:
            parts.append(range(position, position + 1))
            self._ranges = True

    def add(self, *messages: M) -> None:
        """Converted messages, after the segments so far."""
        self._parts.extend(messages)

    def prefix(self) -> int | None:
        """How many of the framework's messages the segments are, counted from its first, when
        they are exactly those and nothing else (no converted message, no gap); else None."""
        parts = self._parts
        if not parts:
            return 0
        first = parts[0]
        if len(parts) == 1 and isinstance(first, range) and first.start == 0:
            return first.stop
        return None

    def render(self, framework: Sequence[M] = ()) -> list[M]:
        """The segments as one list, positions read from `framework`, the framework's own list."""
        if not self._ranges:
            return cast("list[M]", list(self._parts))
        out: list[M] = []
        for part in self._parts:
            if isinstance(part, range):
                out.extend(framework[part.start : part.stop])
            else:
                out.append(part)
        return out


def needs_compaction(compactor: Compactor | None, session: Session, *, fresh: bool = True) -> bool:
    """Whether a model call must go through the compactor's check first: always with background
    compaction (it starts runs below the trigger), else when the budget says so (`fresh=False`:
    judged without a look at the store, right after an append or a look)."""
    if compactor is None:
        return False
    return compactor.background is not None or compactor.should_compact(session, fresh=fresh)


def fits_ahead(compactor: Compactor | None, session: Session, adding: Sequence[Message]) -> bool:
    """Whether a model call may go ahead without the compactor's check with `adding` not yet
    appended, judged from what `session` holds without a look at the store: no compactor, or one
    with neither background compaction nor an application trigger (which may look at the store)
    whose budget is not reached with `adding` counted in."""
    if compactor is None:
        return True
    if compactor.background is not None or compactor.app_trigger is not None:
        return False
    return not compactor.should_compact(session, adding=adding, fresh=False)


def hashable(source: Any) -> Any:
    """A framework key in a form a dict can hold (keys read back from JSON come as lists)."""
    # Keys read back from JSON come as lists where the integration wrote tuples.
    return tuple(hashable(s) for s in source) if isinstance(source, (list, tuple)) else source


@runtime_checkable
class RecallTool(Protocol):
    """The seam through which an integration offers recall to the model as a tool.

    Recall itself (reading back what the projection no longer shows) is not part of the
    integrations; an object with this shape is (`ctxfold.session.recall.Recall`, which
    ``recall=True`` picks, or one of the application's own). Each integration turns it into that
    framework's own tool form (a `FunctionTool`, a LangChain `StructuredTool`, a pydantic-ai `Tool`)
    bound to the conversation's session, and the model calls it like any other tool.

    - `name`, `description`: what the model is told.
    - `parameters`: the JSON schema of the arguments (an ``"object"`` schema).
    - `__call__(session, arguments)`: the answer, as text, for one call in that session.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]

    def __call__(self, session: Session, arguments: Mapping[str, Any]) -> str: ...


def check_recall(recall: object) -> RecallTool | None:
    """`recall` if it has the `RecallTool` shape; ctxfold's own recall tool
    (`ctxfold.session.recall.Recall`) for True; None for None or False; anything else is an
    error."""
    if recall is None or recall is False:
        return None
    if recall is True:
        from ctxfold.session.recall import Recall

        return Recall()
    if not isinstance(recall, RecallTool):
        raise ConfigurationError(
            f"recall must have name, description, parameters and __call__(session, arguments), "
            f"not {recall!r}"
        )
    if not isinstance(recall.parameters, Mapping) or recall.parameters.get("type") != "object":
        raise ConfigurationError(
            f"recall.parameters must be a JSON schema of type 'object', not {recall.parameters!r}"
        )
    return recall


__all__ = [
    "KEY",
    "PerConversation",
    "RecallTool",
    "Segments",
    "SourceIndex",
    "appended_since",
    "check_recall",
    "default_store",
    "fits_ahead",
    "hashable",
    "make_compactor",
    "needs_compaction",
    "open_session",
    "source_of",
    "with_source",
]
