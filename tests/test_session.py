"""Sessions and the projection: the log keeps everything, the projection shows what the model sees.

Compaction events here are written by hand; the compaction engine has its own tests.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from ctxfold.errors import ConflictError, InvalidHistoryError, InvalidInputError
from ctxfold.events import COMPACTION, MASK, Event, NewEvent
from ctxfold.messages import Message, ToolCall
from ctxfold.session import AsyncSession, Session
from ctxfold.storage import MemoryStore, SQLiteStore
from ctxfold.tokens import HeuristicCounter
from tests._histories import coding_conversation, summary_event
from tests._stores import count_reads

conversation = coding_conversation
summary = summary_event


@pytest.fixture
def session() -> Session:
    s = MemoryStore().session("s1")
    s.append(conversation())
    return s


def test_messages_project_in_append_order(session: Session) -> None:
    """Messages come back exactly as appended, in order."""
    assert session.messages() == conversation()


@pytest.mark.guarantee("log-keeps-originals")
def test_compaction_is_an_event_and_originals_stay(session: Session) -> None:
    """compacting appends a compaction event; session.events() still returns every original."""
    session.append(summary(2, 5))
    events = session.events()
    assert [e.type for e in events] == ["message"] * 8 + [COMPACTION]
    assert [e.message for e in events[:8]] == conversation()


@pytest.mark.guarantee("summary-replaces-history")
def test_whole_history_compaction_then_new_message(session: Session) -> None:
    """after compacting the whole history the projection is the system block plus one
    summary, and a new user message projects after the summary."""
    session.append(summary(2, 8, "Everything so far."))
    assert [m.content for m in session.messages()] == [
        "You are a coding agent.",
        "Everything so far.",
    ]
    session.append(Message("user", "Next: release it."))
    assert [m.content for m in session.messages()][1:] == [
        "Everything so far.",
        "Next: release it.",
    ]


@pytest.mark.guarantee("summaries-build-on-summaries")
def test_second_summary_covers_the_first(session: Session) -> None:
    """compact, add a turn, compact again: the second summary replaces the first summary plus
    what followed, and only it shows."""
    (first,) = session.append(summary(2, 5, "first summary"))
    session.append([Message("user", "And run the linter."), Message("assistant", "Lint is clean.")])
    last = session.events()[-1].seq
    session.append(summary(first.seq, last, "second summary"))
    contents = [m.content for m in session.messages()]
    assert contents == ["You are a coding agent.", "second summary"]
    assert session.items()[1].covers == (2, last)


@pytest.mark.guarantee("compaction-lands-in-place")
def test_middle_range_lands_in_place(session: Session) -> None:
    """a compaction of a middle range lands where the range stood; what came before and
    after keeps its order."""
    session.append(summary(3, 5, "middle"))
    contents = [m.content for m in session.messages()]
    assert contents == [
        "You are a coding agent.",
        "Fix the failing test in tests/test_io.py",
        "middle",
        "Also update the changelog.",
        None,
        "edited CHANGES.md",
    ]


@pytest.mark.parametrize(
    ("first", "last", "why"),
    [
        (3, 3, "split a tool call"),  # the call without its result
        (4, 5, "split a tool call"),  # the result without its call
        (1, 3, "system block"),
        (5, 2, "reversed"),
        (2, 99, "not in the current projection"),
    ],
)
@pytest.mark.guarantee("invalid-edit-refused")
def test_invalid_edit_is_refused_and_nothing_written(
    session: Session, first: int, last: int, why: str
) -> None:
    """an edit that is not contiguous, reversed, touches the system block or would split a
    tool call from its result is refused at append time, and nothing is written."""
    before = session.store.last_seq("s1")
    with pytest.raises(InvalidHistoryError, match=why):
        session.append(summary(first, last))
    assert session.store.last_seq("s1") == before


@pytest.mark.guarantee("invalid-edit-refused")
def test_range_that_is_no_longer_contiguous_is_refused(session: Session) -> None:
    """after a compaction, an edit naming a replaced item or a stale id list is refused."""
    session.append(summary(2, 5))
    with pytest.raises(InvalidHistoryError):
        session.append(summary(3, 8))
    stale = summary(6, 8).data | {"replaced": [6, 8]}
    with pytest.raises(InvalidHistoryError, match="not contiguous"):
        session.append(NewEvent(COMPACTION, stale))


@pytest.mark.guarantee("invalid-edit-refused")
def test_pending_call_is_never_compacted() -> None:
    """a compaction that would drop a call still waiting for its result is refused."""
    s = MemoryStore().session("p")
    s.append(conversation()[:3])  # the call c1 has no result yet
    with pytest.raises(InvalidHistoryError, match="pending"):
        s.append(summary(2, 3))


@pytest.mark.guarantee("invalid-edit-refused")
def test_batch_is_checked_as_a_whole() -> None:
    """a batch whose second edit is invalid (given the first) writes nothing at all."""
    s = MemoryStore().session("b")
    s.append(conversation())
    with pytest.raises(InvalidHistoryError):
        s.append([summary(2, 5), summary(3, 6)])
    assert len(s.events()) == 8
    # Whereas a second edit that names the first edit's item (seq 9) is fine.
    s.append([summary(2, 5), summary(9, 8, "both")])
    assert [m.content for m in s.messages()] == ["You are a coding agent.", "both"]


def test_mask_replaces_tool_output_and_keeps_call_id(session: Session) -> None:
    """A mask replaces a tool result's content in place and keeps its call id; it may shorten a
    user message too, never an assistant message or the system prompt."""
    session.append(NewEvent(MASK, {"items": [{"id": 4, "content": "[cleared]"}]}))
    masked = session.messages()[3]
    assert (masked.role, masked.content, masked.tool_call_id) == ("tool", "[cleared]", "c1")
    session.append(NewEvent(MASK, {"items": [{"id": 2, "content": "Fix the failing test"}]}))
    assert session.messages()[1] == Message("user", "Fix the failing test")
    assert session.items()[1].unmasked.text == "Fix the failing test in tests/test_io.py"
    for item_id in (1, 3):
        with pytest.raises(InvalidHistoryError, match="neither a tool result nor a user"):
            session.append(NewEvent(MASK, {"items": [{"id": item_id, "content": "x"}]}))


@pytest.mark.guarantee("reopen-same-projection")
def test_reopening_gives_identical_projection(tmp_path: Path) -> None:
    """reopening a session from its store in a new process gives the same projection."""
    db = tmp_path / "log.db"
    store = SQLiteStore(db)
    s = store.session("s")
    s.append(conversation())
    s.append(summary(2, 5, "sum"))
    s.append(NewEvent(MASK, {"items": [{"id": 8, "content": "[cleared]"}]}))
    expected = [m.to_json() for m in s.messages()]
    store.close()
    code = (
        "import sys; from ctxfold.storage import SQLiteStore;"
        "s = SQLiteStore(sys.argv[1]).session('s');"
        "print('\\n'.join(m.to_json() for m in s.messages()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(db)], capture_output=True, text=True, check=True
    )
    assert out.stdout.splitlines() == expected


def test_messages_is_incremental(session: Session) -> None:
    """After the first call, messages() reads only the events it has not folded yet."""
    store = session.store
    reads = count_reads(store)
    session.messages()
    session.append(Message("user", "one more"))
    session.messages()
    assert max(reads) <= 1


def test_message_count_follows_the_projection(session: Session) -> None:
    """message_count() is the length of the projection, compactions and other writers included."""
    assert session.message_count() == len(conversation())
    session.append(summary(2, 5))
    session.store.session("s1").append(Message("user", "from elsewhere"))
    assert session.message_count() == len(session.messages()) == 6


def test_other_writers_are_seen(session: Session) -> None:
    """A second Session object on the same store sees what the first appended."""
    other = session.store.session("s1")
    other.append(Message("user", "from elsewhere"))
    assert session.messages()[-1].content == "from elsewhere"


def test_edit_with_stale_expected_seq_conflicts(session: Session) -> None:
    """An edit planned against an older seq fails with ConflictError instead of landing."""
    with pytest.raises(ConflictError):
        session.append(summary(2, 5), expected_seq=3)


def test_append_rejects_non_messages(session: Session) -> None:
    """Appending something that is neither a Message nor a NewEvent names its position."""
    with pytest.raises(InvalidInputError, match="item 1"):
        session.append([Message("user", "ok"), {"role": "user"}])  # type: ignore[list-item]


def test_pins_survive_reopening(tmp_path: Path) -> None:
    """Pinned items are stored, so a reopened session still knows them."""
    store = SQLiteStore(tmp_path / "p.db")
    store.session("s").append(conversation())
    store.session("s").pin(2)
    s = store.session("s")
    s.messages()
    assert s.pinned == frozenset({2})
    s.unpin(2)
    assert s.pinned == frozenset()


def test_estimate_is_usage_anchored(session: Session) -> None:
    """The estimate starts from the provider's reported prompt tokens and adds counts after."""
    counter = HeuristicCounter()
    counted = session.estimate(counter)
    session.record_usage(1000)
    assert session.estimate(counter) == 1000
    session.append(Message("user", "x" * 400))
    assert session.estimate(counter) == 1000 + counter.count_message(Message("user", "x" * 400))
    assert counted != 1000


