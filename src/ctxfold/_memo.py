"""Bounded memos that let the compaction pipeline do each piece of work once however many
compactions ask for it again: `IdentityMemo` by the identity of immutable objects (a message's
identifiers, its redacted copy, its work ledger), `LineMemo` by line (what a line-local scan
found in each line of the summaries and ledgers that repeat one another's lines).

In the lowest layer, beside the error tree: the session's checkpoints use them as well as the
summarizers and the pipeline, and they depend on nothing of ctxfold."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from operator import is_
from typing import Generic, TypeVar, cast

T = TypeVar("T")


class IdentityMemo(Generic[T]):
    """The last `maxsize` values made from some objects, keyed by the objects' identity (a
    message may hold an unhashable `extra` dict) and a hashable `tag`.

    Each entry keeps a reference to its objects, so their ids cannot be reused while it lives.
    The objects must be immutable (frozen messages, recorded data never edited), so an entry
    never goes stale. Compactors may run in several threads: one lock.
    """

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._entries: OrderedDict[Hashable, tuple[tuple[object, ...], T]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, objects: tuple[object, ...], make: Callable[[], T], tag: Hashable = None) -> T:
        """The value remembered for `objects` and `tag`, else `make()`, remembered."""
        # Looked up for every message of every stretch: the ids and the identity check made
        # by C-level maps (an equal key holds as many ids as `objects` has).
        key = (tuple(map(id, objects)), tag)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and all(map(is_, entry[0], objects)):
                self._entries.move_to_end(key)
                return entry[1]
        made = make()
        with self._lock:
            self._entries[key] = (objects, made)
            if len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
        return made

    def holds(self, objects: tuple[object, ...], tag: Hashable = None) -> bool:
        """Whether a value is remembered for `objects` and `tag` (`get` would not make one)."""
        with self._lock:
            entry = self._entries.get((tuple(map(id, objects)), tag))
        return entry is not None and all(map(is_, entry[0], objects))


class LineMemo(Generic[T]):
    """The per-line values of a line-local pass over text, remembered by line.

    `batch` takes lines and returns one value per line: what the pass makes of each, where the
    value of a line never depends on the lines around it (every pattern of the pass matches
    within one line), so any lines may be passed together. Lines recur (a summary repeats most
    lines of the ones before it, a ledger its entries), so `values` passes over the lines not
    seen before only, all of a text's together in one `batch` call (each once), since one pass
    over many lines costs less than many passes over one each.

    Bounded: at `maxsize` lines the memo starts afresh (costing one more pass over each line
    met again), and lines longer than `max_line_chars` (a minified file, a data dump) are
    passed over every time rather than kept. Lines are strings, so entries never go stale.
    """

    def __init__(
        self,
        batch: Callable[[list[str]], Sequence[T]],
        maxsize: int = 65_536,
        max_line_chars: int = 2_000,
    ) -> None:
        self.batch = batch
        self.maxsize = maxsize
        self.max_line_chars = max_line_chars
        self._lines: dict[str, T] = {}

    def values(self, text: str) -> list[T]:
        """The value of each line of `text` (split at "\\n"), in order; `[]` for "".

        Should `batch` ever return another number of values than lines, its values are used as
        they are and none is remembered."""
        if not text:
            return []
        known = self._lines.get
        if "\n" not in text:
            found = known(text)
            return [found] if found is not None else self._pass([text])
        lines = text.split("\n")
        seen = [known(line) for line in lines]
        new = list(dict.fromkeys(line for line, value in zip(lines, seen, strict=True)
                                 if value is None))  # fmt: skip
        if not new:
            return cast(list[T], seen)  # none missing
        made = self._pass(new)
        if len(made) != len(new):
            return made if new == lines else self._runs(lines)
        fresh = dict(zip(new, made, strict=True))
        return [fresh[line] if value is None else value
                for line, value in zip(lines, seen, strict=True)]  # fmt: skip

    def _runs(self, lines: list[str]) -> list[T]:
        """The values of `lines`, each run of new ones passed over on its own and its values
        used as they are: for a `batch` that gives another number of values than lines."""
        known = self._lines.get
        out: list[T] = []
        pending: list[str] = []
        for line in lines:
            found = known(line)
            if found is None:
                pending.append(line)
                continue
            if pending:
                out += self._pass(pending)
                pending = []
            out.append(found)
        if pending:
            out += self._pass(pending)
        return out

    def learn(self, texts: Iterable[str]) -> None:
        """Pass over the lines of `texts` not seen before, all in one `batch` call, and remember
        their values: for a caller about to ask for the values of many short texts one by one
        (the messages of a stretch), where one pass over all their new lines costs less than
        one pass over the new lines of each. A line's value never depends on the lines around
        it, so lines from different texts may be passed together. Lines too long to keep are
        left for `values` to pass over, which it does every time."""
        known = self._lines
        longest = self.max_line_chars
        pending = {
            line: None
            for text in texts
            for line in text.split("\n")
            if len(line) <= longest and line not in known
        }
        if pending:
            self._pass(list(pending))

    def _pass(self, lines: list[str]) -> list[T]:
        made = list(self.batch(lines))
        if len(made) != len(lines):
            return made
        memo = self._lines
        for line, value in zip(lines, made, strict=True):
            if len(line) <= self.max_line_chars:
                if len(memo) >= self.maxsize:
                    memo.clear()
                memo[line] = value
        return made
