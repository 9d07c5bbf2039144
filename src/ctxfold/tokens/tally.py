"""Running token totals: what a session pays per append is one message count, not a recount.

`Tally` keeps one count per item (an item's id is the seq of the event that put it in the
projection) and a running sum, so adding, removing or replacing an item and reading the
estimate are O(1) whatever the length of the history.

Usage anchoring: after a request, the provider reports how many prompt tokens it actually read.
`Tally.anchor` records that figure for everything currently in the tally; from then on the
estimate is that figure plus the counts of what was added since, which is exact up to the new
messages even when the counter is only a heuristic. An edit that changes anchored items (a
compaction, a mask) makes the figure stale, so it is dropped and the estimate counts afresh
until the next report (`usage-anchor-dropped-after-edit`).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from ctxfold.errors import InvalidInputError
from ctxfold.messages import Message
from ctxfold.protocols import TokenCounter
from ctxfold.tokens._evict import evict_oldest

REPLY_PRIMING_TOKENS = 3
"""Tokens OpenAI's chat format adds once per request to prime the reply (``<|start|>assistant``).

Counted once per non-empty request by `count_messages` and `Tally.total`, for every counter:
other providers frame messages differently, but a few tokens of slack is the safe direction.
"""


def count_messages(
    counter: TokenCounter,
    messages: Iterable[Message],
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> int:
    """Tokens of a whole request: each message, the tool schemas (`tool-schemas-counted`), and the
    reply priming.

    This recounts everything; wrap the counter with `cached` to make repeated recounts of the
    same message objects cheap, or keep a `Tally` when the history only grows at the end.
    """
    tokens = 0
    any_message = False
    for message in messages:
        tokens += counter.count_message(message)
        any_message = True
    if any_message:
        tokens += REPLY_PRIMING_TOKENS
    if tools:
        tokens += counter.count_tools(tools)
    return tokens


class CachedCounter:
    """A counter that remembers the counts of the last `maxsize` message objects it saw.

    Keyed by object identity: messages are frozen but may hold unhashable `extra` dicts, so they
    cannot be dictionary keys by value. Each entry keeps a reference to its message, which stops
    Python from reusing that object's id for another message while the entry lives.
    """

    def __init__(self, counter: TokenCounter, maxsize: int = 65_536) -> None:
        if maxsize <= 0:
            raise InvalidInputError(f"maxsize must be positive, not {maxsize}")
        self.inner = counter
        self.name = counter.name
        self.exact = counter.exact
        self.maxsize = maxsize
        self._entries: OrderedDict[int, tuple[Message, int]] = OrderedDict()

    def count_text(self, text: str) -> int:
        """The inner counter's count (texts are not cached: they are cheap to recount or rare)."""
        return self.inner.count_text(text)

    def count_message(self, message: Message) -> int:
        """The inner counter's count, computed once per message object."""
        key = id(message)
        entry = self._entries.get(key)
        if entry is not None and entry[0] is message:
            self._entries.move_to_end(key)
            return entry[1]
        tokens = self.inner.count_message(message)
        self._entries[key] = (message, tokens)
        if len(self._entries) > self.maxsize:
            self._entries.popitem(last=False)
        return tokens

    def count_tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """The inner counter's count of the tool schemas."""
        return self.inner.count_tools(tools)

    def __repr__(self) -> str:
        return f"CachedCounter({self.inner!r}, maxsize={self.maxsize})"


_LINE_END = re.compile(r"\n(?=[!-.0-~])")
"""A newline before a printable ASCII character other than "/". (Matched as the newline, which
each piece but the last gets back: a pattern that matches only the position after it, with a
look-behind, is tried at every character and took two and a half times as long.)"""