def test_usage_for_an_earlier_request_counts_what_came_after(session: Session) -> None:
    """Usage recorded for the request after seq 6 adds the counts of items 7 and 8."""
    counter = HeuristicCounter()
    session.record_usage(500, after_seq=6)
    later = sum(counter.count_message(m) for m in conversation()[6:])
    assert session.estimate(counter) == 500 + later


def test_async_session_does_not_block_the_loop(tmp_path: Path) -> None:
    """AsyncSession runs store I/O in worker threads: the event loop keeps ticking meanwhile."""
    store = SQLiteStore(tmp_path / "a.db")
    session = AsyncSession(store.session("a"))
    loop_thread: list[int] = []
    io_threads: set[int] = set()
    original = store.append

    def append(*args, **kwargs):  # type: ignore[no-untyped-def]
        io_threads.add(threading.get_ident())
        return original(*args, **kwargs)

    store.append = append  # type: ignore[method-assign]

    async def main() -> list[Message]:
        loop_thread.append(threading.get_ident())
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        for message in conversation():
            await session.append(message)
        messages = await session.messages()
        task.cancel()
        assert ticks > 0
        return messages

    assert asyncio.run(main()) == conversation()
    assert io_threads and loop_thread[0] not in io_threads


# -- pins ------------------------------------------------------------------------------------------
@pytest.mark.guarantee("pins-respected")
def test_an_edit_over_a_pinned_item_is_refused_and_nothing_written(session: Session) -> None:
    """A compaction covering a pinned item, or a mask of a pinned tool result, is refused at
    append time; once unpinned, the same edit lands."""
    session.pin(3, 4)
    before = session.store.last_seq("s1")
    with pytest.raises(InvalidHistoryError, match="pinned"):
        session.append(summary(2, 5))
    with pytest.raises(InvalidHistoryError, match="pinned"):
        session.append(NewEvent(MASK, {"items": [{"id": 4, "content": "[cleared]"}]}))
    assert session.store.last_seq("s1") == before
    session.unpin(3, 4)
    session.append(summary(2, 5))
    assert session.items()[1].covers == (2, 5)


