"""A keyed append retried with the same data built again, on every store: the keys of a mapping
may come in another order and the retry still lands once; a retry that means something else is
refused as before."""

from __future__ import annotations

from typing import Any

import pytest

from ctxfold.errors import InvalidInputError
from ctxfold.events import Compaction, NewEvent
from ctxfold.messages import Message, ToolCall
from ctxfold.storage import StoreBase, open_store

REFUSED = r"idempotency_key 'k' was already used for other events \(seqs 2 to 3\)"


def _reply(extra: dict[str, Any]) -> NewEvent:
    call = ToolCall("call_1", "read", '{"path": "a.py"}', extra={"index": 0, "kind": "fn"})
    return NewEvent.message(Message("assistant", "Reading it.", (call,), extra=extra))


def _batch(extra: dict[str, Any], tool: dict[str, Any]) -> list[NewEvent]:
    """A turn as an application sends it: a reply with provider fields, and a raw event whose
    data holds tool-call arguments and metadata as mappings."""
    return [_reply(extra), NewEvent("tool_run", tool)]


def _first() -> list[NewEvent]:
    return _batch(
        {"id": "resp_1", "usage": {"input": 10, "output": 4}, "cached": False},
        {
            "arguments": {"path": "a.py", "lines": [1, 20], "opts": {"follow": True, "depth": 2}},
            "metadata": {"trace": "t-1", "spans": [{"name": "read", "ms": 1.5}]},
        },
    )


def _rebuilt() -> list[NewEvent]:
    """`_first` built again from the same data: every mapping, nested ones too, in another
    key order; lists keep theirs."""
    return _batch(
        {"cached": False, "usage": {"output": 4, "input": 10}, "id": "resp_1"},
        {
            "metadata": {"spans": [{"ms": 1.5, "name": "read"}], "trace": "t-1"},
            "arguments": {"opts": {"depth": 2, "follow": True}, "lines": [1, 20], "path": "a.py"},
        },
    )


@pytest.mark.guarantee("session-append-idempotent")
def test_a_retry_with_its_mappings_in_another_key_order_lands_once(store_url: str) -> None:
    """A retry built again from the same data, with every mapping's keys (in ``extra``, in
    tool-call arguments, in metadata, nested) in another order, returns the events the first
    try stored, in the first try's key order, and writes nothing; after a restart too."""
    with open_store(store_url) as store:
        store.append("s", [NewEvent("turn", {"n": 0})])
        first = store.append("s", _first(), idempotency_key="k")
        store.append("s", [NewEvent("turn", {"n": 3})])
        again = store.append("s", _rebuilt(), idempotency_key="k")
        assert again == first
        assert [e.seq for e in again] == [2, 3]
        assert list(again[0].data["message"]["extra"]) == ["id", "usage", "cached"]
        assert list(again[1].data) == ["arguments", "metadata"]
        assert store.last_seq("s") == 4
    if store_url != "memory://":
        with open_store(store_url) as reopened:
            assert reopened.append("s", _rebuilt(), idempotency_key="k") == first
            assert reopened.last_seq("s") == 4
            assert [e.seq for e in reopened.read("s")] == [1, 2, 3, 4]


def _changed(path: tuple[str | int, ...], value: Any) -> list[NewEvent]:
    """`_rebuilt` with the value at `path` (into the tool event's data) set to `value`."""
    batch = _rebuilt()
    data: Any = dict(batch[1].data)
    batch[1] = NewEvent("tool_run", data)
    for step in path[:-1]:
        data[step] = data[step].copy()
        data = data[step]
    data[path[-1]] = value
    return batch


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(lambda: _changed(("arguments", "path"), "b.py"), id="a string"),
        pytest.param(lambda: _changed(("arguments", "opts", "depth"), 3), id="a nested number"),
        pytest.param(lambda: _changed(("arguments", "opts", "depth"), 2.0), id="int to float"),
        pytest.param(lambda: _changed(("arguments", "opts", "follow"), 1), id="bool to int"),
        pytest.param(lambda: _changed(("arguments", "lines"), [20, 1]), id="list order"),
        pytest.param(lambda: _changed(("metadata", "extra_key"), None), id="a key more"),
        pytest.param(lambda: _changed(("metadata",), {"trace": "t-1"}), id="a key fewer, nested"),
        pytest.param(
            lambda: [_reply({"id": "resp_1", "usage": {"output": 4, "input": 10}}), _first()[1]],
            id="extra without a key",
        ),
        pytest.param(lambda: _first()[:1], id="one event fewer"),
        pytest.param(lambda: [*_first(), NewEvent("turn")], id="one event more"),
        pytest.param(lambda: [_first()[0], NewEvent("other", _first()[1].data)], id="a type"),
        pytest.param(lambda: _first()[::-1], id="the events' order"),
    ],
)
def test_a_retry_that_differs_in_meaning_is_refused(store: StoreBase, other: Any) -> None:
    """A key sent again with events that differ in a value, a type, a key, the order of a list
    or of the events, or their number, is refused as before, and nothing is written."""
    store.append("s", [NewEvent("turn", {"n": 0})])
    first = store.append("s", _first(), idempotency_key="k")
    with pytest.raises(InvalidInputError, match=REFUSED):
        store.append("s", other(), idempotency_key="k")
    assert store.read("s")[1:] == first


