"""The session's copy of an appended message with `extra`: private, and equal to the stored one."""

from __future__ import annotations

import enum
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from ctxfold.events import Compaction, NewEvent
from ctxfold.messages import Message, ToolCall
from ctxfold.session.private import private_message
from ctxfold.storage import SQLiteStore
from ctxfold.storage.checks import encode_data


class _Name(str):
    pass


class _Level(enum.IntEnum):
    HIGH = 2


def _framework_extra() -> dict[str, Any]:
    """What an integration puts in `extra`: a framework's parts, dumped to JSON values."""
    return {
        "pydantic_ai": {
            "header": {
                "usage": {"input_tokens": 3, "audio_seconds": 0.5, "details": {}},
                "model_name": "function:x",
                "timestamp": "2026-12-01T06:31:35Z",
                "provider_details": None,
                "state": "complete",
            },
            "parts": [
                {
                    "content": "ünïcode 🚀 src/io.py",
                    "id": None,
                    "part_kind": "text",
                    "flags": [True, False, -0.0, 10**30],
                }
            ],
        },
        "ctxfold": {"source": ["m", 12, 0]},
    }


def test_changing_nested_extra_after_append_changes_neither_view_nor_log(tmp_path: Path) -> None:
    """A caller that changes the dicts and lists deep inside a message's or a tool call's
    `extra` after the append changes neither the session's live view nor the log: the view
    shows what was stored, as a new process reads it."""
    extra, call_extra = _framework_extra(), {"meta": {"ids": [1, 2]}}
    calls = (ToolCall("c1", "bash", '{"cmd": "ls"}', call_extra),)
    with SQLiteStore(tmp_path / "events.db") as store:
        session = store.session("s")
        session.append([Message("user", "hi", extra=extra), Message("assistant", None, calls)])
        extra["pydantic_ai"]["parts"][0]["content"] = "changed"
        extra["pydantic_ai"]["parts"].append({})
        extra["pydantic_ai"]["header"]["usage"]["details"]["x"] = 1
        extra["ctxfold"]["source"][1] = 99
        call_extra["meta"]["ids"].append(3)
        live = list(session.messages())
        cold = list(store.session("s").messages())
    assert live == cold
    assert live[0].extra == _framework_extra()
    assert live[1].tool_calls[0].extra == {"meta": {"ids": [1, 2]}}


@pytest.mark.parametrize(
    "extra",
    [
        {"pair": (1, 2)},
        {"name": _Name("bash")},
        {"nested": [{"name": _Name("bash")}]},
        {7: "an int key"},
        {"level": _Level.HIGH},
        {"deep": [[[[["x"]]]]], "flag": True, "none": None, "f": 1.0},
    ],
)
def test_the_live_view_equals_a_read_whatever_extra_holds(
    tmp_path: Path, extra: dict[Any, Any]
) -> None:
    """Whether or not an `extra` value reads back from JSON as itself (a tuple comes back a
    list, a str subclass a str, an int key a string), the live view holds what a read gives."""
    with SQLiteStore(tmp_path / "events.db") as store:
        session = store.session("s")
        session.append([Message("user", "hi", extra=extra), Message("user", "again")])
        assert list(session.messages()) == list(store.session("s").messages())
        assert list(session.messages()) == [m.message for m in store.read("s")]


def test_a_private_copy_shares_no_container_and_declines_what_json_would_change() -> None:
    """`private_message` copies every dict and list of `extra` (so the session holds values
    the caller cannot reach), and gives None where only a decode of the stored text would give
    an equal value."""
    message = Message("user", "hi", extra=_framework_extra())
    copy = private_message(message)
    assert copy == message
    assert copy is not None and copy.extra is not message.extra
    header, kept = copy.extra["pydantic_ai"]["header"], message.extra["pydantic_ai"]["header"]
    assert header is not kept and header["usage"] is not kept["usage"]
    assert copy.extra["pydantic_ai"]["parts"][0] is not message.extra["pydantic_ai"]["parts"][0]
    assert private_message(Message("user", "hi", extra={"pair": (1, 2)})) is None
    int_key: dict[Any, Any] = {1: "x"}
    assert private_message(Message("user", "hi", extra=int_key)) is None
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    assert private_message(Message("user", "hi", extra={"deep": deep})) is None


def test_the_stored_text_and_returned_events_are_as_a_plain_encode_gives(tmp_path: Path) -> None:
    """The log keeps, for a message with `extra`, exactly the JSON text `encode_data` writes for
    its `to_dict` (unicode, DEL and control characters included); the events `append` returns
    equal a read of the log, and changing them changes neither the view nor the log."""
    messages = [
        Message("user", "hi", extra=_framework_extra()),
        Message("user", "odd", extra={"text": "del \x7f tab \t nul \x00 é \u2028 \\u00e9"}),
        Message(
            "assistant",
            None,
            (ToolCall("c1", "bash", "{}", {"meta": {"ids": [1, 2]}}),),
            extra={"parts": [{"k": "v"}]},
        ),
    ]
    with SQLiteStore(tmp_path / "events.db") as store:
        session = store.session("s")
        returned = session.append(messages)
        with closing(sqlite3.connect(tmp_path / "events.db")) as conn:
            texts = [row[0] for row in conn.execute("SELECT data FROM events ORDER BY seq")]
        assert texts == [encode_data({"message": m.to_dict()}) for m in messages]
        assert returned == store.read("s")
        for event in returned:
            message = event.data["message"]
            message["extra"].clear()
            for call in message.get("tool_calls", []):
                call["extra"]["meta"]["ids"].append(3)
        assert list(session.messages()) == messages
        assert [event.message for event in store.read("s")] == messages
        assert list(store.session("s").messages()) == messages


def test_changing_an_edit_event_after_append_changes_neither_view_nor_log(tmp_path: Path) -> None:
    """The view folds its own copy of an edit's data, not the dicts the returned event holds:
    a caller that changes a compaction's ledger after the append changes nothing the session
    shows (the projection keeps that ledger as data), and the view equals a new process's
    read of the log."""
    ledger = {"version": 1, "commands": [{"run": "ls", "outcome": "ok"}], "files": ["a.py"]}
    with SQLiteStore(tmp_path / "events.db") as store:
        session = store.session("s")
        session.append([Message("user", "list the files"), Message("assistant", "a.py, b.py")])
        first, last = (item.id for item in session.items())
        summary = Message("user", "[summary: listed the files]", extra={"kept": {"ids": [1]}})
        compaction = Compaction(first, last, summary, ledger=ledger)
        (event,) = session.append(NewEvent.of(compaction))
        event.data["ledger"]["commands"][0]["outcome"] = "changed"
        event.data["ledger"]["files"].append("z.py")
        event.data["message"]["extra"]["kept"]["ids"].append(2)
        live, cold = session.items(), store.session("s").items()
    assert [(i.message, i.ledger) for i in live] == [(i.message, i.ledger) for i in cold]
    assert live[0].ledger == ledger and live[0].message.extra == {"kept": {"ids": [1]}}