def test_only_projected_items_can_be_pinned(session: Session) -> None:
    """Pinning an id that is not in the projection names it and writes nothing."""
    before = session.store.last_seq("s1")
    with pytest.raises(InvalidHistoryError, match="item 99"):
        session.pin(99)
    assert session.store.last_seq("s1") == before


# -- retraction ------------------------------------------------------------------------------------
@pytest.mark.guarantee("retraction-honoured")
def test_retracting_the_newest_item_takes_it_out_and_the_log_keeps_it(session: Session) -> None:
    """retract() takes the newest item out of the projection and returns it; the log keeps the
    message and records the retraction; the next message projects after what is left."""
    taken = session.retract()
    assert (taken.id, taken.message) == (8, conversation()[-1])
    assert session.messages() == conversation()[:-1]  # the call c2 is pending now: valid
    assert [e.type for e in session.events()][-2:] == ["message", "retraction"]
    session.append(Message("tool", "edited CHANGES.md again", tool_call_id="c2"))
    assert session.messages()[-1].text == "edited CHANGES.md again"


@pytest.mark.guarantee("retraction-honoured")
def test_retracting_the_start_of_the_newest_step_takes_the_whole_step(session: Session) -> None:
    """Naming the assistant message of the newest step retracts it with its results."""
    taken = session.retract(7)
    assert taken.message.tool_calls[0].id == "c2"
    assert session.messages() == conversation()[:6]


