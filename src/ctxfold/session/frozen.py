"""Read-only views of a projection that cost O(1) to hand out.

`Session.messages()` and `Session.items()` are called before every model request. Copying the
projection each time costs O(n): at 100,000 items that was most of an agent's turn. Instead the
projection keeps its lists under one rule, and hands out `Frozen` views of them:

- a list only ever grows at its end in place (an appended message);
- every other change (a compaction, a mask, a retraction, a reset) builds a new list and leaves
  the old one alone.

So the first `n` entries of a list never change once a view of them exists, and a view is just
(list, start, stop): taking one is O(1), and it keeps showing exactly what the projection held
when it was taken, whatever happens afterwards. The price is one list copy per edit, which is
no more than the edit itself costs.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any, TypeVar, overload

from ctxfold.errors import ConfigurationError, PositionError
from ctxfold.messages._show import show

T = TypeVar("T")


class Frozen(Sequence[T]):
    """An immutable sequence: the entries `start` … `stop - 1` of a list that never changes them.

    It is a `collections.abc.Sequence` (indexing, slicing, `len`, iteration, `in`, `index`,
    `count`, `reversed`), not a list: it has no `append` or item assignment. Copy it
    (``list(view)``) to get something to change. It compares equal to a list, a tuple or another
    view holding the same entries, in order, so ``session.messages() == [...]`` reads as before.

    >>> view = Frozen(["a", "b", "c"], 0, 2)
    >>> len(view), view[-1], list(view[1:]), view == ["a", "b"]
    (2, 'b', ['b'], True)
    """

    __slots__ = ("_data", "_start", "_stop")

    def __init__(self, data: list[T], start: int, stop: int) -> None:
        self._data = data
        self._start = start
        self._stop = stop

    def __len__(self) -> int:
        return self._stop - self._start

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> Frozen[T]: ...

    def __getitem__(self, index: int | slice) -> T | Frozen[T]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                picked = list(self)[index]
                return Frozen(picked, 0, len(picked))
            stop = max(start, stop)
            return Frozen(self._data, self._start + start, self._start + stop)
        if type(index) is not int:
            index = _position(index)
        size = len(self)
        position = index + size if index < 0 else index
        if not 0 <= position < size:
            # An IndexError, as the sequence protocol needs: `Sequence.index` stops at one.
            raise PositionError(_out_of_range(index, size))
        return self._data[self._start + position]

    def __iter__(self) -> Iterator[T]:
        # Bounded by `stop`, never by the list's length: the list may have grown since.
        return islice(self._data, self._start, self._stop)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Frozen):
            if other._data is self._data and other._start == self._start:
                return other._stop == self._stop
        elif not isinstance(other, (list, tuple)):
            return NotImplemented
        if len(other) != len(self):
            return False
        return all(a is b or a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # equal to lists, which are unhashable

    def __repr__(self) -> str:
        return f"Frozen({list(self)!r})"

    def extends(self, other: Sequence[Any]) -> bool:
        """True when this view begins with every entry of `other`, a view taken earlier of the
        same projection with nothing but appends in between: O(1) then, else a comparison."""
        if isinstance(other, Frozen) and other._data is self._data:
            return other._start == self._start and other._stop <= self._stop
        if len(other) > len(self):
            return False
        return all(a is b or a == b for a, b in zip(self, other, strict=False))


def _position(index: object) -> int:
    """`index` as a position: any integer (a bool, a NumPy integer) as a list takes it; anything
    else is refused with a `TypeError`, as a list refuses it, that is a ctxfold error too."""
    try:
        return operator.index(index)  # type: ignore[arg-type]
    except TypeError:
        raise ConfigurationError(
            f"a view of the projection is indexed by a whole number or a slice, not "
            f"{type(index).__name__} {show(index)}"
        ) from None


def _out_of_range(index: int, size: int) -> str:
    entries = "1 entry" if size == 1 else f"{size} entries"
    if not size:
        return f"position {index} is out of range for {entries}: the view is empty"
    return f"position {index} is out of range for {entries} (positions {-size} to {size - 1})"


def frozen(data: list[T]) -> Frozen[T]:
    """A view of the whole of `data`, which the caller promises to change only by appending."""
    return Frozen(data, 0, len(data))


__all__ = ["Frozen", "frozen"]
