"""Reading the projection: `messages()` and `items()` hand out immutable views that never change.

An agent reads the view before every model request, so a read copies nothing; what it returns
is a `Sequence`, not a list, and it keeps showing the moment it was taken.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ctxfold.errors import StoreClosedError
from ctxfold.events import COMPACTION, MASK, MESSAGE, Event, NewEvent, Reset, Retraction
from ctxfold.messages import Message
from ctxfold.session import Projection, Session
from ctxfold.storage import MemoryStore, SQLiteStore
from tests._histories import coding_conversation, summary_event
from tests._stores import count_reads


def conversation() -> list[Message]:
    """The first six messages of the shared coding exchange: it ends on a user request."""
    return coding_conversation()[:6]


def summary_of(first: int, last: int) -> NewEvent:
    return summary_event(first, last, "Summary: the test fails on a KeyError.")


@pytest.fixture
def session() -> Session:
    s = MemoryStore().session("reads")
    s.append(conversation())
    return s


@pytest.mark.guarantee("reads-are-stable")
def test_a_read_keeps_showing_its_moment_after_every_kind_of_change(session: Session) -> None:
    """Views taken before an append, a compaction, a mask, a retraction and a reset still show
    exactly what the projection held when each was taken."""
    taken: list[tuple[Sequence[Message], list[Message]]] = []

    def take() -> None:
        view = session.messages()
        taken.append((view, list(view)))

    take()
    session.append(Message("assistant", "Updating CHANGES.md now."))
    take()
    session.append(NewEvent(MASK, {"items": [{"id": 4, "content": "[output cleared]"}]}))
    take()
    session.append(summary_of(2, 5))
    take()
    session.append(NewEvent.of(Retraction(session.items()[-1].id)))
    take()
    session.append(NewEvent.of(Reset()))
    take()
    session.append(Message("user", "Start over: what is in src/?"))
    take()
    for view, copy in taken:
        assert list(view) == copy
        assert len(view) == len(copy)
        assert [view[i] for i in range(-len(copy), len(copy))] == copy + copy
    assert [len(view) for view, _ in taken] == [6, 7, 7, 4, 3, 0, 1]


@pytest.mark.guarantee("reads-are-stable")
def test_items_are_stable_views_too(session: Session) -> None:
    """`items()` keeps its ids and messages after a later compaction."""
    before = session.items()
    ids = [item.id for item in before]
    session.append(summary_of(2, 5))
    assert [item.id for item in before] == ids == [1, 2, 3, 4, 5, 6]
    assert [item.id for item in session.items()] == [1, 7, 6]


@pytest.mark.guarantee("reads-are-stable")
def test_views_stay_as_they_were_across_batches_of_compactions() -> None:
    """Views taken between appends of many compactions at once keep what they showed, whether
    they are of the items or of the messages, and the batches project what appending each
    compaction alone does."""
    history = [Message("user", "Fix every module.")]
    for n in range(12):
        history += [Message("assistant", f"Reading m{n}.py."), Message("user", f"Go on {n}.")]
    batches = [
        [summary_event(2 * n + 2, 2 * n + 3, f"Summary {n}.") for n in range(first, last)]
        for first, last in ((0, 2), (2, 5), (5, 9))
    ]
    batched, alone = MemoryStore().session("batched"), MemoryStore().session("alone")
    batched.append(history)
    batched.append(batches[0])
    items = batched.items()  # only items here: no view of the messages is out
    items_then = [item.message for item in items]
    batched.append(batches[1])
    messages = batched.messages()  # only messages here
    messages_then = list(messages)
    batched.append(batches[2])
    assert [item.message for item in items] == items_then
    assert list(messages) == messages_then
    assert [len(items_then), len(messages_then), len(batched.messages())] == [23, 20, 16]
    alone.append(history)
    for event in batches[0] + batches[1] + batches[2]:
        alone.append(event)
    assert batched.messages() == alone.messages()
    assert [i.id for i in batched.items()] == [i.id for i in alone.items()]


@pytest.mark.guarantee("reads-are-stable")
@pytest.mark.parametrize("kind", ["items", "messages"])
def test_a_projection_view_taken_between_two_compactions_keeps_its_moment(kind: str) -> None:
    """A projection hands out views of its items and of its messages; one taken between two
    compactions still shows what it showed once the second has folded in."""
    projection = Projection()
    history = [Message("user", "Fix it."), *(Message("assistant", f"step {n}") for n in range(6))]
    for seq, message in enumerate(history, 1):
        projection.apply(Event("p", seq, MESSAGE, {"message": message.to_dict()}, 0.0))
    compactions = [summary_event(2, 3), summary_event(4, 5)]
    projection.apply(Event("p", 8, COMPACTION, compactions[0].data, 0.0))
    view: Sequence[object] = projection.items if kind == "items" else projection.messages()
    then = list(view)
    projection.apply(Event("p", 9, COMPACTION, compactions[1].data, 0.0))
    assert list(view) == then and len(then) == 6
    assert len(projection) == 5


def test_a_view_is_a_read_only_sequence_equal_to_the_list_it_shows(session: Session) -> None:
    """It compares equal to a list or tuple of the same messages, slices and searches like a
    sequence, and refuses changes; a copy is a plain list."""
    view = session.messages()
    assert isinstance(view, Sequence)
    assert view == conversation() and conversation() == view
    assert view == tuple(conversation())
    assert view != conversation()[:-1]
    assert list(view[1:3]) == conversation()[1:3]
    assert list(view[::2]) == conversation()[::2]
    assert list(reversed(view)) == conversation()[::-1]
    assert view.index(conversation()[3]) == 3
    assert conversation()[5] in view
    with pytest.raises(TypeError):
        view[0] = Message("user", "changed")  # type: ignore[index]
    assert not hasattr(view, "append")
    copy = list(view)
    copy.append(Message("user", "mine"))
    assert len(session.messages()) == len(conversation())


def test_a_position_past_the_end_is_an_index_error_even_after_appends(session: Session) -> None:
    """A view ends where the projection ended when it was taken: positions beyond are an
    `IndexError`, even once later messages fill them."""
    view = session.messages()
    session.append(Message("assistant", "more"))
    with pytest.raises(IndexError, match="position 6 is out of range for 6"):
        view[6]
    with pytest.raises(IndexError):
        view[-7]
    assert list(iter(view)) == conversation()


def test_an_iterator_taken_before_an_append_stops_where_the_view_ends(session: Session) -> None:
    """Iterating a view while the session grows yields the view's messages and no more."""
    view = session.messages()
    walk = iter(view)
    first = next(walk)
    session.append([Message("assistant", "one"), Message("user", "two")])
    assert [first, *walk] == conversation()