@pytest.mark.parametrize(
    ("item_id", "why"),
    [
        (4, "neither the newest item"),  # a tool result in the middle
        (5, "neither the newest item"),  # a plain message in the middle
        (3, "neither the newest item"),  # the start of a step that is not the newest
        (42, "not in the current projection"),
    ],
)
@pytest.mark.guarantee("retraction-honoured")
def test_retracting_anything_else_is_refused(session: Session, item_id: int, why: str) -> None:
    """A retraction that would leave an invalid history (or names nothing projected) is refused
    with InvalidHistoryError, and nothing is written."""
    before = session.store.last_seq("s1")
    with pytest.raises(InvalidHistoryError, match=why):
        session.retract(item_id)
    assert session.store.last_seq("s1") == before
    assert session.messages() == conversation()


@pytest.mark.guarantee("retraction-honoured")
def test_an_item_inside_a_compaction_cannot_be_retracted_but_its_summary_can() -> None:
    """Once compacted, an original is no longer projected: retracting it is refused. When the
    summary that stands for it is the newest item, retracting the summary takes it out, and the
    originals stay in the log."""
    s = MemoryStore().session("r")
    s.append(conversation()[:5])  # ends with a plain assistant message, seq 5
    (event,) = s.append(summary(2, 5, "all of it"))
    with pytest.raises(InvalidHistoryError, match="not in the current projection"):
        s.retract(5)
    assert s.retract().id == event.seq
    assert s.messages() == conversation()[:1]
    assert [e.message for e in s.events()[:5]] == conversation()[:5]


@pytest.mark.guarantee("retraction-honoured")
def test_a_retraction_survives_reopening_and_takes_its_pin(tmp_path: Path) -> None:
    """A reopened store projects the retraction the same way; a pin on the retracted item is
    gone with it."""
    with SQLiteStore(tmp_path / "r.db") as store:
        s = store.session("r")
        s.append(conversation())
        s.pin(8)
        s.retract()
        expected = s.items()
        assert s.pinned == frozenset()
    with SQLiteStore(tmp_path / "r.db") as store:
        again = store.session("r")
        assert again.items() == expected
        assert again.pinned == frozenset()


# -- reset -----------------------------------------------------------------------------------------
@pytest.mark.guarantee("reset-honoured")
def test_after_a_reset_the_projection_starts_afresh(session: Session) -> None:
    """reset() empties the projection and clears pins; messages appended later project as in a
    new session; the log keeps every original and the reset itself."""
    counter = HeuristicCounter()
    session.pin(2)
    session.record_usage(1000)
    session.reset()
    assert session.messages() == [] and session.pinned == frozenset()
    assert session.estimate(counter) == 0
    fresh = [Message("system", "You are a new agent."), Message("user", "Start over.")]
    session.append(fresh)
    assert session.messages() == fresh
    assert session.estimate(counter) == sum(counter.count_message(m) for m in fresh) + 3
    logged = [e.message for e in session.events() if e.type == "message"]
    assert logged == conversation() + fresh
    with pytest.raises(InvalidHistoryError, match="not in the current projection"):
        session.append(summary(2, 5))  # the old items are gone from the projection


@pytest.mark.guarantee("reset-honoured")
def test_a_reset_survives_reopening(tmp_path: Path) -> None:
    """A reopened store shows the same projection after a reset and what followed."""
    with SQLiteStore(tmp_path / "z.db") as store:
        s = store.session("z")
        s.append(conversation())
        s.reset()
        s.append(Message("user", "again"))
    with SQLiteStore(tmp_path / "z.db") as store:
        assert store.session("z").messages() == [Message("user", "again")]


def test_item_span_names_the_originals_an_item_stands_for(session: Session) -> None:
    """An original stands for itself; a summary for the first and last seq it replaced."""
    (event,) = session.append(summary(2, 5))
    spans = [item.span for item in session.items()]
    assert spans == [(1, 1), (2, 5), (6, 6), (7, 7), (8, 8)]
    assert session.items()[1].id == event.seq