def split_lines(text: str) -> list[str]:
    r"""`text` cut just after each newline that a printable ASCII character other than "/"
    follows: pieces whose o200k_base and cl100k_base counts add up to the count of the text.

    Both tokenizers split text with a pattern before merging tokens, and merge only inside a
    piece of that split. No piece of either pattern runs on past such a position: words and
    digits never hold a newline; a run of punctuation takes the newlines after it (and, in
    o200k, slashes), then stops; a run of whitespace that holds a newline ends at its last
    newline, whatever follows (o200k's ``\s*[\r\n]+``, cl100k's ``\s*[\r\n]``, and at the
    end of a piece cl100k's ``\s++$`` takes the same run). So the text splits there and each
    side splits as it does alone. `tests/test_count_engine.py` checks the sums against whole
    counts on an edge corpus and the shared transcripts.

    >>> split_lines("## Work\n- ran tests\n/tmp/x\n\n## Next")
    ['## Work\n', '- ran tests\n/tmp/x\n\n', '## Next']
    """
    pieces = _LINE_END.split(text)
    last = pieces.pop()
    pieces = [piece + "\n" for piece in pieces]
    pieces.append(last)
    return pieces


class TextCounts:
    """`counter.count_text`, remembering the counts of the last texts it counted, up to
    `max_chars` characters of them in all (the oldest go first). Callable like ``count_text``.

    A compactor counts the same texts again from run to run: ledger lines and sections, the
    summaries it reads back, the lines its summarizer weighs. The count of a text never
    changes, so it is kept rather than made again. Safe from several threads.

    >>> from ctxfold.tokens import HeuristicCounter
    >>> count = TextCounts(HeuristicCounter())
    >>> count("hello world") == HeuristicCounter().count_text("hello world")
    True
    """

    def __init__(self, counter: TokenCounter, max_chars: int = 4_000_000) -> None:
        self.counter = counter
        self.max_chars = max_chars
        self._counts: dict[str, int] = {}
        self._chars = 0
        self._lock = threading.Lock()

    def lines(self, text: str) -> int:
        """The count of `text`, made from the remembered counts of its lines.

        For a draft that is weighed, cut and weighed again (a summary fitted to its budget): a
        new draft is mostly lines counted before, so only its new lines are counted. Exact for
        a counter that declares ``line_additive`` (`TiktokenCounter`: see `split_lines`); for
        any other counter, the count of the whole text.
        """
        if not getattr(self.counter, "line_additive", False):
            return self(text)
        counts = self._counts
        tokens = counts.get(text)
        if tokens is not None:
            return tokens
        pieces = split_lines(text)
        # Looked up in one pass in C: most pieces were counted before, and a call per piece
        # cost more than the lookups. A piece not remembered is counted (and kept) on its own.
        known = list(map(counts.get, pieces))
        if None not in known:
            return sum(cast("list[int]", known))
        return sum(
            self(piece) if found is None else found
            for piece, found in zip(pieces, known, strict=True)
        )

    def __call__(self, text: str) -> int:
        tokens = self._counts.get(text)
        if tokens is not None:
            return tokens
        tokens = self.counter.count_text(text)
        if len(text) <= self.max_chars:
            with self._lock:
                if text not in self._counts:
                    self._counts[text] = tokens
                    self._chars += len(text)
                    if self._chars > self.max_chars:
                        self._chars = evict_oldest(self._counts, self._chars, self.max_chars)
        return tokens


def cached(counter: TokenCounter, maxsize: int = 65_536) -> CachedCounter:
    """`counter` with a per-message-object cache of `maxsize` entries (least recently used out).

    >>> from ctxfold.tokens import HeuristicCounter
    >>> c = cached(HeuristicCounter())
    >>> m = Message("user", "hello")
    >>> c.count_message(m) == c.count_message(m)
    True
    """
    return CachedCounter(counter, maxsize)


