"""Typed event payloads: each reads what it writes, reads the first format, and names bad data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxfold.errors import InvalidInputError
from ctxfold.events import (
    PAYLOADS,
    Compaction,
    Event,
    IdentifierCounts,
    Mask,
    MaskedItem,
    NewEvent,
    Overflow,
    Payload,
    Pin,
    Reset,
    Retraction,
    Unpin,
    Usage,
)
from ctxfold.messages import Message

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "log_v1" / "events.jsonl"

EXAMPLES: list[Payload] = [
    Compaction(
        2,
        9,
        Message("user", "summary"),
        strategy="summarize",
        replaced=(2, 3, 9),
        covers=(2, 9),
        tokens_before=400,
        tokens_after=60,
        tier="turns",
        identifiers=IdentifierCounts(kept=3, added=1, left_out=("src/a.py",)),
        summarizer="gpt-4o-mini",
    ),
    Compaction(4, 7, Message("user", "note"), kind="note", dropped=4, turns=1),
    Compaction(4, 7, Message("assistant", "range"), strategy="callback", range=(3, 5)),
    Mask((MaskedItem(4, "[cleared]"), MaskedItem(6, "[cleared]")), "clear", tokens_saved=300),
    Retraction(12),
    Reset(),
    Pin((2, 3)),
    Unpin((3,)),
    Usage(10, 1234, completion_tokens=56, model="gpt-4o"),
    Usage(10, 1234),
    Overflow(11),
]


@pytest.mark.parametrize("payload", EXAMPLES, ids=lambda p: type(p).__name__)
def test_every_payload_reads_back_what_it_writes(payload: Payload) -> None:
    """from_data(to_data(p)) == p, through JSON, and an Event's payload is the same value."""
    data = json.loads(json.dumps(payload.to_data()))
    assert type(payload).from_data(data) == payload
    event = NewEvent.of(payload)
    assert Event("s", 1, event.type, event.data, 0.0).payload == payload


@pytest.mark.guarantee("old-logs-read")
def test_every_event_of_the_first_format_reads_as_a_payload() -> None:
    """Each event of the old log reads as its typed payload, and writing that payload back gives
    data that reads as the same payload (the old `"summarizer": null` is simply left out)."""
    rows = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()]
    kinds = set()
    for row in rows:
        event = Event("s", row["seq"], row["type"], row["data"], 0.0)
        payload = event.payload
        if row["type"] == "message" or row["type"].startswith("app/"):
            assert payload is None
            continue
        assert payload is not None, row
        kinds.add(type(payload).__name__)
        assert type(payload).from_data(payload.to_data()) == payload
        for key, value in payload.to_data().items():
            assert json.loads(json.dumps(row["data"][key])) == json.loads(json.dumps(value))
    assert kinds == {"Compaction", "Mask", "Usage", "Pin", "Unpin"}


@pytest.mark.parametrize(
    ("kind", "data", "says"),
    [
        ("compaction", {"first": "2", "last": 5, "message": {"role": "user"}}, "'first'"),
        ("compaction", {"first": True, "last": 5, "message": {"role": "user"}}, "'first'"),
        ("compaction", {"first": 2, "last": 5}, "'message'"),
        ("compaction", {"first": 2, "last": 5, "message": {"role": "x"}}, "unknown role"),
        ("compaction", {"first": 2, "last": 5, "message": {"role": "user"}, "covers": [1]}, "two"),
        ("mask", {"items": []}, "non-empty"),
        ("mask", {"items": [{"id": 4}]}, "integer id and text"),
        ("retraction", {}, "'id'"),
        ("pin", {"ids": "12"}, "list of item ids"),
        ("usage", {"after_seq": 3}, "'prompt_tokens'"),
        ("usage", {"after_seq": 3, "prompt_tokens": 1.5}, "must be int"),
    ],
)
def test_bad_payload_data_is_named(kind: str, data: dict[str, Any], says: str) -> None:
    """Data that does not fit its type raises InvalidInputError naming the key or value."""
    with pytest.raises(InvalidInputError, match=says):
        PAYLOADS[kind].from_data(data)