def test_async_session_pins_retracts_and_resets() -> None:
    """AsyncSession offers the same pin, retract and reset as Session."""

    async def main() -> list[Message]:
        session = AsyncSession(MemoryStore().session("a"))
        await session.append(conversation())
        await session.pin(2)
        await session.unpin(2)
        taken = await session.retract()
        assert taken.id == 8
        await session.reset()
        return await session.messages()

    assert asyncio.run(main()) == []


@pytest.mark.parametrize(
    "data",
    [{"message": "hello"}, {"message": {"role": "robot", "content": "x"}}, {}],
)
def test_a_raw_message_event_that_cannot_be_read_is_refused(
    session: Session, data: dict[str, object]
) -> None:
    """A message event appended raw is read back first; one that is no message is refused with
    InvalidInputError, and nothing is written."""
    before = session.store.last_seq("s1")
    with pytest.raises(InvalidInputError):
        session.append(NewEvent("message", data))
    assert session.store.last_seq("s1") == before


class Unreadable(MemoryStore):
    """A store whose log cannot be read."""

    def _read_page(self, session_id: str, after: int, limit: int | None) -> list[Event]:
        raise OSError("the disk is gone")


def test_the_first_read_leaves_the_garbage_collector_as_it_found_it(tmp_path: Path) -> None:
    """A cold start holds the cyclic collector off while it builds the projection, and gives it
    back as it was: on when it was on, off when the application had turned it off, even when
    the read fails; objects the application froze stay frozen."""
    import gc

    with SQLiteStore(tmp_path / "gc.db") as store:
        store.session("g").append([Message("user", "hello"), Message("assistant", "hi")])
        was = gc.isenabled()
        try:
            for enabled in (True, False):
                (gc.enable if enabled else gc.disable)()
                assert len(store.session("g").messages()) == 2
                assert gc.isenabled() is enabled
            gc.enable()
            with pytest.raises(OSError):
                Unreadable().session("g").messages()
            assert gc.isenabled()
            frozen = gc.get_freeze_count()
            if frozen == 0:
                gc.freeze()  # what an application does before forking workers
            try:
                kept = gc.get_freeze_count()
                assert len(store.session("g").messages()) == 2
                assert gc.get_freeze_count() == kept
            finally:
                if frozen == 0:
                    gc.unfreeze()
        finally:
            (gc.enable if was else gc.disable)()


def test_the_live_view_shows_what_was_stored_not_the_callers_objects(tmp_path: Path) -> None:
    """The session folds the messages it was handed without decoding them again only when the
    stored form gives them back equal: a caller changing an `extra` dict after the append, or
    tool calls given as a list, never make the live view differ from what a new process reads."""
    extra: dict[str, object] = {"parts": [{"type": "text", "text": "hi"}], "pair": (1, 2)}
    calls = [ToolCall("c1", "bash", '{"cmd": "ls"}')]
    plain = Message("user", "Fix tests/test_io.py")
    with SQLiteStore(tmp_path / "events.db") as store:
        session = store.session("s")
        session.append(
            [
                plain,
                Message("user", "see the parts", extra=extra),
                Message("assistant", None, calls),
            ]  # type: ignore[arg-type]
        )
        extra["parts"] = []
        calls.clear()
        live = list(session.messages())
        cold = list(store.session("s").messages())
    assert live == cold
    assert live[0] is plain  # a plain message is kept as given: nothing to decode
    assert live[1].extra == {"parts": [{"type": "text", "text": "hi"}], "pair": [1, 2]}
    assert live[2].tool_calls == (ToolCall("c1", "bash", '{"cmd": "ls"}'),)


