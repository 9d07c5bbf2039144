"""`count_text` of something that is not a string is a clear `InvalidInputError` naming it, on
every counter, rather than a TypeError from inside a tokenizer."""

from __future__ import annotations

import pytest

from ctxfold.errors import InvalidInputError
from ctxfold.messages import Message
from ctxfold.tokens import counter


@pytest.mark.parametrize("name", ["auto", "heuristic"])
@pytest.mark.parametrize(
    ("value", "named"),
    [(None, "NoneType"), (42, "int"), (b"bytes", "bytes"), (["a"], "list"), ({"a": 1}, "dict")],
)
def test_a_value_that_is_not_text_is_named(name: str, value: object, named: str) -> None:
    with pytest.raises(InvalidInputError, match=f"count_text takes a str, not {named}: "):
        counter(name).count_text(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["auto", "heuristic"])
def test_a_message_is_pointed_to_count_message(name: str) -> None:
    with pytest.raises(InvalidInputError, match="count a Message with count_message"):
        counter(name).count_text(Message("user", "hi"))  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["auto", "heuristic"])
def test_text_still_counts(name: str) -> None:
    made = counter(name)
    long = "word " * 2_000  # long enough to be remembered by the exact counter
    assert made.count_text("") == 0
    assert made.count_text(long) == made.count_text(long) > 0
