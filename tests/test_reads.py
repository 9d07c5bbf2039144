"""Reading the projection: `messages()` and `items()` hand out immutable views that never change.

An agent reads the view before every model request, so a read copies nothing; what it returns
is a `Sequence`, not a list, and it keeps showing the moment it was taken.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ctxfold.events import MASK, NewEvent, Reset, Retraction
from ctxfold.messages import Message
from ctxfold.session import Session
from ctxfold.storage import MemoryStore, SQLiteStore
from tests._histories import coding_conversation, summary_event


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