class Tally:
    """Per-item token counts and their running total, with an optional provider-usage anchor.

    >>> from ctxfold.tokens import HeuristicCounter
    >>> tally = Tally(HeuristicCounter())
    >>> tally.add(1, Message("user", "list the files in src/"))
    10
    >>> tally.anchor(31)               # the provider read 31 prompt tokens
    >>> tally.add(2, Message("assistant", "src/app.py"))
    7
    >>> tally.estimate                 # 31 reported + 7 counted since
    38
    """

    def __init__(
        self, counter: TokenCounter, tools: Sequence[Mapping[str, Any]] | None = None
    ) -> None:
        self.counter = counter
        self._counts: dict[int, int] = {}
        self._sum = 0
        self._tools = counter.count_tools(tools) if tools else 0
        self._anchor: int | None = None
        self._since: dict[int, int] = {}
        self._since_sum = 0

    def add(self, item_id: int, message: Message, *, tokens: int | None = None) -> int:
        """Count a new item and return its tokens. An id already in the tally is an error.

        `tokens`, when given, is the message's count by a counter of this tally's counter's
        name, made earlier (a compaction records it): it is taken as is, not counted again."""
        if item_id in self._counts:
            raise InvalidInputError(
                f"item {item_id} is already in the tally; use replace() to change it"
            )
        if tokens is None:
            tokens = self.counter.count_message(message)
        self._counts[item_id] = tokens
        self._sum += tokens
        if self._anchor is not None:
            self._since[item_id] = tokens
            self._since_sum += tokens
        return tokens

    def add_counts(self, counts: Mapping[int, int]) -> None:
        """Add items by id with their counts, made earlier by a counter of this tally's
        counter's name: `add` with `tokens` given, for many items in one call (a checkpoint
        records the counts of a whole projection). An id already in the tally is an error, and
        then nothing is added."""
        if not self._counts.keys().isdisjoint(counts):
            taken = next(i for i in counts if i in self._counts)
            raise InvalidInputError(
                f"item {taken} is already in the tally; use replace() to change it"
            )
        added = sum(counts.values())
        self._counts.update(counts)
        self._sum += added
        if self._anchor is not None:
            self._since.update(counts)
            self._since_sum += added

    def remove(self, item_id: int) -> int:
        """Forget an item and return the tokens it had.

        Removing an item the anchor covered drops the anchor: the reported figure included it.
        """
        tokens = self._take(item_id)
        self._sum -= tokens
        if item_id in self._since:
            self._since_sum -= self._since.pop(item_id)
        elif self._anchor is not None:
            self.drop_anchor()
        return tokens

    def replace(self, item_id: int, message: Message) -> int:
        """Recount an item whose message changed (a masked tool result); returns its new count."""
        self.remove(item_id)
        return self.add(item_id, message)

    def count(self, item_id: int) -> int:
        """The cached count of one item."""
        try:
            return self._counts[item_id]
        except KeyError:
            raise InvalidInputError(f"item {item_id} is not in the tally") from None

    def set_tools(self, tools: Sequence[Mapping[str, Any]] | None) -> None:
        """Count these tool schemas with every request from now on (`tool-schemas-counted`); drops
        the anchor."""
        self._tools = self.counter.count_tools(tools) if tools else 0
        self.drop_anchor()

    def __len__(self) -> int:
        return len(self._counts)

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._counts

    @property
    def items_total(self) -> int:
        """Counted tokens of the items alone: `total` without the tools and the reply priming.
        O(1), a running sum."""
        return self._sum

    @property
    def total(self) -> int:
        """Counted tokens of the whole request: every item, the tools, and the reply priming."""
        priming = REPLY_PRIMING_TOKENS if self._counts else 0
        return self._sum + self._tools + priming

    def anchor(self, prompt_tokens: int) -> None:
        """Record the provider-reported prompt tokens of a request holding exactly these items."""
        if prompt_tokens < 0:
            raise InvalidInputError(f"prompt_tokens must be 0 or more, not {prompt_tokens}")
        self._anchor = prompt_tokens
        self._since.clear()
        self._since_sum = 0

    def drop_anchor(self) -> None:
        """Forget the reported figure; `estimate` is `total` until the next `anchor`
        (`usage-anchor-dropped-after-edit`)."""
        self._anchor = None
        self._since.clear()
        self._since_sum = 0

    @property
    def anchored(self) -> bool:
        """True while a provider-reported figure backs the estimate."""
        return self._anchor is not None

    @property
    def estimate(self) -> int:
        """Reported prompt tokens plus what was added since, when anchored; else `total`."""
        if self._anchor is None:
            return self.total
        return self._anchor + self._since_sum

    def _take(self, item_id: int) -> int:
        if item_id not in self._counts:
            raise InvalidInputError(f"item {item_id} is not in the tally")
        return self._counts.pop(item_id)

    def __repr__(self) -> str:
        return (
            f"Tally(items={len(self._counts)}, total={self.total}, "
            f"anchored={self.anchored}, estimate={self.estimate})"
        )
