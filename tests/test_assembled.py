"""`ctxfold._assembled`: values made with their fields set at once are the constructor's values."""

from __future__ import annotations

import dataclasses

import pytest

from ctxfold._assembled import assembled
from ctxfold.events import Event, FreshEvent
from ctxfold.messages import Message
from ctxfold.replay.run import Request, _request
from ctxfold.session.projection import Item, original_item
from ctxfold.storage.checks import StringsEvent, fresh_event, stored_event, strings_event

# Every class ctxfold builds with `assembled`: its `__init__` must do nothing but set fields
# (FreshEvent's __post_init__ checks the type, which the callers of `fresh_event` and
# `strings_event` know is valid).
ASSEMBLED = (Event, FreshEvent, StringsEvent, Item, Request)


@pytest.mark.parametrize("cls", ASSEMBLED, ids=lambda c: c.__name__)
def test_each_class_has_an_init_that_only_sets_fields(cls: type) -> None:
    # A new __post_init__ would be skipped, and slots leave no __dict__ to set.
    assert dataclasses.is_dataclass(cls)
    assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert cls in (FreshEvent, StringsEvent) or not hasattr(cls, "__post_init__")
    assert "__slots__" not in cls.__dict__


def test_the_fields_an_original_item_leaves_out_have_plain_defaults() -> None:
    # `original_item` sets three fields; the rest must be readable from the class.
    for f in dataclasses.fields(Item):
        if f.name not in ("id", "message", "key"):
            assert f.default is not dataclasses.MISSING, f.name


def test_the_builders_equal_the_constructors() -> None:
    message = Message("user", "hello")
    assert stored_event("s", 3, "message", {"a": 1}, 1.5) == Event("s", 3, "message", {"a": 1}, 1.5)
    assert fresh_event("message", {"a": 1}) == FreshEvent("message", {"a": 1})
    assert strings_event("message", {"a": 1}) == StringsEvent("message", {"a": 1})
    item = original_item(7, message)
    assert item == Item(7, message, "message", 7)
    assert repr(item) == repr(Item(7, message, "message", 7))
    fields = dict(
        turn=1, message=2, tokens_before=3, tokens=4, request_tokens=5, prefix_tokens=6,
        compaction=None,
    )  # fmt: skip
    assert _request(**fields) == Request(**fields)  # type: ignore[arg-type]


def test_left_out_fields_read_their_defaults_and_the_value_stays_frozen() -> None:
    message = Message("user", "hello")
    item = assembled(Item, {"id": 1, "message": message, "key": 1})
    assert item.kind == "message" and item.covers is None and item.ledger is None
    assert dataclasses.replace(item, kind="summary") == Item(1, message, "summary", 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        item.id = 2  # type: ignore[misc]
