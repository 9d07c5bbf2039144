"""The shortcuts of an append give what the long way gives.

`plain_fields` stands in for `check_fields` and the look at each field's exact type; the
encoded tuples are made in C rather than through their NamedTuple constructors; the default
`adding` of a check skips the ABC checks. Each is held here to the long way's answer.
"""

from __future__ import annotations

from typing import Any

import pytest

from ctxfold.compactor.compactor import _adding
from ctxfold.errors import InvalidInputError
from ctxfold.events import NewEvent
from ctxfold.messages import Message, ToolCall
from ctxfold.messages._values import check_fields, plain_fields
from ctxfold.replay.run import _request_points
from ctxfold.session.appended import message_event
from ctxfold.storage import MemoryStore
from ctxfold.storage.checks import EncodedBatch, EncodedEvent, StringsEvent, encode_batch

_set = object.__setattr__


class _Text(str):
    pass


def _bent(message: Message, **fields: Any) -> Message:
    """`message` with fields set past its constructor's checks."""
    for key, value in fields.items():
        _set(message, key, value)
    return message


def _call(**fields: Any) -> ToolCall:
    call = ToolCall("call_1", "read", '{"path": "a.py"}')
    for key, value in fields.items():
        _set(call, key, value)
    return call


def _messages() -> list[Message]:
    call = ToolCall("call_1", "read", '{"path": "a.py"}')
    return [
        Message("system", "be brief"),
        Message("user", "hello"),
        Message("user", "é 東京 😀"),
        Message("assistant", None, [call]),
        Message("assistant", "two calls", [call, ToolCall("call_2", "ls")]),
        Message("tool", "a.py", tool_call_id="call_1", name="read"),
        Message("user", ""),
        Message("user", _Text("a subclass of str")),
        Message("user", "hi", name=_Text("ann")),
        Message("tool", "out", tool_call_id=_Text("call_1")),
        Message("user", "hi", extra={"k": 1}),
        Message("assistant", None, [ToolCall("call_1", "read", "{}", {"k": 1})]),
        Message("assistant", None, [ToolCall(_Text("call_1"), "read")]),
        Message("assistant", None, [ToolCall("call_1", _Text("read"))]),
        Message("assistant", None, [ToolCall("call_1", "read", _Text("{}"))]),
        _bent(Message("user", "x"), content=3),
        _bent(Message("user", "x"), role="robot"),
        _bent(Message("user", "x"), role=_Text("user")),
        _bent(Message("user", "x"), extra=None),
        _bent(Message("user", "x"), extra=[]),
        _bent(Message("user", "x"), extra={}.keys()),
        _bent(Message("user", "x"), tool_calls=[]),
        _bent(Message("user", "x"), tool_calls=None),
        _bent(Message("user", "x"), tool_calls=(call,)),
        _bent(Message("tool", "x", tool_call_id="c"), tool_call_id=None),
        _bent(Message("tool", "x", tool_call_id="c"), tool_call_id=""),
        _bent(Message("user", "x"), name=7),
        _bent(Message("assistant", None, [call]), tool_calls=({"id": "c"},)),
        Message("assistant", None, [_call(id="")]),
        Message("assistant", None, [_call(name="")]),
        Message("assistant", None, [_call(arguments=None)]),
        Message("assistant", None, [_call(extra=None)]),
        Message("assistant", None, [_call(extra=[])]),
    ]


def _long_way(message: Message) -> bool | str:
    """What `message_event` found before `plain_fields`: an error, or whether the message is
    plain (exact types) with no `extra`."""
    try:
        check_fields(message)
    except InvalidInputError as exc:
        return str(exc)
    exact = (str, type(None))
    return (
        type(message) is Message
        and type(message.tool_calls) is tuple
        and all(type(v) in exact for v in (message.content, message.tool_call_id, message.name))
        and not message.extra
        and all(
            type(c) is ToolCall
            and all(type(v) is str for v in (c.id, c.name, c.arguments))
            and not c.extra
            for c in message.tool_calls
        )
    )


@pytest.mark.parametrize("message", _messages(), ids=repr)
def test_plain_fields_says_plain_only_of_what_the_long_way_finds_plain(message: Message) -> None:
    long_way = _long_way(message)
    if plain_fields(message):
        assert long_way is True
    if long_way is True and type(message.extra) is dict and type(message.role) is str:
        # Every plain message of the usual shape takes the shortcut (a role that is a
        # subclass of str takes the long way, to the same answer).
        assert all(type(c.extra) is dict for c in message.tool_calls)
        assert plain_fields(message)


@pytest.mark.parametrize("message", _messages(), ids=repr)
def test_message_event_stores_and_refuses_as_the_long_way_does(message: Message) -> None:
    long_way = _long_way(message)
    if isinstance(long_way, str):
        with pytest.raises(InvalidInputError) as refused:
            message_event(2, message)
        assert str(refused.value) == f"item 2 of the append: {long_way}; nothing was written"
        return
    event, folded = message_event(0, message)
    assert event.data == {"message": message.to_dict()}
    if long_way:
        assert type(event) is StringsEvent and folded is message
    else:
        assert type(event) is not StringsEvent


def test_encoded_tuples_equal_their_constructors() -> None:
    events = [NewEvent("turn", {"n": 1}), StringsEvent("message", {"message": {"role": "user"}})]
    batch = encode_batch("s", events, digest=True)
    assert type(batch) is EncodedBatch
    assert batch == EncodedBatch(batch.events, batch.digest)
    assert all(type(e) is EncodedEvent for e in batch.events)
    assert batch.events == [
        EncodedEvent("turn", '{"n":1}', None),
        EncodedEvent("message", '{"message":{"role":"user"}}', {"message": {"role": "user"}}),
    ]
    assert batch.events[1].value is events[1].data


def test_a_memory_store_keeps_each_event_of_a_batch_in_order() -> None:
    store = MemoryStore()
    store.append("s", [NewEvent("a", {"n": 1})])
    stored = store.append("s", [NewEvent("b", {"n": 2}), NewEvent("c", {"n": 3})])
    assert [e.seq for e in stored] == [2, 3]
    assert [(e.seq, e.type, e.data) for e in store.read("s")] == [
        (1, "a", {"n": 1}),
        (2, "b", {"n": 2}),
        (3, "c", {"n": 3}),
    ]
    assert store.sessions() == ["s"]
    assert store.append("t", []) == [] and store.sessions() == ["s"]


@pytest.mark.parametrize("adding", [(), None, [], iter(())])
def test_no_messages_adding_reads_as_none(adding: Any) -> None:
    assert list(_adding(adding)) == []


def _asked_after(messages: list[Message], index: int) -> bool:
    """The long way: a reply is asked for before each assistant message, and at the end of a
    transcript that stops on anything else."""
    if index + 1 < len(messages):
        return messages[index + 1].role == "assistant"
    return messages[index].role != "assistant"


@pytest.mark.parametrize(
    "roles",
    ["", "u", "a", "sua", "suat", "suatat", "suauu", "suaa", "tt"],
)
def test_request_points_are_where_a_reply_is_asked_for(roles: str) -> None:
    names: dict[str, Any] = {"s": "system", "u": "user", "a": "assistant"}
    messages = [
        Message("tool", "out", tool_call_id="c") if r == "t" else Message(names[r], "x")
        for r in roles
    ]
    assert _request_points(messages) == [_asked_after(messages, i) for i in range(len(messages))]
