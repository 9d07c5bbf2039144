"""A checkpoint's load reads the logged messages it refers to its own way (orjson where present,
each message made in one pass); whatever the rows hold, it gives what a fold of the log gives,
or the checkpoint is not used and the fold runs.

Each test writes a session, keeps a checkpoint of it, and compares a new store's view of it
through the checkpoint with the view of a store that folds the log from the start.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxfold.errors import InvalidInputError, StoreCorruptError
from ctxfold.events import Compaction, Mask, MaskedItem, NewEvent
from ctxfold.messages import Message, ToolCall
from ctxfold.session import checkpoint, originals
from ctxfold.session.originals import _owned_message
from ctxfold.storage import MemoryStore, SQLiteStore
from ctxfold.storage.base import StoreBase
from ctxfold.storage.checks import PAGE_SIZE

SID = "s"

PLAIN = [
    Message("system", "be terse"),
    Message("user", "fix tests/test_io.py: 12:30 and 3.14 and 123456789012345678901234567890"),
    Message("assistant", None, [ToolCall("call_1", "read", '{"path": "a.py", "n": 1e400}')]),
    Message("tool", "x" * 50, tool_call_id="call_1"),
    Message("assistant", "two", [ToolCall("c2", "a", "{}"), ToolCall("c3", "b", "[1, 2.5]")]),
    Message("tool", "", tool_call_id="c2", name="a"),
    Message("tool", None, tool_call_id="c3"),
    Message("user", "é ü 東京 😀 \u2028 \x7f \x00 \\u0041", name="ana"),
    Message("assistant", "plain", name="bot"),
]
"""Messages of every shape `Message.to_dict` writes without ``extra``, and text that looks like
numbers and escapes."""

AWKWARD = [
    # Numbers orjson reads otherwise than the standard decoder, where a message keeps them.
    Message("user", "big", extra={"n": 2**64, "m": -(2**63) - 1, "f": 0.1, "e": 1e-7}),
    Message(
        "assistant", None, [ToolCall("call_9", "run", "{}", extra={"id": 12345678901234567890123})]
    ),
    Message("tool", "ok", tool_call_id="call_9", extra={"cost": 1.5e300, "list": [2**70, -0.0]}),
]


def _fold_of_log(path: Path) -> list[Message]:
    with SQLiteStore(path) as store:
        store.drop_snapshots(SID)
        return list(store.session(SID, checkpoint_every=None).messages())


def _through_checkpoint(store: StoreBase) -> list[Message]:
    """The view a new session builds from the checkpoint, which must be usable."""
    loaded = checkpoint.load(store, SID)
    assert loaded is not None, "the checkpoint was not used"
    messages = list(store.session(SID).messages())
    assert messages == list(loaded.projection.messages())
    return messages


def _fails_as_the_fold_fails(path: Path, error: type[Exception]) -> None:
    """Reading the session at `path` raises `error`, in the same words with its checkpoint as
    when the log is folded with no checkpoint at all."""
    with SQLiteStore(path) as store, pytest.raises(error) as through:
        store.session(SID).messages()
    with SQLiteStore(path) as store:
        store.drop_snapshots(SID)
        with pytest.raises(error) as folded:
            store.session(SID).messages()
    assert str(through.value) == str(folded.value)


def _write(path: Path, batches: list[list[Any]]) -> None:
    with SQLiteStore(path) as store:
        session = store.session(SID, checkpoint_every=1)
        for batch in batches:
            session.append(batch)


def _raw_events(path: Path, events: list[NewEvent]) -> None:
    """Events appended past the session's checks, as another program could, then a checkpoint
    kept by a session over them."""
    with SQLiteStore(path) as store:
        store.append(SID, events)
        store.session(SID, checkpoint_every=1).append(Message("user", "last"))


@pytest.mark.parametrize("batches", [[PLAIN], [PLAIN, AWKWARD, PLAIN]], ids=["plain", "awkward"])
def test_the_checkpoint_gives_the_messages_a_fold_of_the_log_gives(
    tmp_path: Path, batches: list[list[Message]]
) -> None:
    """Every shape of message, with or without numbers orjson reads differently, comes back
    from the checkpoint equal, field for field and type for type, to the fold of the log."""
    path = tmp_path / "s.db"
    _write(path, batches)
    with SQLiteStore(path) as store:
        through = _through_checkpoint(store)
    folded = _fold_of_log(path)
    assert through == folded == [m for batch in batches for m in batch]
    assert [repr(m) for m in through] == [repr(m) for m in folded]
    assert [vars(m) for m in through] == [vars(m) for m in folded]


def test_rows_written_past_the_checks_read_as_the_fold_reads_them(tmp_path: Path) -> None:
    """Message events another program wrote (keys in another order, fields the session never
    writes, numbers past 64 bits beside the message) give, through the checkpoint, what the
    fold of the log gives."""
    path = tmp_path / "s.db"
    _raw_events(
        path,
        [
            NewEvent("message", {"message": {"content": "first", "role": "user"}}),
            NewEvent("message", {"message": {"role": "user", "content": "n"}, "n": 2**80}),
            NewEvent("message", {"message": {"role": "user", "content": "x", "extra": None}}),
            NewEvent("message", {"message": {"role": "user", "content": "x", "tool_calls": []}}),
            NewEvent("message", {"message": {"role": "assistant", "tool_calls": None}}),
            NewEvent(
                "message",
                {
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [{"name": "f", "id": "k1"}],
                    }
                },
            ),
            NewEvent(
                "message", {"message": {"role": "tool", "content": "r", "tool_call_id": "k1"}}
            ),
        ],
    )
    with sqlite3.connect(path) as conn:
        # An escaped lone surrogate: the standard decoder reads it, orjson refuses it.
        conn.execute(
            "UPDATE events SET data = ? WHERE session_id = ? AND seq = 1",
            ('{"message":{"role":"user","content":"lone \\ud800"}}', SID),
        )
    with SQLiteStore(path) as store:
        through = _through_checkpoint(store)
    folded = _fold_of_log(path)
    assert through == folded
    assert through[0].content == "lone \ud800"
    assert [repr(m) for m in through] == [repr(m) for m in folded]


def test_a_checkpoint_over_an_unreadable_row_ends_as_the_fold_does(tmp_path: Path) -> None:
    """A row whose text is not UTF-8 (a damaged file) is the same `StoreCorruptError` whether
    a checkpoint refers to it or the log is folded."""
    path = tmp_path / "s.db"
    _write(path, [PLAIN])
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE events SET data = CAST(? AS TEXT) WHERE session_id = ? AND seq = 2",
            (b'{"message":{"role":"user","content":"\xff"}}', SID),
        )
    _fails_as_the_fold_fails(path, StoreCorruptError)


def test_a_reference_to_a_row_that_is_not_a_message_is_ignored(tmp_path: Path) -> None:
    """A checkpoint referring to an event that is no message event is not used: the session
    folds the log instead."""
    path = tmp_path / "s.db"
    _write(path, [PLAIN])
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE events SET type = 'turn' WHERE session_id = ? AND seq = 3", (SID,))
    with SQLiteStore(path) as store:
        assert checkpoint.load(store, SID) is None
        assert list(store.session(SID).messages()) == _fold_of_log(path)


def test_a_reference_to_a_message_the_fold_refuses_ends_as_the_fold_does(tmp_path: Path) -> None:
    """A referred-to message the fold refuses (a tool result without its call id) makes the
    checkpoint unusable, and the read fails as the fold of the log fails."""
    path = tmp_path / "s.db"
    _write(path, [PLAIN])
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE events SET data = ? WHERE session_id = ? AND seq = 4",
            ('{"message":{"role":"tool","content":"no call id"}}', SID),
        )
    with SQLiteStore(path) as store:
        assert checkpoint.load(store, SID) is None
    _fails_as_the_fold_fails(path, InvalidInputError)


def test_references_across_pages_and_gaps_longer_than_a_page(tmp_path: Path) -> None:
    """Originals spread over several pages, with a compaction that covers more than a page
    between them, and a masked result among them, come back as the fold gives them."""
    path = tmp_path / "s.db"
    count = PAGE_SIZE + 300
    history = [Message("user" if i % 2 else "assistant", f"m{i}") for i in range(count)]
    with SQLiteStore(path) as store:
        session = store.session(SID, checkpoint_every=None)
        session.append(history[:10])
        session.append([Message("assistant", None, [ToolCall("t1", "read")])])
        session.append([Message("tool", "the output " * 20, tool_call_id="t1")])
        session.append(history[10:])
        items = session.items()
        first, last = items[20].id, items[20 + PAGE_SIZE + 50].id
        summary = Message("user", "summary of the middle")
        session.append(NewEvent.of(Compaction(first, last, summary, strategy="test")))
        session.append(NewEvent.of(Mask((MaskedItem(items[11].id, "[cleared]"),))))
        session.checkpoint_every = 1
        session.append(Message("user", "after"))
    with SQLiteStore(path) as store:
        through = _through_checkpoint(store)
        originals_of = [item.original for item in store.session(SID).items()]
    assert through == _fold_of_log(path)
    assert any(o is not None for o in originals_of)


def test_a_store_that_keeps_no_text_reads_through_its_decoded_rows() -> None:
    """A store without `_read_text_page` (MemoryStore) gives the checkpoint's messages from
    its decoded rows, as the fold gives them."""
    store = MemoryStore()
    session = store.session(SID, checkpoint_every=1)
    session.append(PLAIN)
    session.append(AWKWARD)
    assert store._read_text_page(SID, 0, None) is None
    assert _through_checkpoint(store) == PLAIN + AWKWARD


def test_without_orjson_the_checkpoint_reads_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the fast extra, the standard decoder reads every row, to the same messages."""
    path = tmp_path / "s.db"
    _write(path, [PLAIN, AWKWARD])
    monkeypatch.setattr(originals, "_loads", None)
    with SQLiteStore(path) as store:
        assert _through_checkpoint(store) == _fold_of_log(path) == PLAIN + AWKWARD


