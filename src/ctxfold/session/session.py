"""Sessions: one conversation's log, its projection, and its running token estimate.

`Session` is a thin, synchronous object over an `EventStore`. It keeps the projection in memory
and folds in only the events it has not seen, so `messages()` after an append costs O(new events)
rather than a replay of the log. Every write that the projection could refuse (an edit, a
retraction, a pin) is checked against the projection first and then appended with
`expected_seq`, so it is validated against exactly the history it lands on.

What an append hands the store and the projection is worked out in `ctxfold.session.appended`;
`AsyncSession` (`ctxfold.session.async_session`) moves this object off an asyncio event loop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, cast

from ctxfold.errors import ConflictError, InvalidHistoryError, InvalidInputError
from ctxfold.events import (
    COMPACTION,
    MASK,
    RESET,
    RESHAPING,
    Event,
    NewEvent,
    Overflow,
    Pin,
    Reset,
    Retraction,
    Unpin,
    Usage,
)
from ctxfold.messages import Message
from ctxfold.protocols import TokenCounter
from ctxfold.session import checkpoint
from ctxfold.session.appended import (
    as_events,
    message_event,
    private_event,
    refuse_non_batch,
)
from ctxfold.session.collector import collector_paused
from ctxfold.session.fold import Fold
from ctxfold.session.projection import Item
from ctxfold.session.recall import DEFAULT_MAX_TOKENS, Recalled, Recaller
from ctxfold.session.recall.tool import call_recall
from ctxfold.session.snapshot import Snapshot
from ctxfold.storage.base import StoreBase, register_session_type
from ctxfold.storage.checks import EncodedEvent
from ctxfold.tokens.counters import as_counter
from ctxfold.tokens.counters import counter as make_counter
from ctxfold.tokens.tally import Tally

CHECKPOINT_EVERY = 1000
"""Events between two checkpoints of a session's projection, by default (besides one at each
compaction, mask and reset)."""

_RESHAPED = frozenset({COMPACTION, MASK, RESET})


_log = logging.getLogger(__name__)


class Session:
    """One conversation stored in an `EventStore`.

    >>> from ctxfold.storage import MemoryStore
    >>> session = MemoryStore().session("demo")
    >>> _ = session.append([Message("system", "You are terse."), Message("user", "hello")])
    >>> [m.role for m in session.messages()]
    ['system', 'user']
    """

    def __init__(
        self,
        store: StoreBase,
        session_id: str,
        *,
        counter: TokenCounter | str | None = None,
        checkpoint_every: int | None = CHECKPOINT_EVERY,
    ) -> None:
        if not isinstance(session_id, str) or not session_id:
            raise InvalidInputError(f"a session id must be a non-empty string, not {session_id!r}")
        if checkpoint_every is not None and (
            isinstance(checkpoint_every, bool)
            or not isinstance(checkpoint_every, int)
            or checkpoint_every < 1
        ):
            raise InvalidInputError(
                f"checkpoint_every must be a positive number of events or None, "
                f"not {checkpoint_every!r}"
            )
        self.store = store
        self.id = session_id
        self.checkpoint_every = checkpoint_every
        self._by_name: dict[str, TokenCounter] = {}
        self._counter = None if counter is None else self._named(counter)
        self._state = Fold()
        self._started = False
        self._mark: int | None = None
        """The store's `change_mark` when this projection last caught up with its log."""
        self._checkpoint_seq = 0
        self._checkpoints = checkpoint.Encoder()
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"Session({self.id!r}, last_seq={self._state.projection.last_seq})"

    # -- writing ---------------------------------------------------------------------------
    def append(
        self,
        items: Message | NewEvent | Iterable[Message | NewEvent],
        *,
        expected_seq: int | None = None,
        idempotency_key: str | None = None,
    ) -> list[Event]:
        """Append messages and/or events atomically; returns the stored events.

        Edits (compaction, mask, retraction, reset) and pins are checked against the current
        projection and refused with `InvalidHistoryError` before anything is written
        (`invalid-edit-refused`); a compaction or mask that would touch a pinned item is refused
        too (`pins-respected`). When the batch holds such an event, the append is made with
        `expected_seq` (the seq the check ran against, unless given), so a concurrent writer
        makes it fail with `ConflictError` rather than land on another history.

        `idempotency_key` names this append (make it once, before the first try, e.g. a UUID):
        sent again after a lost acknowledgement, the append writes nothing and returns the events
        the first try stored, and the projection holds them once (`session-append-idempotent`).
        An edit whose first try landed is recognised too, though its check now fails.
        """
        if type(items) is Message:
            # One message, the common append (a replay makes one per message): no batch loop.
            event, message = message_event(0, items)
            items_list: list[Message | NewEvent] = [items]
            batch, known, others = [event], [message], 0
        else:
            refuse_non_batch(items)
            items_list = [items] if isinstance(items, (Message, NewEvent)) else list(items)
            batch, known, others = as_events(items_list)
        if not batch:
            return []
        with self._lock:
            # Messages alone (the common append) need neither the edit check nor the event check.
            if others and any(e.type in RESHAPING for e in batch):
                self.refresh()
                try:
                    last = self._state.projection.last_seq
                    if expected_seq is not None and expected_seq != last:
                        raise ConflictError(self.id, expected_seq, last)
                    self._check_batch(batch)
                except (ConflictError, InvalidHistoryError):
                    prior = self._landed_before(batch, idempotency_key)
                    if prior is None:
                        raise
                    return prior
                expected_seq = self._state.projection.last_seq
            elif others:
                # Messages given as Message values are valid by construction; a raw event is read
                # back once here so a bad one is refused before anything is written.
                for item, event in zip(items_list, batch, strict=True):
                    if not isinstance(item, Message):
                        self._state.projection.check(event)
            stored, written = self._write(batch, expected_seq, idempotency_key)
            if written is None and idempotency_key is not None:
                # Perhaps a retry of an append that landed: the events are the first try's,
                # which may differ from this one's messages in the order of their keys.
                known = [None] * len(stored)
            self._catch_up(stored, known, written)
            self._keep_checkpoint(stored, reshaped=None if others else False)
            return stored

    def _write(
        self, batch: list[NewEvent], expected_seq: int | None, key: str | None
    ) -> tuple[list[Event], list[EncodedEvent] | None]:
        """`store.append` of `batch`, and the events as the store encoded them when it can say
        (`StoreBase._append`): a store whose `append` is wrapped (a subclass or an instance
        that replaces it) is asked through that wrapper, and says nothing more."""
        store = self.store
        if getattr(store.append, "__func__", None) is StoreBase.append:
            return store._append(self.id, batch, expected_seq, key)
        # The key goes only when given: a store wrapper written before keys existed (an
        # `append` without the keyword) keeps working for unkeyed appends.
        keyed = {} if key is None else {"idempotency_key": key}
        return store.append(self.id, batch, expected_seq=expected_seq, **keyed), None

    def _landed_before(self, batch: list[NewEvent], key: str | None) -> list[Event] | None:
        """The events a first try with `key` stored, when an edit retried with it no longer
        passes its check because that first try landed; None when the key is new."""
        if key is None or self._state.projection.last_seq == 0:
            return None
        try:
            # expected_seq 0 never matches a session that has events: the store answers with
            # the first try's events when the key was used, else refuses and writes nothing.
            return self.store.append(self.id, batch, expected_seq=0, idempotency_key=key)
        except ConflictError:
            return None

    def _catch_up(
        self,
        stored: Sequence[Event],
        known: Sequence[Message | None] | None = None,
        written: Sequence[EncodedEvent] | None = None,
    ) -> None:
        # When nobody else wrote in between, the events just stored are the next ones to fold:
        # fold them directly instead of reading them back from the store, with the Message
        # values the caller appended where their stored data gives them back equal (`known`,
        # None elsewhere), so a message is not decoded again right after it was encoded.
        # Any other event is folded from a copy of its data: the events go back to the caller,
        # who may change them, and the view must not change with them. That copy is decoded
        # from the text the store wrote (`written`, when it says), rather than encoded again.
        if stored and stored[0].seq == self._state.projection.last_seq + 1:
            state = self._state
            if known is None or len(known) != len(stored):
                known = [None] * len(stored)
            if len(known) == 1 and known[0] is not None:
                # One message the caller holds: the common append, and a replay's every one.
                state.fold_message(stored[0].seq, known[0])
            elif all(message is not None for message in known):
                # Only messages the caller holds: folded in one go.
                state.fold_messages(stored[0].seq, cast("list[Message]", known))
            else:
                texts = written if written is not None and len(written) == len(stored) else None
                for index, (event, message) in enumerate(zip(stored, known, strict=True)):
                    if message is not None:
                        state.fold_message(event.seq, message)
                    else:
                        state.fold(private_event(event, texts[index].data if texts else None))
            # Caught up still, when the only append the store saw since the last look is this
            # one: then the next look need not read the log.
            mark = self.store.change_mark()
            if mark is not None and self._mark is not None and mark == self._mark + 1:
                self._mark = mark
        else:
            try:
                self.refresh()
            except InvalidInputError as exc:
                # The append landed. An event another writer stored cannot be read: the next
                # read folds the log again and raises, naming it. Raising here would tell the
                # caller the append failed, and a retry would write it a second time.
                _log.warning(
                    "session %r: the append landed (seqs %d to %d), but %s",
                    self.id,
                    stored[0].seq,
                    stored[-1].seq,
                    exc,
                )

    def _check_batch(self, batch: Sequence[NewEvent]) -> None:
        # Check each event against the projection as the earlier events of the batch leave it,
        # on a scratch copy, with the seqs the store will give them.
        scratch = self._state.projection.copy()
        seq = scratch.last_seq
        for event in batch:
            seq += 1
            scratch.check(event)
            scratch.apply(Event(self.id, seq, event.type, event.data, 0.0))

    def record_usage(
        self,
        prompt_tokens: int,
        *,
        completion_tokens: int | None = None,
        after_seq: int | None = None,
        model: str | None = None,
    ) -> Event:
        """Record the provider's reported prompt tokens for the request sent after `after_seq`
        (default: the last seq now). Later estimates start from this figure."""
        if (
            isinstance(prompt_tokens, bool)
            or not isinstance(prompt_tokens, int)
            or prompt_tokens < 0
        ):
            raise InvalidInputError(
                f"prompt_tokens must be a non-negative int, not {prompt_tokens!r}"
            )
        with self._lock:
            self.refresh()
            usage = Usage(self._after(after_seq), prompt_tokens, completion_tokens, model)
            return self._append_checked(NewEvent.of(usage))

    def record_overflow(self, *, after_seq: int | None = None) -> Event:
        """Record that the provider refused the request sent after `after_seq` (default: the
        last seq now) as too long; `overflows` counts these (`overflow-recovery`)."""
        with self._lock:
            self.refresh()
            return self._append_checked(NewEvent.of(Overflow(self._after(after_seq))))

    def _after(self, after_seq: int | None) -> int:
        """The seq a provider report is about: `after_seq`, which must be in the log, else the
        last one. A report on a request after a seq not yet written would describe no request
        and would pull every later estimate down to its figure."""
        last = self._state.projection.last_seq
        if after_seq is None:
            return last
        if (
            isinstance(after_seq, bool)
            or not isinstance(after_seq, int)
            or not 0 <= after_seq <= last
        ):
            raise InvalidInputError(
                f"after_seq must be a seq of session {self.id!r} (0 to {last}), not {after_seq!r}"
            )
        return after_seq

    def _append_checked(self, event: NewEvent) -> Event:
        # Read back as a fold will read it, before it is written: a report with a wrong-typed
        # field would otherwise land and make every later read of the session fail.
        self._state.projection.check(event)
        return self._append_one(event)

    def pin(self, *item_ids: int) -> Event:
        """Keep these items out of every strategy's reach (stored, so it survives reopening).

        A compaction planned before the pin landed is planned again or declined; one that would
        cover a pinned item is refused at append time (`pins-respected`)."""
        (event,) = self.append(NewEvent.of(Pin(tuple(item_ids))))
        return event

    def unpin(self, *item_ids: int) -> Event:
        """Release items from an earlier `pin`."""
        (event,) = self.append(NewEvent.of(Unpin(tuple(item_ids))))
        return event

    def retract(self, item_id: int | None = None) -> Item:
        """Take the newest item (or `item_id`: the newest item, or the assistant message that
        starts the newest step, results included) back out of the projection, as a framework's
        ``pop_item`` does; returns the first item retracted. The log keeps it.

        Raises `InvalidHistoryError` for any other item (an item already compacted is no longer
        projected and cannot be named), `InvalidInputError` when the projection is empty, and
        `ConflictError` when another writer appended first (read again and retry)."""
        with self._lock:
            self.refresh()
            items = self._state.projection.items
            if item_id is None:
                if not items:
                    raise InvalidInputError(f"session {self.id!r} has no item to retract")
                item_id = items[-1].id
            index = self._state.projection.position(item_id)
            retracted = items[index] if index is not None else None
            self.append(NewEvent.of(Retraction(item_id)))
            assert retracted is not None  # the append refused an item that was not projected
            return retracted

    def reset(self) -> Event:
        """Empty the projection, as a framework's ``clear_session`` does: every item and every
        pin goes; messages appended afterwards project as in a new session (`reset-honoured`).
        The log keeps everything."""
        (event,) = self.append(NewEvent.of(Reset()))
        return event

    def _append_one(self, event: NewEvent) -> Event:
        stored, written = self._write([event], None, None)
        self._catch_up(stored, None, written)
        self._keep_checkpoint(stored)
        return stored[0]

    def _keep_checkpoint(self, stored: Sequence[Event], *, reshaped: bool | None = None) -> None:
        # At each compaction, mask or reset (the projection just changed shape), and every
        # `checkpoint_every` events. Derived data: the store logs a failure to keep it.
        # `reshaped`: whether `stored` holds such an event, when the caller knows (None: look).
        every = self.checkpoint_every
        last = self._state.projection.last_seq
        if every is None or not stored or last <= self._checkpoint_seq:
            return
        if last - self._checkpoint_seq < every:
            if reshaped is None:
                reshaped = any(e.type in _RESHAPED for e in stored)
            if not reshaped:
                return
        self._checkpoint_seq = last
        self.store.save_snapshot(self.id, last, self._checkpoints.encode(self._state))

    # -- reading ---------------------------------------------------------------------------
    def refresh(self) -> None:
        """Fold in the events other writers appended since the last look. The first look starts
        from the store's checkpoint of this session, when it has a usable one, and folds only
        what came after it (`checkpoints-are-derived`)."""
        with self._lock:
            # Taken before the read: an append that lands during the read moves the mark on, so
            # the next look reads again rather than miss it.
            mark = self.store.change_mark()
            if self._started:
                if mark is None or mark != self._mark:
                    self._fold_new()
                    self._mark = mark
                return
            self._started = True
            # The first look builds the whole projection (see ctxfold.session.collector).
            with collector_paused():
                if self._state.projection.last_seq == 0:
                    loaded = checkpoint.load(self.store, self.id)
                    if loaded is not None:
                        self._state = loaded
                        self._checkpoint_seq = loaded.projection.last_seq
                self._fold_new()
                self._mark = mark

    def _fold_new(self) -> None:
        for event in self.store.stream(self.id, after=self._state.projection.last_seq):
            try:
                self._state.fold(event)
            except InvalidInputError as exc:
                # Only an event written past the session's checks (a raw store.append, another
                # program) gets here: say which one, so that it can be found. The fold may have
                # gone part of the way into it; what it derived is dropped, so that every later
                # read starts again and fails at the same event, rather than read on past it.
                self._forget()
                raise InvalidInputError(
                    f"session {self.id!r}, event {event.seq} ({event.type}) cannot be read: {exc}"
                ) from None

    def _forget(self) -> None:
        """Drop the projection derived so far: the next look folds the log from its start."""
        self._state = Fold()
        self._started = False
        self._mark = None
        self._checkpoint_seq = 0

    def events(self, after: int = 0) -> list[Event]:
        """Every stored event after `after`, originals and compactions alike, in seq order."""
        return self.store.read(self.id, after=after)

    def messages(self) -> Sequence[Message]:
        """The projection: the messages the model is sent now.

        An immutable sequence (`ctxfold.session.frozen.Frozen`), not a list: handing it out costs
        O(1) whatever the length of the history, and it keeps showing this moment's projection
        after later appends and compactions. Copy it (``list(...)``) to change it; it compares
        equal to a list of the same messages (`reads-are-stable`)."""
        with self._lock:
            self.refresh()
            return self._state.projection.messages()

    def items(self, *, fresh: bool = True) -> Sequence[Item]:
        """The projection with each message's id, kind and covered range; an immutable sequence,
        O(1) like `messages()`.

        `fresh=False` skips the look for other writers' events: the projection as of this
        session's last look or append, without waiting on the store (for a caller on an event
        loop); another writer's events show from the next look on."""
        with self._lock:
            if fresh:
                self.refresh()
            return self._state.projection.items

    def message_count(self) -> int:
        """How many messages the projection holds now; O(new events), no copy."""
        with self._lock:
            self.refresh()
            return len(self._state.projection)

    @property
    def last_seq(self) -> int:
        """The last seq folded into the projection (call `refresh()` to catch up)."""
        return self._state.projection.last_seq

    @property
    def pinned(self) -> frozenset[int]:
        """Ids of the items the application pinned that are still projected (read after
        catching up with the log, as `messages` is)."""
        with self._lock:
            self.refresh()
            return self._state.projection.pinned

    def overflows(self) -> int:
        """How many context overflows were recorded since the session began or was last reset
        (`record_overflow`); O(new events)."""
        with self._lock:
            self.refresh()
            return self._state.overflows

    def estimate(self, counter: TokenCounter | str | None = None) -> int:
        """Tokens of the current projection: the last provider usage report plus a count of what
        came after, else the counter's count. O(1) after the first call, per appended message."""
        with self._lock:
            self.refresh()
            return self._tally_for(counter).estimate

    def tally(self, counter: TokenCounter | str | None = None, *, fresh: bool = True) -> Tally:
        """The token tally of the projection (`fresh` as in `items`)."""
        with self._lock:
            if fresh:
                self.refresh()
            return self._tally_for(counter)

    def snapshot(
        self, counter: TokenCounter | str | None = None, *, tools_tokens: int = 0
    ) -> Snapshot:
        """The projection as of now, with each item's tokens: what a compaction run reads.

        `tools_tokens` are the tool schemas' tokens sent with every request
        (`tool-schemas-counted`); they join the fixed tokens, and the estimate when no provider
        report backs it."""
        with self._lock:
            self.refresh()
            tally = self._tally_for(counter)
            projection = self._state.projection
            items = tuple(projection.items)
            counts = tuple(tally.count(item.id) for item in items)
            # What the tally counts beyond the items (the reply priming) is sent every time.
            fixed = max(0, tally.total - sum(counts)) + tools_tokens
            return Snapshot(
                session_id=self.id,
                items=items,
                counts=counts,
                fixed_tokens=fixed,
                pinned_ids=projection.pinned,
                base_seq=projection.last_seq,
                estimate=tally.estimate if tally.anchored else tally.total + tools_tokens,
                anchored=tally.anchored,
            )

    # -- recall and watch (the work is in ctxfold.session.recall and in the store) ---------
    _recaller: Recaller | None = None

    def recall(
        self,
        query: str | None = None,
        *,
        ref: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> Recalled:
        """The original messages the view no longer shows, by `ref` or by `query`, framed as
        quoted data within `max_tokens` tokens (by the session's counter).

        - `ref`: what a note, placeholder or summary prints: ``"41-57"`` (``"log items
          41–57"``), ``"event 12"``, ``"log 12"``, a cleared result's call id, or ``"c12"`` for
          the compaction event at seq 12. An unknown ref is an `UnknownRefError`.
        - `query`: full-text search over the originals out of view, best matches first (those
          holding the query verbatim before the rest).

        Out of view means under a summary or a note, or cleared by a mask. Messages still in view
        are never returned, nor those a retraction or a reset took out on purpose. Give exactly
        one of `query` and `ref`; bad input is an `InvalidInputError`. Recall reads the log and
        never writes (`recall-out-of-view-only`, `recall-framed-and-bounded`).

        >>> from ctxfold.storage import MemoryStore
        >>> session = MemoryStore().session("r")
        >>> _ = session.append([Message("user", "deploy to eu-west-3"), Message("assistant", "ok")])
        >>> session.recall("eu-west-3").seqs  # still in view: nothing to recall
        ()
        """
        counter = self._counter
        with self._lock:
            if self._recaller is None:
                self._recaller = Recaller(self.store, self.id)
            recaller = self._recaller
            if counter is None:
                counter = self._counter = make_counter("auto")
        return recaller.recall(query, ref=ref, max_tokens=max_tokens, counter=counter)

    def call_recall(self, arguments: str | Mapping[str, Any]) -> str:
        """The answer to one call of the recall tool (`ctxfold.recall_tool`): `arguments` as
        the model sent them (JSON text or a mapping with ``query`` or ``ref``, and
        ``max_tokens``). A bad argument comes back as a short error text the model can act on,
        and is logged on ``ctxfold.recall``; it never raises for one."""
        return call_recall(self, arguments)

    def watch(
        self,
        after: int = 0,
        *,
        idle_timeout: float | None = None,
        stop: threading.Event | None = None,
    ) -> Iterator[Event]:
        """Follow the session live: every event with a seq above `after`, in seq order, each
        once, first those stored, then new ones as they land (`watch-every-event-once`).

        Ends when `stop` is set, after `idle_timeout` seconds with no new event (None: never),
        when the store is closed, or when the loop is left. Pass ``after=session.last_seq`` for
        only what comes next. See `StoreBase.subscribe`."""
        return self.store.subscribe(self.id, after, idle_timeout=idle_timeout, stop=stop)

    def _named(self, counter: TokenCounter | str) -> TokenCounter:
        # A wrong counter argument is refused here, before it can replace a working one. A name
        # gives the same counter at every call, so that the tally it counted is kept.
        if not isinstance(counter, str):
            return as_counter(counter, "counter")
        made = self._by_name.get(counter)
        if made is None:
            made = self._by_name[counter] = as_counter(counter, "counter")
        return made

    def _tally_for(self, counter: TokenCounter | str | None) -> Tally:
        tally = self._state.tally
        if tally is not None and counter is tally.counter:
            # The same counter object as last time, as a compactor passes at every check (two
            # or three times a turn): nothing to check or look up.
            return tally
        wanted = self._counter if counter is None else self._named(counter)
        if tally is not None and (wanted is None or tally.counter is wanted):
            return tally
        self._counter = wanted or make_counter("auto")
        # Count the projection as it stands (each item once, or from a recorded count); from
        # then on each new event updates the total incrementally. The log is not read again.
        tally = Tally(self._counter)
        self._state.attach(tally, previous=self._state.tally)
        return tally


# `store.session(id)` builds a Session; the store layer cannot import this one (it sits below).
register_session_type(Session)


__all__ = ["Session"]
