"""What a store writes for an event's data: the JSON `json.dumps` would write, made faster.

`encode_data` skips the encoder object `json.dumps` builds per call; these tests hold it to the
same text and the same refusals, so a log written by either reads the same and a retried keyed
append gets the same digest."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxfold.storage.checks import encode_data

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