def _shapes() -> Iterator[dict[str, Any]]:
    for message in PLAIN:
        yield message.to_dict()


@pytest.mark.parametrize("data", list(_shapes()))
def test_the_one_pass_reader_makes_what_from_dict_makes(data: dict[str, Any]) -> None:
    """For each shape the session writes, the one-pass reader's message is `from_dict`'s."""
    made = _owned_message(data)
    assert made is not None
    expected = Message.from_dict(data)
    assert made == expected and repr(made) == repr(expected) and vars(made) == vars(expected)
    assert [vars(c) for c in made.tool_calls] == [vars(c) for c in expected.tool_calls]


REFUSED: list[Callable[[dict[str, Any]], None]] = [
    lambda d: d.update(role="robot"),
    lambda d: d.update(content=5),
    lambda d: d.update(content=2.0),
    lambda d: d.update(extra={"a": 1}),
    lambda d: d.update(other="x"),
    lambda d: d.pop("content"),
    lambda d: d.update(tool_calls=[{"id": "", "name": "f", "arguments": "{}"}]),
    lambda d: d.update(tool_calls=[{"id": "i", "name": "f", "arguments": {}}]),
    lambda d: d.update(tool_calls=[{"id": "i", "name": "f", "arguments": "{}", "extra": {}}]),
    lambda d: d.update(tool_calls="call"),
]


@pytest.mark.parametrize("change", REFUSED)
def test_the_one_pass_reader_leaves_anything_else_to_from_dict(
    change: Callable[[dict[str, Any]], None],
) -> None:
    """Data of any other shape or type is not read in one pass (`from_dict` then keeps it or
    refuses it in its own words)."""
    data = {"role": "assistant", "content": "c"}
    change(data)
    assert _owned_message(data) is None
