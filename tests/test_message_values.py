"""Messages read back from their stored shape are the values the constructor makes, and the
reader refuses what the constructor refuses, in the same words."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest

from ctxfold.errors import InvalidInputError
from ctxfold.messages import Message, ToolCall
from ctxfold.session.projection import Item, original_item

MESSAGES = [
    Message("system", "You are terse."),
    Message("user", "fix tests/test_io.py", name="ana"),
    Message("user", None, extra={"parts": [{"type": "text", "text": "hi"}]}),
    Message(
        "assistant",
        None,
        (ToolCall("call_1", "read_file", '{"path": "a.py"}'), ToolCall("c2", "ls", extra={"k": 1})),
    ),
    Message("tool", "def f(): ...", tool_call_id="call_1", name="read_file"),
]


def _fields(value: Any) -> list[tuple[str, Any, type]]:
    return [
        (f.name, getattr(value, f.name), type(getattr(value, f.name)))
        for f in dataclasses.fields(value)
    ]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: m.role)
def test_a_message_read_back_is_the_value_the_constructor_makes(message: Message) -> None:
    """Every field, the tool calls' fields and their types match, and the value behaves as one
    the constructor built: equal, printed alike, copied and pickled alike."""
    read = Message.from_dict(message.to_dict())
    assert type(read) is Message
    assert _fields(read) == _fields(message)
    assert [_fields(c) for c in read.tool_calls] == [_fields(c) for c in message.tool_calls]
    assert read == message and repr(read) == repr(message)
    assert pickle.loads(pickle.dumps(read)) == message
    assert read.replace(content="x") == message.replace(content="x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        read.content = "changed"  # type: ignore[misc]


@pytest.mark.parametrize(
    "data",
    [
        {"role": "tool", "content": "out"},
        {"role": "tool", "content": "out", "tool_call_id": ""},
        {"role": "user", "content": "hi", "tool_calls": [{"id": "c", "name": "ls"}]},
    ],
)
def test_the_reader_refuses_what_the_constructor_refuses_in_its_words(data: dict[str, Any]) -> None:
    """A tool result without the id of its call, or tool calls on a message that is not the
    assistant's, are refused when read back exactly as when built."""
    calls = tuple(ToolCall.from_dict(c) for c in data.get("tool_calls", ()))
    with pytest.raises(InvalidInputError) as built:
        Message(data["role"], data["content"], calls, data.get("tool_call_id"))
    with pytest.raises(InvalidInputError) as read:
        Message.from_dict(data)
    assert str(read.value) == str(built.value)


def test_a_subclass_reads_back_as_itself() -> None:
    """`from_dict` on a subclass builds the subclass, through its own constructor."""

    @dataclasses.dataclass(frozen=True)
    class Tagged(Message):
        def __post_init__(self) -> None:
            super().__post_init__()
            object.__setattr__(self, "name", self.name or "tagged")

    read = Tagged.from_dict({"role": "user", "content": "hi"})
    assert type(read) is Tagged and read.name == "tagged"
    call = type("Call", (ToolCall,), {}).from_dict({"id": "c", "name": "ls"})
    assert type(call).__name__ == "Call"


def test_the_item_of_an_original_message_is_the_item_the_constructor_makes() -> None:
    """`original_item` gives ``Item(seq, message, "message", seq)``: every field the same."""
    message = MESSAGES[1]
    made, built = original_item(7, message), Item(7, message, "message", 7)
    assert _fields(made) == _fields(built)
    assert made == built and repr(made) == repr(built)
    assert dataclasses.replace(made, key=3) == dataclasses.replace(built, key=3)
    assert pickle.loads(pickle.dumps(made)) == built