def test_views_of_a_reopened_session_read_the_same(tmp_path: object) -> None:
    """A session read back from SQLite in a new store gives a view equal to the first one's."""
    path = f"{tmp_path}/reads.db"
    with SQLiteStore(path) as store:
        first = store.session("s")
        first.append(conversation())
        seen = first.messages()
    with SQLiteStore(path) as store:
        assert store.session("s").messages() == seen


def test_a_look_at_an_unchanged_in_memory_log_reads_nothing(session: Session) -> None:
    """On a store that sees every write (MemoryStore), reading the view again when nothing was
    appended anywhere in the store does not read the log; an append through another Session
    object, through the store itself or to another session is still seen at the next look."""
    store = session.store
    reads = count_reads(store)
    session.messages()
    reads.clear()
    session.append(Message("user", "one more"))
    for _ in range(3):
        session.messages()
        session.estimate()
    assert reads == []  # its own append was folded directly, and nothing else came
    store.session("reads").append(Message("assistant", "from another object"))
    assert session.messages()[-1].content == "from another object"
    store.append("reads", [NewEvent.message(Message("user", "straight to the store"))])
    assert session.messages()[-1].content == "straight to the store"
    store.append("elsewhere", [NewEvent.message(Message("user", "another session"))])
    assert session.messages()[-1].content == "straight to the store"
    session.append(Message("assistant", "mine"))
    assert [m.content for m in session.messages()[-3:]] == [
        "from another object",
        "straight to the store",
        "mine",
    ]


def test_a_write_from_another_session_object_between_two_of_mine_is_seen() -> None:
    """My append folds itself in directly only when no other append happened since my last
    look; otherwise the next look reads what the other writer stored, in seq order."""
    store = MemoryStore()
    mine, other = store.session("s"), store.session("s")
    mine.append(Message("user", "first"))
    assert len(mine.messages()) == 1
    other.append(Message("assistant", "second"))
    mine.append(Message("user", "third"))  # lands after the other writer's message
    assert [m.content for m in mine.messages()] == ["first", "second", "third"]
    assert [m.content for m in other.messages()] == ["first", "second", "third"]


def test_only_a_store_that_sees_every_write_offers_a_change_mark(tmp_path: Path) -> None:
    """MemoryStore's change mark moves with every append that writes; a SQLite file, which
    other processes may write, offers none (its sessions read the log at every look), and a
    closed MemoryStore offers none either, so a read after close reports the closed store."""
    memory = MemoryStore()
    mark = memory.change_mark()
    assert mark is not None
    memory.append("s", [NewEvent.message(Message("user", "x"))])
    assert memory.change_mark() != mark
    session = memory.session("s")
    assert len(session.messages()) == 1
    memory.close()
    assert memory.change_mark() is None
    with pytest.raises(StoreClosedError):
        session.messages()
    with SQLiteStore(tmp_path / "marks.db") as sqlite:
        assert sqlite.change_mark() is None


class _Echoing(MemoryStore):
    """A store where another writer appends to the same session right after each append of
    a user message, before the appender hears back: the race of a busy session, made certain."""

    def append(self, session_id: str, events: Any, *args: Any, **kwargs: Any) -> Any:
        stored = super().append(session_id, events, *args, **kwargs)
        if any(e.type == "message" and e.data["message"]["role"] == "user" for e in events):
            super().append(session_id, [NewEvent.message(Message("assistant", "echo"))])
        return stored


def test_a_write_that_lands_right_after_mine_is_seen_at_the_next_look() -> None:
    """When another writer appends just after my append, before I fold it in, my next look
    still reads that write instead of taking the view as caught up."""
    session = _Echoing().session("s")
    session.append(Message("user", "one"))
    assert [m.content for m in session.messages()] == ["one", "echo"]
    session.append(Message("user", "two"))
    assert [m.content for m in session.messages()] == ["one", "echo", "two", "echo"]
