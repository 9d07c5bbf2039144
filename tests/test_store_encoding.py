"""What a store writes for an event's data: the JSON `json.dumps` would write, made faster.

`encode_data` skips the encoder object `json.dumps` builds per call; these tests hold it to the
same text and the same refusals, so a log written by either reads the same and a retried keyed
append gets the same digest."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxfold.errors import InvalidInputError
from ctxfold.events import Event, FreshEvent, NewEvent
from ctxfold.storage import _fast_json, checks
from ctxfold.storage.checks import (
    StringsEvent,
    encode_batch,
    encode_data,
    fresh_event,
    stored_event,
    strings_event,
)

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


@given(st.dictionaries(st.text(), _values, max_size=6))
def test_the_text_is_what_json_dumps_writes(data: dict[str, Any]) -> None:
    """Any JSON object encodes to exactly the text json.dumps gives it (unicode kept as is)."""
    assert encode_data(data) == _dumps(data)


def test_tuples_and_non_string_keys_encode_as_json_dumps_does() -> None:
    """Tuples become lists and int, float, bool and None keys become strings, as in json.dumps."""
    data = {"t": (1, 2), 7: "a", 2.5: "b", True: "c", None: "d"}
    assert encode_data(data) == _dumps(data)


@pytest.mark.parametrize(
    "bad",
    [{"x": math.nan}, {"x": math.inf}, {"x": object()}, {"x": {1, 2}}, {(1, 2): "tuple key"}],
)
def test_what_json_dumps_refuses_is_refused_alike(bad: dict[Any, Any]) -> None:
    """NaN, infinity and objects JSON has no form for raise what json.dumps raises."""
    with pytest.raises((TypeError, ValueError)) as expected:
        _dumps(bad)
    with pytest.raises(expected.type):
        encode_data(bad)


# Mostly ASCII, with the characters where the ASCII and unicode encoders part: DEL, the first
# character past ASCII, controls, a backslash (and a "u" to follow it), a quote, and one
# outside the BMP.
_mixed_text = st.text(
    alphabet=st.characters(max_codepoint=0x7E)
    | st.sampled_from(["\x7f", "\x80", "\x00", "\x1b", "\n", "\\", "u", '"', "é", "\u2028", "😀"]),
    max_size=30,
)
_calls = st.lists(
    st.fixed_dictionaries({"id": _mixed_text, "name": _mixed_text, "arguments": _mixed_text}),
    max_size=3,
)
_message_data = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool"]), "content": st.none() | _mixed_text},
    optional={"tool_calls": _calls, "tool_call_id": _mixed_text, "name": _mixed_text},
)


@given(st.lists(_message_data, min_size=1, max_size=5))
def test_a_batch_of_messages_stores_what_json_dumps_writes(messages: list[dict[str, Any]]) -> None:
    """The messages a session appends are stored as the exact text json.dumps gives them, ASCII
    or not, so a log reads the same and a retried keyed append gets the same digest."""
    events = [FreshEvent("message", {"message": message}) for message in messages]
    batch = encode_batch("s", events)
    assert [e.data for e in batch.events] == [_dumps(e.data) for e in events]
    assert batch.digest == encode_batch("s", [NewEvent(e.type, e.data) for e in events]).digest


@given(_values)
def test_fresh_data_of_any_shape_stores_what_json_dumps_writes(value: Any) -> None:
    """Plain JSON data of any other shape appended as a FreshEvent is stored as json.dumps
    writes it too."""
    for data in ({"message": value}, {"other": value}, {"message": {"content": value}}):
        (encoded,) = encode_batch("s", [FreshEvent("app/x", data)], digest=False).events
        assert encoded.data == _dumps(data)


def test_an_event_a_store_makes_is_the_event_its_constructor_makes() -> None:
    """The events a store returns are `Event` values in every way: equal, hashed, shown,
    replaced and frozen as the constructor's are."""
    made = stored_event("s", 3, "turn", {"n": 1}, 12.5)
    built = Event("s", 3, "turn", {"n": 1}, 12.5)
    assert made == built and repr(made) == repr(built) and vars(made) == vars(built)
    assert dataclasses.replace(made, seq=4) == Event("s", 4, "turn", {"n": 1}, 12.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.seq = 5  # type: ignore[misc]
    plain = stored_event("s", 1, "turn", (), 0.0)
    assert hash(plain) == hash(Event("s", 1, "turn", (), 0.0))


def test_a_fresh_event_the_session_makes_is_the_event_its_constructor_makes() -> None:
    """The `FreshEvent` a session builds for an appended message with `extra` is the value the
    constructor builds: equal, shown, replaced and frozen alike."""
    made = fresh_event("message", {"message": {"role": "user", "content": "hi"}})
    built = FreshEvent("message", {"message": {"role": "user", "content": "hi"}})
    assert made == built and repr(made) == repr(built) and vars(made) == vars(built)
    assert type(made) is FreshEvent
    assert dataclasses.replace(made, type="turn") == FreshEvent("turn", made.data)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.type = "turn"  # type: ignore[misc]


# Text that reaches every escape, a lone surrogate (which no store keeps) included.
_any_text = st.text(
    alphabet=st.characters(max_codepoint=0x7E)
    | st.characters(min_codepoint=0, max_codepoint=0x10FFFF)
    | st.sampled_from(
        ["\x7f", "\x80", "\x9f", "\x00", "\\", '"', "/", "\u2028", "\ud800", "\udfff"]
    ),
    max_size=30,
)
_strings_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool"]), "content": st.none() | _any_text},
    optional={
        "tool_calls": st.lists(
            st.fixed_dictionaries({"id": _any_text, "name": _any_text, "arguments": _any_text}),
            max_size=3,
        ),
        "tool_call_id": _any_text,
        "name": _any_text,
    },
)


