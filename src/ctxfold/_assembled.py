"""Frozen dataclass values made with all their fields set in one step.

ctxfold makes some values by the hundred thousand: the events a cold start reads, the items of
the projection it folds, a replay's requests. A frozen dataclass's generated `__init__` sets each
field through `object.__setattr__`, one call per field: for these small values, a large share of
what making one costs (about a third, for an event). `assembled` sets the instance's `__dict__`
at once.

It skips `__post_init__`, so it is only for classes that have none, or where what it checks is
known to hold (`FreshEvent` checks its type, and `fresh_event` passes the session's own); and not
for `slots=True` classes, which have no `__dict__`. Each use is held to the constructor's value
by a test (tests/test_assembled.py).
"""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")

_new = object.__new__
_set = object.__setattr__


def assembled(cls: type[T], fields: dict[str, Any]) -> T:
    """``cls(**fields)`` for a frozen dataclass `cls` whose `__init__` only sets fields.

    A field left out of `fields` reads its default from the class, where `dataclass` keeps every
    plain default (so a field with a `default_factory` must be given); equality, hashing, `repr`
    and `dataclasses.replace` read fields by attribute, so the value is the same as the
    constructor's. `fields` becomes the instance's own dict: pass a new one."""
    value = _new(cls)
    _set(value, "__dict__", fields)
    return value
