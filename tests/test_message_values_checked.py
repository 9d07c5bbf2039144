"""Values are checked where they are made, and the functions of `ctxfold.messages` say what they
were given when it is not what they take: a message that exists can be written, validated,
counted and stored, and what `validate(..., "anthropic")` accepts `to_anthropic` can send."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxfold.errors import ConfigurationError, InvalidInputError, PositionError
from ctxfold.messages import (
    Message,
    ToolCall,
    dumps_jsonl,
    from_anthropic,
    from_openai,
    is_valid,
    plan_repair,
    read_jsonl,
    read_transcript,
    repair,
    to_anthropic,
    to_openai,
    validate,
    write_jsonl,
)
from ctxfold.session.frozen import frozen

CALL = ToolCall("call_1", "ls", '{"path": "."}')


@pytest.mark.parametrize(
    ("build", "says"),
    [
        (lambda: Message("user", 123), "content must be a string or None, not int 123"),
        (lambda: Message("assistant", None, "abc"), "tool_calls must be a tuple or a list"),
        (lambda: Message("assistant", None, ({"id": "c"},)), r"tool_calls\[0\] must be a ToolCall"),
        (lambda: Message("user", "x", extra=[1]), r"extra must be a mapping \(a dict\), not list"),
        (lambda: Message("user", "x", name=3), "name must be a string or None, not int 3"),
        (lambda: Message("tool", "x", tool_call_id=7), "tool_call_id must be a string or None"),
        (lambda: Message("robot", "x"), "unknown role 'robot'"),
        (lambda: ToolCall(None, None, None), "non-empty string id, got None"),
        (lambda: ToolCall("c1", ""), "call 'c1' needs a non-empty string name, got ''"),
        (lambda: ToolCall("c1", "ls", {"a": 1}), "arguments must be a JSON string, not {'a': 1}"),
        (lambda: ToolCall("c1", "ls", "{}", extra=[1]), "extra of call 'c1' must be a mapping"),
    ],
)  # fmt: skip
def test_a_field_of_the_wrong_type_is_refused_when_the_value_is_made(
    build: Callable[[], object], says: str
) -> None:
    """Message and ToolCall refuse a field of the wrong type with an InvalidInputError that
    names the field and the value, instead of a value that fails later, elsewhere."""
    with pytest.raises(InvalidInputError, match=says):
        build()


def test_replace_and_a_dataclass_subclass_are_checked_like_the_constructor() -> None:
    """`message.replace(...)` and a frozen dataclass subclass of Message refuse what the
    constructor refuses."""

    @dataclasses.dataclass(frozen=True)
    class Tagged(Message):
        pass

    with pytest.raises(InvalidInputError, match="content must be a string"):
        Message("user", "hi").replace(content=5)
    with pytest.raises(InvalidInputError, match="name must be a string"):
        Tagged("user", "hi", name=5)  # type: ignore[arg-type]
    assert Tagged("assistant", None, [CALL]).tool_calls == (CALL,)


def test_tool_calls_given_as_a_list_are_kept_as_a_tuple() -> None:
    """A list of tool calls is taken and kept as a tuple: the message equals (and hashes like)
    the one built with a tuple, and stores and reads back the same."""
    listed = Message("assistant", None, [CALL])
    assert type(listed.tool_calls) is tuple
    assert listed == Message("assistant", None, (CALL,))
    assert hash(listed) == hash(Message("assistant", None, (CALL,)))
    assert Message.from_dict(listed.to_dict()) == listed


def test_extra_none_means_no_extra_and_text_subclasses_still_pass() -> None:
    """`extra=None` is the same as leaving it out, and a subclass of str is a string."""

    class Text(str):
        pass

    assert Message("user", "hi", extra=None) == Message("user", "hi")
    assert ToolCall("c1", "ls", extra=None).extra == {}
    assert Message("user", Text("hi")).content == "hi"


def test_messages_and_tool_calls_are_hashable_consistently_with_equality() -> None:
    """A message, even one whose `extra` holds dicts, can be hashed and used in a set: equal
    messages (one built, one read back) hash alike, and one differing only in `extra` is still
    a different member."""
    built = Message(
        "assistant",
        "ok",
        (ToolCall("c1", "ls", "{}", extra={"openai": {"k": [1]}}),),
        extra={"anthropic": {"blocks": [{"type": "text", "text": "ok"}]}},
    )
    read = Message.from_dict(json.loads(built.to_json()))
    assert read == built and hash(read) == hash(built)
    other = built.replace(extra={"x": 1})
    assert {built, read, other} == {built, other} and len({built, other}) == 2
    assert hash(Message("user", "x")) == hash(Message("user", "x"))


@pytest.mark.parametrize(
    ("arguments", "sendable"),
    [
        ('{"path": "."}', True),
        ("", True),
        ("  ", True),
        ("[1,2]", False),
        ('"a string"', False),
        ("not json", False),
        ('{"path": ', False),
    ],
)
def test_validate_for_anthropic_reports_the_arguments_to_anthropic_refuses(
    arguments: str, sendable: bool
) -> None:
    """A call whose arguments are not a JSON object is a "bad-arguments" error for Anthropic,
    in the words `to_anthropic` raises, and exactly then: the two agree. OpenAI takes them."""
    history = [
        Message("user", "go"),
        Message("assistant", None, (ToolCall("c7", "ls", arguments),)),
        Message("tool", "a.py", tool_call_id="c7"),
    ]
    problems = [p for p in validate(history, "anthropic") if p.severity == "error"]
    assert is_valid(history, "anthropic") is sendable
    assert is_valid(history, "openai")
    if sendable:
        to_anthropic(history)
        assert problems == []
        return
    with pytest.raises(InvalidInputError) as refused:
        to_anthropic(history)
    assert [(p.index, p.code) for p in problems] == [(1, "bad-arguments")]
    assert str(refused.value) in problems[0].message and "'c7'" in problems[0].message


def test_a_call_id_anthropic_refuses_is_sent_mapped_for_the_call_and_its_result() -> None:
    """An id outside ^[a-zA-Z0-9_-]+$ (another provider's "functions.bash:0") is sent with its
    other characters made "_" and a short hash added: the same id on the tool_use and its
    tool_result, every time, distinct for distinct ids; valid ids and tool names go as they
    are, and `validate` has nothing to report."""
    ids = ["functions.bash:0", "functions_bash_0", "functions.bash.0", "toolu_01A-x"]
    history: list[Message] = [Message("user", "go")]
    for number, call_id in enumerate(ids):
        history.append(Message("assistant", None, (ToolCall(call_id, "my tool", "{}"),)))
        history.append(Message("tool", f"out {number}", tool_call_id=call_id))
    _, rows = to_anthropic(history)
    sent = [r["content"][0]["id"] for r in rows if r["role"] == "assistant"]
    answered = [r["content"][0]["tool_use_id"] for r in rows[2::2]]
    assert sent == answered and to_anthropic(history) == (None, rows)
    assert sent[1] == "functions_bash_0" and sent[3] == "toolu_01A-x"
    assert sent[0].startswith("functions_bash_0_") and len(set(sent)) == len(ids)
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]+", s) for s in sent)
    assert [r["content"][0]["name"] for r in rows if r["role"] == "assistant"] == ["my tool"] * 4
    assert is_valid(history, "anthropic")
    assert history[1].tool_calls[0].id == "functions.bash:0"  # the message keeps its id


def test_kept_anthropic_blocks_with_an_id_the_api_refuses_are_sent_mapped() -> None:
    """A history read from Anthropic-shaped rows whose ids the API would refuse (written by
    another tool) is sent back with those ids mapped, its other fields kept."""
    rows = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hm", "signature": "s"},
                {"type": "tool_use", "id": "a.b", "name": "ls", "input": {}, "cache_control": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "a.b", "is_error": True, "content": "x"}
            ],
        },
    ]
    _, sent = to_anthropic(from_anthropic(rows))
    use, result = sent[1]["content"][1], sent[2]["content"][0]
    assert use["id"] == result["tool_use_id"] != "a.b" and use["id"].startswith("a_b_")
    assert use["cache_control"] == {} and result["is_error"] is True
    assert sent[1]["content"][0] == rows[1]["content"][0]  # type: ignore[index]


NOT_A_LIST: list[tuple[str, Callable[[Any], object]]] = [
    ("from_openai", from_openai),
    ("from_anthropic", from_anthropic),
    ("to_openai", to_openai),
    ("to_anthropic", to_anthropic),
    ("validate", validate),
    ("is_valid", is_valid),
    ("repair", repair),
    ("plan_repair", plan_repair),
    ("dumps_jsonl", dumps_jsonl),
    ("read_jsonl", read_jsonl),
]


@pytest.mark.parametrize("given", [None, 42, "hello"])
@pytest.mark.parametrize(("name", "function"), NOT_A_LIST, ids=[n for n, _ in NOT_A_LIST])
def test_a_history_that_is_not_a_list_is_refused_naming_the_function(
    name: str, function: Callable[[Any], object], given: object
) -> None:
    """None, a number or a string where a list of messages belongs raises an InvalidInputError
    naming the function and what it got (read_jsonl takes a string as a path)."""
    if name == "read_jsonl" and isinstance(given, str):
        given = 42
    with pytest.raises(InvalidInputError, match=f"{name} takes .*, not "):
        function(given)


def test_write_jsonl_refuses_none_before_touching_the_file(tmp_path: Path) -> None:
    """write_jsonl given None says so, and writes no file."""
    with pytest.raises(InvalidInputError, match="write_jsonl takes a list of Message values"):
        write_jsonl(tmp_path / "t.jsonl", None)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_one_message_is_taken_as_a_list_of_one() -> None:
    """Every function that takes a history takes one Message too, as `Session.append` does, and
    gives what it gives for a list of that one message."""
    message = Message("user", "hi")
    assert to_openai(message) == to_openai([message]) == [{"role": "user", "content": "hi"}]
    assert to_anthropic(message) == to_anthropic([message])
    assert validate(message) == [] and is_valid(message, "anthropic")
    assert repair(message) == [message] and plan_repair(message).messages == [message]
    assert dumps_jsonl(message) == dumps_jsonl([message])


def test_one_provider_dict_is_read_as_one_message_and_a_request_body_is_refused() -> None:
    """from_openai and from_anthropic take one dict as one message; a whole request body
    (with its "messages") is refused with what to pass instead."""
    assert from_openai({"role": "user", "content": "hi"}) == [Message("user", "hi")]
    assert [m.content for m in from_anthropic({"role": "user", "content": "hi"})] == ["hi"]
    with pytest.raises(InvalidInputError, match="request body; pass its 'messages'"):
        from_anthropic({"model": "claude", "messages": [{"role": "user", "content": "hi"}]})


def test_a_dict_among_messages_is_refused_naming_its_position() -> None:
    """A provider dict handed where Message values belong is refused with its index and the
    reader that turns it into a Message."""
    with pytest.raises(InvalidInputError, match=r"to_openai: item 1 is dict .*from_openai"):
        to_openai([Message("user", "hi"), {"role": "user", "content": "x"}])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match="validate: item 0 is str 'hi', not a Message"):
        validate(["hi"])  # type: ignore[list-item]


def test_a_path_that_cannot_be_read_or_written_is_named(tmp_path: Path) -> None:
    """read_jsonl of a missing file or a folder, and write_jsonl into a missing folder or onto
    a folder, raise an InvalidInputError naming the path; read_transcript names it once."""
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(InvalidInputError, match=f"cannot read {missing}: no such file"):
        read_jsonl(missing)
    with pytest.raises(InvalidInputError, match=f"cannot read {tmp_path}: it is a folder"):
        read_jsonl(tmp_path)
    with pytest.raises(InvalidInputError) as once:
        read_transcript(missing)
    assert str(once.value) == f"cannot read {missing}: no such file"
    target = tmp_path / "out" / "t.jsonl"
    with pytest.raises(InvalidInputError, match=f"cannot write {target}: folder .* not exist"):
        write_jsonl(target, [Message("user", "hi")])
    with pytest.raises(InvalidInputError, match=f"cannot write {tmp_path}: it is a folder"):
        write_jsonl(tmp_path, [Message("user", "hi")])


def test_a_position_out_of_range_names_the_position_given() -> None:
    """A view's out-of-range position is reported as given (-5, not -4), with the positions
    there are, as a PositionError, which is the IndexError the sequence protocol needs."""
    view = frozen([Message("user", "hi")])
    says = r"position -5 is out of range for 1 entry \(positions -1 to 0\)"
    with pytest.raises(PositionError, match=says):
        view[-5]
    with pytest.raises(IndexError, match="position 1 "):
        view[1]
    assert view.index(Message("user", "hi")) == 0 and view[-1] == view[False]


def test_a_position_that_is_not_a_whole_number_is_refused_as_a_type_error() -> None:
    """A view indexed by a string or a float raises a ConfigurationError, which is the TypeError
    a list raises there too, naming what it got."""
    view = frozen(["a", "b"])
    for bad in ("a", 1.0, None):
        with pytest.raises(ConfigurationError, match="whole number or a slice, not ") as caught:
            view[bad]  # type: ignore[call-overload]
        assert isinstance(caught.value, TypeError)