def test_the_same_retry_still_lands_once_when_its_text_matches(store: StoreBase) -> None:
    """The retry sent exactly as the first try is still answered with the first try's events."""
    first = store.append("s", _first(), idempotency_key="k")
    assert store.append("s", _first(), idempotency_key="k") == first
    assert store.last_seq("s") == 2


@pytest.mark.guarantee("session-append-idempotent")
def test_a_session_retry_with_extra_in_another_key_order_lands_once(store: StoreBase) -> None:
    """Through a `Session`, a message retried with its ``extra`` rebuilt in another key order
    returns the first try's events, and the log and a fresh projection hold it once."""
    session = store.session("chat")
    session.append(Message("user", "hi"))
    extra = {"id": "resp_1", "meta": {"a": 1, "b": [{"x": 1, "y": 2}]}}
    rebuilt = {"meta": {"b": [{"y": 2, "x": 1}], "a": 1}, "id": "resp_1"}
    first = session.append(Message("assistant", "hello", extra=extra), idempotency_key="k")
    again = store.session("chat").append(
        Message("assistant", "hello", extra=rebuilt), idempotency_key="k"
    )
    assert again == first
    assert store.last_seq("chat") == 2
    assert [m.text for m in store.session("chat").messages()] == ["hi", "hello"]
    with pytest.raises(InvalidInputError, match="already used for other events"):
        session.append(
            Message("assistant", "hello", extra={**rebuilt, "id": "resp_2"}), idempotency_key="k"
        )
    assert store.last_seq("chat") == 2


@pytest.mark.guarantee("session-append-idempotent")
def test_a_session_that_retries_shows_what_the_first_try_stored(store: StoreBase) -> None:
    """A session whose first try landed unseen (its acknowledgement lost) folds the stored
    events, not the retry's rebuilt messages: the text it sends the provider next is the one
    every other reader of the log sends, keys in the first try's order."""
    session = store.session("chat")
    session.messages()  # it has read the log, and will not see the first try land
    store.session("chat").append(
        Message("user", "hi", extra={"a": 1, "b": {"c": 2, "d": 3}}), idempotency_key="k"
    )
    session.append(
        Message("user", "hi", extra={"b": {"d": 3, "c": 2}, "a": 1}), idempotency_key="k"
    )
    [shown] = session.messages()
    assert list(shown.extra) == ["a", "b"] and list(shown.extra["b"]) == ["c", "d"]
    assert shown.extra == store.session("chat").messages()[0].extra


@pytest.mark.guarantee("session-append-idempotent")
def test_an_edit_retried_with_extra_in_another_key_order_lands_once(store: StoreBase) -> None:
    """A keyed compaction retried by a new process, its summary's ``extra`` rebuilt in another
    key order, returns the first try's event though its check would now fail."""
    session = store.session("i")
    session.append([Message("system", "s"), Message("user", "u"), Message("assistant", "a")])
    summary = {"model": "m", "usage": {"input": 9, "output": 2}}
    rebuilt = {"usage": {"output": 2, "input": 9}, "model": "m"}
    (first,) = session.append(
        NewEvent.of(Compaction(2, 3, Message("user", "[summary]", extra=summary))),
        expected_seq=3,
        idempotency_key="compact-1",
    )
    restarted = store.session("i")
    (again,) = restarted.append(
        NewEvent.of(Compaction(2, 3, Message("user", "[summary]", extra=rebuilt))),
        expected_seq=3,
        idempotency_key="compact-1",
    )
    assert again == first
    assert store.last_seq("i") == 4
    assert [m.text for m in restarted.messages()] == ["s", "[summary]"]