def test_the_events_an_append_returns_are_the_stored_ones_and_the_callers_own(
    tmp_path: Path,
) -> None:
    """What `append` returns is what a read of the log gives, for plain messages, tool calls
    and messages with provider fields alike, one at a time or in a batch; changing what it
    returned changes neither the log, nor the live view, nor what the next append returns."""

    def build() -> list[Message]:
        return [
            Message("system", "You are terse."),
            Message("user", "Fix tests/test_io.py — ünïcode 🚀"),
            Message("assistant", None, (ToolCall("c1", "bash", '{"cmd": "ls"}'),)),
            Message("tool", "ok", tool_call_id="c1", name="bash"),
            Message("user", "see the parts", extra={"parts": [{"type": "text", "text": "hi"}]}),
        ]

    messages, expected = build(), build()
    with SQLiteStore(tmp_path / "events.db") as store:
        session = store.session("s")
        returned = session.append(messages[:3]) + session.append(messages[3])
        returned += session.append(messages[4])
        stored = store.read("s")
        assert returned == stored
        for event in returned:
            message = event.data["message"]
            message["content"] = "changed"
            for call in message.get("tool_calls", []):
                call["name"] = "changed"
            for part in message.get("extra", {}).get("parts", []):
                part["text"] = "changed"
        assert store.read("s") == stored
        assert messages == expected
        assert session.messages() == expected
        assert store.session("s").messages() == expected
        (again,) = session.append(messages[1])
        assert again.data == stored[1].data


def _forced(value: Any, **fields: object) -> Any:
    """`value` with fields set past its constructor's checks (which refuse them), as code that
    writes a frozen value's attributes directly could leave it."""
    for key, field_value in fields.items():
        object.__setattr__(value, key, field_value)
    return value


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (
            _forced(Message("user", ""), content=["a", "list"]),
            "content must be a string or None, not list",
        ),
        (_forced(Message("user", "hi"), name=7), "name must be a string or None, not int"),
        (
            Message("assistant", None, (_forced(ToolCall("c1", "bash"), id=""),)),
            "non-empty string id",
        ),
        (
            Message("assistant", None, (_forced(ToolCall("c1", "bash"), arguments={"a": 1}),)),
            "arguments must be a JSON string",
        ),
    ],
)
def test_a_message_a_read_would_refuse_is_refused_before_anything_is_written(
    bad: Message, says: str
) -> None:
    """A message whose fields have types the log cannot give back (the constructor refuses them;
    these were set past it) is refused by the append, naming the item, and nothing of the batch
    lands."""
    session = MemoryStore().session("s")
    with pytest.raises(InvalidInputError, match=f"item 1 of the append: .*{says}"):
        session.append([Message("user", "first"), bad])
    assert session.events() == []
    assert session.messages() == []


def test_messages_appended_after_an_estimate_are_counted_once_each(tmp_path: Path) -> None:
    """Once a session has a running count, every message appended after it, one at a time or
    in a batch, is counted into it: the estimate equals a count of the same log from scratch."""
    counter = HeuristicCounter()
    with SQLiteStore(tmp_path / "events.db") as store:
        session = store.session("s", counter=counter)
        session.append(conversation()[:3])
        before = session.estimate()
        session.append(Message("user", "and one more thing: tests/test_io.py"))
        session.append(conversation()[3:])
        cold = store.session("s", counter=counter)
        assert session.estimate() == cold.estimate() > before
        assert session.tally().count(session.items()[-1].id) > 0


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"role": "user", "content": "hi"}, r"not a dict; .*Message\.from_dict"),
        ("hello", "not a str"),
        (b"hello", "not a bytes"),
    ],
)
def test_an_append_of_one_dict_or_string_is_refused_as_what_it_is(given: object, says: str) -> None:
    """A dict, str or bytes handed to append is refused by its own type, before anything is
    written, rather than iterated (which would blame its first key or character)."""
    session = MemoryStore().session("s")
    with pytest.raises(InvalidInputError, match=f"append takes a Message.*{says}.*nothing was"):
        session.append(given)  # type: ignore[arg-type]
    assert session.last_seq == 0


def test_an_event_the_session_cannot_read_is_named_by_its_seq() -> None:
    """An event written past the session's checks (a raw store.append here) that the session
    cannot fold makes the read fail with an InvalidInputError naming the session, the event's
    seq and type, and what is wrong with it."""
    store = MemoryStore()
    store.append("s", [NewEvent("message", {"message": {"role": "user", "content": "hi"}})])
    store.append("s", [NewEvent("message", {"message": {"role": "robot", "content": "x"}})])
    with pytest.raises(
        InvalidInputError, match=r"session 's', event 2 \(message\) cannot be read: .*'robot'"
    ):
        store.session("s").messages()
