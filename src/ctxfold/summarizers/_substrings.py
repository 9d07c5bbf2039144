"""Which strings of a fixed set each of many texts holds verbatim, in one pass over the texts.

The extractive summarizer asks, of every identifier of a stretch, whether a higher-ranked
identifier or a line of the summary holds it. Asked one identifier at a time (``needle in
text``), that reads the texts once per identifier: quadratic in the stretch, which a single
message of a few megabytes makes minutes. `SubstringIndex` answers for all of them at once:
each needle is filed under one of its grams (`GRAM` characters), the one least common among
the needles, and a text is read once, gram by gram; needles are compared only where their gram
stands. The answer is what ``needle in text`` says for every pair; the gram only decides how few
comparisons it takes.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterator, Sequence
from itertools import compress, count

GRAM = 4
"""Characters per gram. Needles shorter than this are looked for whole, one pass over the
texts per length."""
DIRECT = 1_000_000
"""Up to this many needles times characters of text, `SubstringIndex.holding` looks for each
needle with `str.find`."""


class SubstringIndex:
    """The needles each text holds: ``holding(texts)[t]`` is ``{i for i, needle in
    enumerate(needles) if needle in texts[t]}``, found in a pass over the texts rather than one
    per needle. Below `direct` needles times characters of the texts, each needle is looked for
    on its own instead (`DIRECT`): for a few short texts that costs less than filing them.

    >>> index = SubstringIndex(["src/a.py", "a.py", "#12", "docs/b.md", ""])
    >>> index.holding(["python src/a.py", "see #123 and docs/b.md", ""])
    [{0, 1, 4}, {2, 3, 4}, {4}]
    """

    def __init__(self, needles: Sequence[str], *, direct: int = DIRECT) -> None:
        self.needles = tuple(needles)
        self.direct = direct
        self._everywhere = [i for i, needle in enumerate(self.needles) if not needle]
        self._by_gram: dict[tuple[str, ...], dict[tuple[int, int], dict[str, list[int]]]] = {}
        self._short: dict[int, dict[tuple[str, ...], list[int]]] = {}
        self._filed = False

    def _file(self) -> None:
        """File each needle under its rarest gram (made the first time a pass needs them)."""
        joined = "\0".join(self.needles)
        # How common each gram is among the needles, and so how many positions of a text
        # would compare a needle filed under it.
        common = Counter(map("".join, _grams(joined, GRAM)))
        weights = list(map(common.__getitem__, map("".join, _grams(joined, GRAM))))
        # Filed with the needles that have that gram at the same offset and are as long: at a
        # position where the gram stands, one slice of the text and one lookup compare all of
        # them.
        start = 0
        for index, needle in enumerate(self.needles):
            size = len(needle)
            if size >= GRAM:
                at = min(range(start, start + size - GRAM + 1), key=weights.__getitem__)
                same = self._by_gram.setdefault(tuple(joined[at : at + GRAM]), {})
                same.setdefault((at - start, size), {}).setdefault(needle, []).append(index)
            elif size:
                self._short.setdefault(size, {}).setdefault(tuple(needle), []).append(index)
            start += size + 1
        self._filed = True

    def holding(self, texts: Sequence[str]) -> list[set[int]]:
        """For each of `texts`, the indices of the needles it holds verbatim."""
        found: list[set[int]] = [set(self._everywhere) for _ in texts]
        if not texts:
            return found
        # The texts joined into one, so that each pass below is one loop in C over all of them;
        # a match counts only where it lies within one text.
        joined = "\0".join(texts)
        starts: list[int] = []
        ends: list[int] = []
        position = 0
        for text in texts:
            starts.append(position)
            position += len(text)
            ends.append(position)
            position += 1
        where = bisect.bisect_right
        if len(self.needles) * len(joined) <= self.direct:
            # Few needles, or little text: one `str.find` pass per needle costs less than
            # filing them.
            for index, needle in enumerate(self.needles):
                at = joined.find(needle) if needle else -1
                while at >= 0:
                    owner = where(starts, at) - 1
                    if at + len(needle) <= ends[owner]:
                        found[owner].add(index)
                    at = joined.find(needle, at + 1)
            return found
        if not self._filed:
            self._file()
        by_gram = self._by_gram
        grams = _grams(joined, GRAM) if by_gram else iter(())
        for at in compress(count(), map(by_gram.__contains__, grams)):
            for (offset, size), same in by_gram[tuple(joined[at : at + GRAM])].items():
                start = at - offset
                indices = same.get(joined[start : start + size]) if start >= 0 else None
                if indices is not None:
                    owner = where(starts, start) - 1
                    if start + size <= ends[owner]:
                        found[owner].update(indices)
        for size, wanted in self._short.items():
            for at in compress(count(), map(wanted.__contains__, _grams(joined, size))):
                owner = where(starts, at) - 1
                if at + size <= ends[owner]:
                    found[owner].update(wanted[tuple(joined[at : at + size])])
        return found


def _grams(text: str, size: int) -> Iterator[tuple[str, ...]]:
    """The `size` characters at each position of `text` (as far as `size` fit), in order."""
    return zip(*(text[j:] for j in range(size)), strict=False)
