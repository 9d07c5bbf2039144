"""Recall: the original messages a session's view no longer shows, by ref or by search.

`Recaller` is one session's recall: it folds the log (`OutOfView`) to know which originals are
out of view, resolves a ref (`parse_ref`) or runs the store's full-text search over exactly those
originals, fetches them from the log, and frames them as quoted data within a token bound
(`frame`). It reads and never writes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from ctxfold.errors import InvalidInputError, UnknownRefError
from ctxfold.events import COMPACTION, MASK, MESSAGE, Event
from ctxfold.messages import Message
from ctxfold.protocols import TokenCounter
from ctxfold.session.recall.frame import Entry, escape, frame
from ctxfold.session.recall.outofview import Fates, OutOfView
from ctxfold.session.recall.refs import (
    CompactionRef,
    Ref,
    SeqsRef,
    format_ranges,
    parse_ref,
)
from ctxfold.storage.base import StoreBase
from ctxfold.storage.search import SearchQuery, search_text

DEFAULT_MAX_TOKENS = 2000
"""Tokens a recall returns at most, by default: the framed text, header included."""

SEARCH_LIMIT = 100
"""Search hits read per query; those with the query verbatim are shown first."""

_GAP = 200
"""Events between two wanted seqs past which `_fetch` reads from the next one afresh."""

_SEARCH_SHARE = 4
"""A search result may take at most 1/4 of the bound while other results follow."""

_MIN_SHARE = 150
"""Tokens a search result may always take, however small the bound."""

_TOKENS_PER_MESSAGE = 8
"""No framed message takes fewer tokens than this (its label): with a bound of N tokens, at most
N / 8 messages can be shown, so no more are fetched."""


@dataclass(frozen=True)
class Recalled:
    """What one recall found.

    - `text`: the framed text to hand the model (at most the `max_tokens` asked for);
    - `messages`, `seqs`: the original messages the text shows, whole (the text may show some
      of them cut to fit: `cut` holds their seqs), and their seqs in the log, in order shown;
    - `left_out`: seqs of further matches the bound left out;
    - `tokens`: tokens of `text` by the session's counter;
    - `ref`, `query`: what was asked.
    """

    text: str
    messages: tuple[Message, ...]
    seqs: tuple[int, ...]
    left_out: tuple[int, ...] = ()
    cut: tuple[int, ...] = ()
    tokens: int = 0
    ref: str | None = None
    query: str | None = None

    def __str__(self) -> str:
        return self.text


class Recaller:
    """Recall for one session of `store`; safe to share between threads."""

    def __init__(self, store: StoreBase, session_id: str) -> None:
        self.store = store
        self.session_id = session_id
        self._index = OutOfView()
        self._lock = threading.Lock()

    def recall(
        self,
        query: object = None,
        *,
        ref: object = None,
        max_tokens: object = DEFAULT_MAX_TOKENS,
        counter: TokenCounter,
    ) -> Recalled:
        """The originals out of view that `ref` names or that match `query`, framed and bounded
        to `max_tokens` by `counter`; see `Session.recall`."""
        bound = _check_bound(max_tokens)
        parsed_ref, parsed_query = _check_ask(query, ref)
        with self._lock:
            for event in self.store.stream(self.session_id, after=self._index.last_seq):
                self._index.fold(event)
            fates = self._index.fates()
            ask = _Ask(bound, counter.count_text)
            if parsed_ref is not None:
                return self._by_ref(parsed_ref, fates, ask)
            assert parsed_query is not None
            return self._by_query(parsed_query, fates, ask)

    # -- by ref ----------------------------------------------------------------------------
    def _by_ref(self, ref: Ref, fates: Fates, ask: _Ask) -> Recalled:
        named = self._resolve(ref)
        asked = f'ref "{escape(ref.text)}"'
        chosen = [seq for seq in named if seq in fates.out_of_view]
        if not chosen:
            return self._framed([], asked, ask, ref=ref.text, empty=_why_not(named, fates))
        return self._framed(chosen, asked, ask, ref=ref.text)

    def _resolve(self, ref: Ref) -> list[int]:
        """The original message seqs `ref` names, in order; `UnknownRefError` when it names
        nothing in the log."""
        index = self._index
        if isinstance(ref, SeqsRef):
            single = ref.single
            kind = index.types.get(single) if single is not None else None
            if single is not None and kind == COMPACTION:
                return list(index.originals(single))
            if single is not None and kind == MASK:
                return list(index.masked_by.get(single, ()))
            if single is not None and kind is not None and kind != MESSAGE:
                raise UnknownRefError(
                    f"recall ref {ref.text!r}: event {single} is a {kind!r} event, which holds "
                    "no message to recall"
                )
            seqs = [
                seq
                for first, last in ref.ranges
                for seq in range(first, min(last, index.last_seq) + 1)
                if index.types.get(seq) == MESSAGE
            ]
            if not seqs:
                raise UnknownRefError(
                    f"recall ref {ref.text!r} names no message of session {self.session_id!r}, "
                    f"whose log has {index.last_seq} events"
                )
            return sorted(set(seqs))
        if isinstance(ref, CompactionRef):
            if index.types.get(ref.seq) == COMPACTION:
                return list(index.originals(ref.seq))
            if ref.text.strip() in index.results:
                return list(index.results[ref.text.strip()])
            kind = index.types.get(ref.seq)
            what = f"is a {kind!r} event, not a compaction" if kind else "is not in its log"
            raise UnknownRefError(
                f"recall ref {ref.text!r}: event {ref.seq} of session {self.session_id!r} {what}"
            )
        found = index.results.get(ref.call_id)
        if not found:
            raise UnknownRefError(
                f"recall ref {ref.text!r}: no tool result in session {self.session_id!r} answers "
                f"a call with id {ref.call_id!r}"
            )
        return list(found)

    # -- by query --------------------------------------------------------------------------
    def _by_query(self, query: str, fates: Fates, ask: _Ask) -> Recalled:
        asked = f'query "{escape(query)}"'
        if not fates.out_of_view:
            empty = "nothing is out of view yet: the context still shows every message"
            return self._framed([], asked, ask, query=query, empty=empty)
        hits = self.store.search(self.session_id, query, seqs=fates.out_of_view, limit=SEARCH_LIMIT)
        # The exact text first (an identifier, a path, an error line), then the store's ranking.
        wanted = query.strip().lower()
        ranked = sorted(
            enumerate(hits),
            key=lambda pair: (wanted not in search_text(pair[1].event.data).lower(), pair[0]),
        )
        events = {hit.seq: hit.event for hit in hits}
        order = [hit.seq for _, hit in ranked]
        empty = "no original message out of view matches; messages still in view are not searched"
        return self._framed(order, asked, ask, query=query, events=events, empty=empty)

    # -- framing ---------------------------------------------------------------------------
    def _framed(
        self,
        seqs: list[int],
        asked: str,
        ask: _Ask,
        *,
        ref: str | None = None,
        query: str | None = None,
        events: dict[int, Event] | None = None,
        empty: str = "nothing matched",
    ) -> Recalled:
        # Only as many as could possibly fit are read from the log; the rest are listed.
        room = max(1, ask.bound // _TOKENS_PER_MESSAGE)
        fetch, more = seqs[:room], seqs[room:]
        found = dict(events or {})
        missing = [seq for seq in fetch if seq not in found]
        found.update(self._fetch(missing))
        entries = [
            Entry(seq, found[seq].message, self._tool_of(found[seq].message), query)
            for seq in fetch
            if seq in found
        ]
        share = max(ask.bound // _SEARCH_SHARE, _MIN_SHARE) if query is not None else None
        which = "that match" if query is not None else "that it names"
        framed = frame(
            entries,
            asked,
            ask.bound,
            ask.count,
            more=more,
            share=share,
            empty=empty,
            which=which,
        )
        by_seq = {entry.seq: entry.message for entry in entries}
        return Recalled(
            text=framed.text,
            messages=tuple(by_seq[seq] for seq in framed.shown),
            seqs=framed.shown,
            left_out=framed.left_out,
            cut=framed.cut,
            tokens=framed.tokens,
            ref=ref,
            query=query,
        )

    def _tool_of(self, message: Message) -> str | None:
        if message.role != "tool" or not message.tool_call_id:
            return None
        return self._index.tool_names.get(message.tool_call_id)

    def _fetch(self, seqs: Iterable[int]) -> dict[int, Event]:
        """The events at `seqs`, read from the log a stretch at a time: a new stretch starts
        where the next wanted seq is more than `_GAP` events past the last one."""
        wanted = sorted(set(seqs))
        out: dict[int, Event] = {}
        i = 0
        while i < len(wanted):
            before = i
            for event in self.store.stream(self.session_id, after=wanted[i] - 1):
                while i < len(wanted) and wanted[i] < event.seq:
                    i += 1  # not in the log: nothing to fetch for it
                if i == len(wanted):
                    break
                if event.seq == wanted[i]:
                    out[event.seq] = event
                    i += 1
                    if i == len(wanted) or wanted[i] - event.seq > _GAP:
                        break
            if i == before:
                break  # the log ends before the next wanted seq
        return out


@dataclass(frozen=True)
class _Ask:
    """The bound of one recall, in tokens, and the count that measures it."""

    bound: int
    count: Callable[[str], int]


def _check_bound(max_tokens: object) -> int:
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0:
        raise InvalidInputError(
            f"max_tokens must be a positive whole number of tokens, not {max_tokens!r}"
        )
    return max_tokens


def _check_ask(query: object, ref: object) -> tuple[Ref | None, str | None]:
    """The parsed ref or the checked query; exactly one must be given."""
    if query is not None and ref is not None:
        raise InvalidInputError(
            f"recall takes a query or a ref, not both (query={query!r:.80}, ref={ref!r:.80}); "
            "use the ref to fetch what a note names, the query to search"
        )
    if ref is not None:
        return parse_ref(ref), None
    if query is None:
        raise InvalidInputError(
            "recall needs a query (words to search for) or a ref (what a note, placeholder or "
            "summary prints, such as '41-57' or 'c12')"
        )
    if not isinstance(query, str):
        raise InvalidInputError(
            f"a recall query must be a string, not {type(query).__name__} {query!r:.80}"
        )
    if not query.strip():
        raise InvalidInputError(
            f"a recall query needs at least one word, not {query!r}; pass words to search for, "
            "or a ref"
        )
    SearchQuery.parse(query)  # refused now, before anything is read
    return None, query


def _why_not(named: Collection[int], fates: Fates) -> str:
    shown = sorted(seq for seq in named if fates.of(seq) == "in view")
    removed = sorted(seq for seq in named if fates.of(seq) == "removed")
    parts = []
    if shown:
        parts.append(
            f"{_count(shown)} still in view (log {format_ranges(shown)}), so nothing to recall"
        )
    if removed:
        parts.append(
            f"{_count(removed)} taken out on purpose by a retraction or a reset "
            f"(log {format_ranges(removed)}), which recall does not bring back"
        )
    return "; ".join(parts) if parts else "nothing to recall"


def _count(seqs: Collection[int]) -> str:
    return f"{len(seqs)} message{'s' if len(seqs) != 1 else ''}"
