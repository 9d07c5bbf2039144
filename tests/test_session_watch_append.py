"""Following a session live through `Session.watch`, and appends retried after a lost
acknowledgement, end to end on every store."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxfold import AsyncSession
from ctxfold.compactor import Compactor
from ctxfold.errors import StoreUnavailableError
from ctxfold.events import Compaction, Event, NewEvent
from ctxfold.messages import Message
from ctxfold.pipeline import Pipeline, Summarize
from ctxfold.storage import StoreBase, open_store
from ctxfold.testing.counters import FixedCounter
from ctxfold.testing.doubles import FunctionSummarizer
from ctxfold.tokens import Budget
from tests._histories import agent_history
from tests._stores import ALL_KINDS, empty_store_url

GUARD = 10.0


@pytest.fixture(params=ALL_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreBase]:
    """An empty store of each kind: memory, a SQLite file, a fresh PostgreSQL schema."""
    for url in empty_store_url(request.param, request, tmp_path):
        with open_store(url) as opened:
            yield opened


def _agent_and_compactor(store: StoreBase, turns: int) -> None:
    """An agent appending a history turn by turn while a compactor compacts the session."""
    session = store.session("w", counter=FixedCounter())
    compactor = Compactor(
        Budget(window=3000, keep_recent_tokens=0),
        Pipeline([Summarize()]),
        summarizer=FunctionSummarizer.returning("## Objective\n- fix the bugs"),
        counter=FixedCounter(),
    )
    for message in agent_history(turns=turns):
        session.append(message)
        compactor.maybe_compact(session)
        time.sleep(0.001)
    session.append(NewEvent(DONE))


DONE = "app/done"
"""The event the writer appends last, so a watcher knows it has seen everything."""


@pytest.mark.guarantee("watch-every-event-once")
def test_a_watcher_sees_every_event_once_in_order_while_an_agent_works(store: StoreBase) -> None:
    """Messages, compactions and masks written by an agent and its compactor reach a watcher
    started before them, each once, in seq order, exactly as the log holds them."""
    writer = threading.Thread(target=_agent_and_compactor, args=(store, 6))
    seen: list[Event] = []
    watching = store.session("w").watch(idle_timeout=GUARD)
    writer.start()
    for event in watching:
        seen.append(event)
        if event.type == DONE:
            break
    writer.join()
    logged = store.read("w")
    assert seen == logged
    assert {"message", "compaction"} <= {e.type for e in logged}


@pytest.mark.guarantee("watch-every-event-once")
def test_an_async_watcher_sees_every_event_once_in_order(store: StoreBase) -> None:
    """`AsyncSession.watch` sees the same, in an event loop, while a thread writes."""

    async def follow() -> list[Event]:
        seen = []
        async for event in AsyncSession(store.session("w")).watch(idle_timeout=GUARD):
            seen.append(event)
            if event.type == DONE:
                break
        return seen

    writer = threading.Thread(target=_agent_and_compactor, args=(store, 3))
    writer.start()
    seen = asyncio.run(follow())
    writer.join()
    assert seen == store.read("w")


def _losing_first_ack(store: StoreBase) -> list[int]:
    """Make `store.append` write but raise once, as a connection dropped before the reply would;
    returns a list that records each call's first seq (or 0 for a lost one)."""
    calls: list[int] = []
    append = store.append
    lost = [False]

    def lossy(*args: Any, **kwargs: Any) -> list[Event]:
        events = append(*args, **kwargs)
        if not lost[0] and kwargs.get("idempotency_key"):
            lost[0] = True
            calls.append(0)
            raise StoreUnavailableError("the connection dropped before the reply")
        calls.append(events[0].seq if events else 0)
        return events

    store.append = lossy  # type: ignore[method-assign]
    return calls


@pytest.mark.guarantee("session-append-idempotent")
def test_a_message_append_retried_after_a_lost_reply_lands_once(store: StoreBase) -> None:
    """The reply to a keyed append is lost; the retry with the same key returns the events the
    first try stored, and the log and the projection hold the messages once."""
    session = store.session("i")
    session.append(Message("system", "You fix bugs."))
    _losing_first_ack(store)
    turn = [Message("user", "Fix tests/test_io.py"), Message("assistant", "On it.")]
    with pytest.raises(StoreUnavailableError):
        session.append(turn, idempotency_key="turn-7")
    again = session.append(turn, idempotency_key="turn-7")
    assert [e.seq for e in again] == [2, 3]
    assert [e.message for e in again] == turn
    assert [m.text for m in session.messages()] == ["You fix bugs.", *(m.text for m in turn)]
    assert store.last_seq("i") == 3
    assert [m.text for m in store.session("i").messages()] == [m.text for m in session.messages()]


@pytest.mark.guarantee("session-append-idempotent")
def test_an_edit_retried_after_a_lost_reply_lands_once(store: StoreBase) -> None:
    """A keyed compaction whose reply is lost is retried by a new process: it would no longer
    pass its check (its items are gone), yet the retry returns the first try's event and
    writes nothing."""
    session = store.session("i")
    session.append(
        [
            Message("system", "s"),
            Message("user", "u"),
            Message("assistant", "a"),
            Message("user", "v"),
        ]
    )
    _losing_first_ack(store)
    edit = NewEvent.of(Compaction(2, 3, Message("user", "[summary]")))
    with pytest.raises(StoreUnavailableError):
        session.append(edit, expected_seq=4, idempotency_key="compact-1")
    restarted = store.session("i")
    (event,) = restarted.append(edit, expected_seq=4, idempotency_key="compact-1")
    assert event.seq == 5 and event.type == "compaction"
    assert store.last_seq("i") == 5
    assert [m.text for m in restarted.messages()] == ["s", "[summary]", "v"]
    assert session.messages() == restarted.messages()


@pytest.mark.guarantee("session-append-idempotent")
def test_an_async_append_retried_with_its_key_lands_once(store: StoreBase) -> None:
    """`AsyncSession.append` takes the key too: a second send returns the first events."""

    async def run() -> tuple[list[Event], list[Event]]:
        session = AsyncSession(store.session("a"))
        turn = [Message("user", "hi"), Message("assistant", "hello")]
        first = await session.append(turn, idempotency_key="k-1")
        again = await session.append(turn, idempotency_key="k-1")
        return first, again

    first, again = asyncio.run(run())
    assert again == first and store.last_seq("a") == 2