def _stored(events: list[Any]) -> tuple[list[str], str] | str:
    """The texts and digest a batch is stored as, or the error that refuses it."""
    try:
        batch = encode_batch("s", events)
    except InvalidInputError as exc:
        return str(exc)
    return [e.data for e in batch.events], batch.digest


@given(st.lists(_strings_message, min_size=1, max_size=4))
def test_a_message_with_no_float_stores_the_same_bytes_whichever_encoder_writes_it(
    messages: list[dict[str, Any]],
) -> None:
    """A `StringsEvent` (a session's message without extra) is stored as the standard encoder
    stores it, with orjson or without, and a batch one of them refuses (a lone surrogate) is
    refused alike, with the same message."""
    as_strings = [strings_event("message", {"message": m}) for m in messages]
    as_fresh = [FreshEvent("message", {"message": m}) for m in messages]
    expected = _stored(as_fresh)
    assert _stored(as_strings) == expected
    kept = checks._STRINGS
    checks._STRINGS = None  # as without orjson (a fixture cannot be reset between examples)
    try:
        assert _stored(as_strings) == expected
    finally:
        checks._STRINGS = kept
    if not isinstance(expected, str):
        assert expected[0] == [_dumps({"message": m}) for m in messages]


def test_orjson_writes_the_messages_when_it_is_installed() -> None:
    """With the fast extra (the test extra has it), the strings encoder is orjson's."""
    orjson = pytest.importorskip("orjson")
    assert checks._STRINGS is not None
    data = {"message": {"role": "user", "content": "é\x00\u2028😀"}}
    assert checks._STRINGS(data) == orjson.dumps(data).decode() == _dumps(data)


def test_a_number_orjson_cannot_write_falls_back_to_the_standard_encoder() -> None:
    """orjson refuses integers past 64 bits; the standard encoder writes them."""
    data = {"message": {"role": "user", "content": "x", "n": 2**70}}
    (encoded,) = encode_batch("s", [strings_event("message", data)], digest=False).events
    assert encoded.data == _dumps(data)


def test_without_orjson_or_when_it_writes_otherwise_the_standard_encoder_is_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No orjson, or an orjson that escapes one probe character otherwise: no fast encoder."""
    pytest.importorskip("orjson")
    import sys

    import orjson

    assert _fast_json.text_encoder(encode_data) is not None
    real = orjson.dumps
    # As if a later orjson escaped the line separator, which the stored form keeps as it is.
    monkeypatch.setattr(orjson, "dumps", lambda data: real(data).replace("\u2028".encode(), b"x"))
    assert _fast_json.text_encoder(encode_data) is None
    monkeypatch.setattr(orjson, "dumps", real)
    monkeypatch.setitem(sys.modules, "orjson", None)  # import raises ImportError
    assert _fast_json.text_encoder(encode_data) is None


def test_a_strings_event_is_a_fresh_event_built_as_its_constructor_builds_it() -> None:
    made = strings_event("message", {"message": {"role": "user", "content": "hi"}})
    built = StringsEvent("message", {"message": {"role": "user", "content": "hi"}})
    assert made == built and repr(made) == repr(built) and vars(made) == vars(built)
    assert isinstance(made, FreshEvent) and type(made) is StringsEvent
