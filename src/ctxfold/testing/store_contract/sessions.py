"""A `Session` over the store: recall (by ref, by search, bounded, after a restart), watching a
session live, and retried appends. These need only the store's seam, so they hold on every store
that keeps the rest of the contract."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from ctxfold.errors import ConflictError
from ctxfold.events import Compaction, Event, Mask, MaskedItem, NewEvent
from ctxfold.messages import Message, ToolCall
from ctxfold.session import AsyncSession, Session
from ctxfold.storage.base import StoreBase
from ctxfold.testing.counters import FixedCounter
from ctxfold.testing.store_contract._base import ContractBase

GUARD = 10.0
"""Seconds a watch may wait before a test gives up on an event that never came."""


def _conversation(store: StoreBase) -> Session:
    """seq 1 system, 2 user, 3 call, 4 result, 5 assistant, 6 user (the current request); then
    seq 7 summarizes 2-5."""
    session = store.session("s", counter=FixedCounter())
    session.append(
        [
            Message("system", "You fix bugs."),
            Message("user", "Deploys to eu-west-3 fail with KeyError: region_map"),
            Message("assistant", None, (ToolCall("call_cat", "bash", '{"cmd": "cat r.py"}'),)),
            Message("tool", "REGIONS = {'eu-west-1': 1}  # no eu-west-3", tool_call_id="call_cat"),
            Message("assistant", "Added eu-west-3 to r.py."),
            Message("user", "Now mention eu-west-3 in the changelog."),
        ]
    )
    session.append(NewEvent.of(Compaction(2, 5, Message("user", "[summary of 2-5]"))))
    return session


class SessionContract(ContractBase):
    """What a `Session` does on every store: recall, watch, idempotent appends."""

    # -- recall ----------------------------------------------------------------------------
    def test_recall_by_ref(self, store: StoreBase) -> None:
        """The range a summary prints and its compaction's seq bring back its originals."""
        session = _conversation(store)
        for ref in ("2-5", "log items 2–5", "c7"):
            found = session.recall(ref=ref, max_tokens=4000)
            assert found.seqs == (2, 3, 4, 5)
            assert found.messages == tuple(e.message for e in store.read("s")[1:5])

    def test_recall_by_query_finds_only_what_is_out_of_view(self, store: StoreBase) -> None:
        """A search finds the originals out of view that hold the words, never those in view."""
        session = _conversation(store)
        assert set(session.recall("eu-west-3", max_tokens=4000).seqs) == {2, 4, 5}
        assert session.recall("changelog").seqs == ()

    def test_recall_of_a_cleared_result(self, store: StoreBase) -> None:
        """A masked result comes back by its call id with its original content."""
        session = store.session("m", counter=FixedCounter())
        session.append(
            [
                Message("system", "s"),
                Message("user", "u"),
                Message("assistant", None, (ToolCall("c1", "bash", "{}"),)),
                Message("tool", "the original output", tool_call_id="c1"),
                Message("user", "next"),
            ]
        )
        session.append(NewEvent.of(Mask((MaskedItem(4, "[cleared]"),))))
        assert [m.text for m in session.recall(ref="c1").messages] == ["the original output"]
        assert session.recall("original output").seqs == (4,)

    def test_recall_is_bounded(self, store: StoreBase) -> None:
        """The text is at most `max_tokens` by the session's counter; what did not fit is
        listed, and nothing is written."""
        session = store.session("b", counter=FixedCounter())
        session.append(Message("system", "s"))
        session.append([Message("user", f"note {n}: " + "word " * 60) for n in range(10)])
        session.append([Message("assistant", "ok"), Message("user", "now")])
        session.append(NewEvent.of(Compaction(2, 12, Message("user", "[summary]"))))
        last = store.last_seq("b")
        found = session.recall(ref="2-12", max_tokens=250)
        assert FixedCounter().count_text(found.text) == found.tokens <= 250
        assert found.seqs and found.left_out
        found = session.recall("word", max_tokens=250)
        assert found.tokens <= 250 and found.seqs
        assert store.last_seq("b") == last

    def test_recall_after_a_restart(self, store: StoreBase) -> None:
        """A new store object over the same data recalls the same, by ref and by query."""
        session = _conversation(store)
        before = (session.recall(ref="2-5"), session.recall("KeyError region_map"))
        again = self._reopen(store).session("s", counter=FixedCounter())
        assert (again.recall(ref="2-5"), again.recall("KeyError region_map")) == before
        assert before[1].seqs == (2,)

    # -- watch -----------------------------------------------------------------------------
    def test_watch_sees_every_event_once_in_order(self, store: StoreBase) -> None:
        """`Session.watch` yields what is stored, then what a writer appends meanwhile, each
        event once, in seq order."""
        session = store.session("w")
        session.append([Message("user", "first")])

        def write() -> None:
            writer = store.session("w")
            for n in range(30):
                writer.append(Message("assistant" if n % 2 else "user", f"message {n}"))
                time.sleep(0.002)

        thread = threading.Thread(target=write)
        thread.start()
        seen: list[Event] = []
        for event in session.watch(idle_timeout=GUARD):
            seen.append(event)
            if len(seen) == 31:
                break
        thread.join()
        assert seen == store.read("w")

    def test_watch_from_a_seq_and_until_quiet(self, store: StoreBase) -> None:
        """`after` skips what was seen; `idle_timeout` ends a quiet watch; `stop` ends it."""
        session = store.session("w")
        session.append([Message("user", "one"), Message("assistant", "two")])
        assert [e.seq for e in session.watch(after=1, idle_timeout=0.2)] == [2]
        stop = threading.Event()
        threading.Timer(0.2, stop.set).start()
        assert [e.seq for e in session.watch(after=session.last_seq, stop=stop)] == []

    def test_async_watch_sees_every_event_once_in_order(self, store: StoreBase) -> None:
        """`AsyncSession.watch` does the same in an event loop, without blocking it."""
        session = AsyncSession(store.session("w"))

        async def run() -> list[int]:
            async def write() -> None:
                for n in range(20):
                    await session.append(Message("user", f"message {n}"))
                    await asyncio.sleep(0.002)

            writer = asyncio.create_task(write())
            seen = []
            async for event in session.watch(idle_timeout=GUARD):
                seen.append(event.seq)
                if len(seen) == 20:
                    break
            await writer
            return seen

        assert asyncio.run(run()) == list(range(1, 21))

    # -- idempotent appends ----------------------------------------------------------------
    def test_a_retried_append_lands_once(self, store: StoreBase) -> None:
        """A message append and an edit, each retried with its key after it landed, return the
        first events; the log and the projection hold each once."""
        session = store.session("i")
        first = session.append(
            [Message("system", "s"), Message("user", "hi"), Message("assistant", "hello")],
            idempotency_key="turn-1",
        )
        retry = store.session("i").append(
            [Message("system", "s"), Message("user", "hi"), Message("assistant", "hello")],
            idempotency_key="turn-1",
        )
        assert retry == first
        edit = NewEvent.of(Compaction(2, 3, Message("user", "[summary]")))
        landed = session.append(edit, expected_seq=3, idempotency_key="compact-1")
        assert store.session("i").append(edit, expected_seq=3, idempotency_key="compact-1") == (
            landed
        )
        assert store.last_seq("i") == 4
        assert [m.text for m in store.session("i").messages()] == ["s", "[summary]"]

    def test_an_unkeyed_stale_edit_still_conflicts(self, store: StoreBase) -> None:
        """Without a key, an edit planned on an older history is refused as before."""
        session = store.session("i")
        session.append([Message("system", "s"), Message("user", "hi"), Message("assistant", "a")])
        store.session("i").append(Message("user", "more"))
        with pytest.raises(ConflictError, match="expected last seq 3"):
            session.append(
                NewEvent.of(Compaction(2, 3, Message("user", "[summary]"))), expected_seq=3
            )
