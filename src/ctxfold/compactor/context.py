"""Application-chosen ranges: the context an `on_compact(ctx)` callback receives (the callback
guarantees, `callback-ranges-compose` and the three after it).

`ctx.compact(range, ...)` and `await ctx.acompact(range, ...)` are one algorithm, written once as a
generator that yields what it needs a summary from: the compactor's summarizer (a
`SummaryRequest`) or the callback's own function. The compactor's driver builds the context with
the way to answer each, so a callback never needs to know how its summaries are fetched.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from ctxfold._drive import adrive, drive
from ctxfold.errors import (
    ConfigurationError,
    InvalidHistoryError,
    InvalidInputError,
    SummarizerError,
)
from ctxfold.messages import Message
from ctxfold.pipeline.accounting import Accounts
from ctxfold.pipeline.proposals import Replace
from ctxfold.pipeline.summaries import (
    ledger_budget,
    ledger_moves,
    ledger_part,
    stretch_request,
    summary_budget,
    write_summary,
)
from ctxfold.pipeline.view import WorkingView
from ctxfold.summarizers.base import normalize_result
from ctxfold.summarizers.identifiers import extract_identifiers
from ctxfold.summarizers.request import SummaryRequest, SummaryResult

Resolve = Callable[[SummaryRequest], SummaryResult]
AsyncResolve = Callable[[SummaryRequest], Awaitable[SummaryResult]]
SummarizeRange = Callable[[list[Message]], Any]
RangeLike = range | slice | tuple[int, int]

STRATEGY = "callback"


@dataclass(frozen=True)
class _Ask:
    """Ask the callback's own `summarize` function for the text of `messages`."""

    summarize: SummarizeRange
    messages: list[Message]


class CompactionContext:
    """Passed to `on_compact(ctx)`. Each `ctx.compact(range, summarize)` replaces exactly that
    range of `ctx.messages` with one summary, in place; later calls see the result of earlier
    ones. Every replacement is stored as its own compaction event with the first and last seq of
    what it replaced. An `async def on_compact(ctx)` uses `await ctx.acompact(range, ...)`.

    >>> def on_compact(ctx):                       # summarize the oldest half, by hand
    ...     half = len(ctx.messages) // 2
    ...     ctx.compact(range(1, half), lambda msgs: f"{len(msgs)} messages about setup")
    """

    def __init__(
        self,
        view: WorkingView,
        accounts: Accounts,
        *,
        session_id: str | None,
        resolve: Resolve | None = None,
        aresolve: AsyncResolve | None = None,
    ) -> None:
        self._view = view
        self._accounts = accounts
        self._resolve = resolve
        self._aresolve = aresolve
        self.session_id = session_id

    @property
    def messages(self) -> list[Message]:
        """The messages as they stand now (after any earlier `compact` calls)."""
        return self._view.messages

    @property
    def seqs(self) -> list[int]:
        """The item id (log seq) of each message in `messages`."""
        return [item.id for item in self._view.items]

    @property
    def tokens(self) -> list[int]:
        """Tokens of each message in `messages`, in the compactor's counter units."""
        return list(self._view.counts)

    @property
    def total_tokens(self) -> int:
        """Tokens of the whole request as it stands, tool schemas included."""
        return self._view.total

    @property
    def target(self) -> int:
        """The tokens the run aims at, in the compactor's counter units."""
        return self._view.target

    def compact(
        self,
        where: RangeLike,
        summarize: SummarizeRange | None = None,
        *,
        widen: bool = False,
    ) -> list[Message]:
        """Replace `messages[where]` with a summary and return the new message list.

        `where` is a `range`, a `slice` or a `(start, stop)` pair, half-open like Python slices.
        `summarize(messages) -> str` writes the summary from the range's original messages
        (masks undone, redacted when a redactor is configured); None uses the compactor's
        summarizer. Its answer is read as a summarizer's is: a `str`, a `SummaryResult`, or
        None (or blank text) to decline; anything else is a `SummarizerError`.
        A range that would split a tool call from its result raises `InvalidHistoryError`, unless
        `widen=True`, which grows it to the nearest safe boundaries.
        """
        return drive(self._replace(where, summarize, widen), self._answer, catch=())

    async def acompact(
        self,
        where: RangeLike,
        summarize: SummarizeRange | None = None,
        *,
        widen: bool = False,
    ) -> list[Message]:
        """`compact` for an `async def on_compact(ctx)`: the compactor's summarizer is awaited,
        and `summarize` may be an async function too."""
        return await adrive(self._replace(where, summarize, widen), self._aanswer, catch=())

    # -- answering -------------------------------------------------------------------------
    def _answer(self, step: SummaryRequest | _Ask) -> Any:
        if isinstance(step, _Ask):
            value = step.summarize(step.messages)
            if inspect.isawaitable(value):
                if inspect.iscoroutine(value):
                    value.close()  # never awaited; closing it avoids a "never awaited" warning
                raise ConfigurationError(
                    "the summarize function passed to ctx.compact is async; make on_compact "
                    "`async def` and call `await ctx.acompact(...)`"
                )
            return value
        if self._resolve is None:
            raise ConfigurationError(
                "inside an async on_compact, call `await ctx.acompact(...)`, not ctx.compact"
            )
        return self._resolve(step)

    async def _aanswer(self, step: SummaryRequest | _Ask) -> Any:
        if isinstance(step, _Ask):
            value = step.summarize(step.messages)
            return await value if inspect.isawaitable(value) else value
        if self._aresolve is None:
            raise ConfigurationError(
                "ctx.acompact needs an async on_compact, run by acompact or amaybe_compact"
            )
        return await self._aresolve(step)

    # -- the algorithm ---------------------------------------------------------------------
    def _replace(
        self, where: Any, summarize: SummarizeRange | None, widen: bool
    ) -> Generator[SummaryRequest | _Ask, Any, list[Message]]:
        if summarize is not None and not callable(summarize):
            raise ConfigurationError(
                f"summarize must be a function(messages) -> str, or None for the compactor's "
                f"summarizer, not {summarize!r}"
            )
        start, stop = self._bounds(where)
        view = self._view
        structure = view.structure()
        if start < structure.system_end:
            # Checked before the cut points: index 0 is no cut point, and widening from it
            # would find no boundary at all.
            raise InvalidHistoryError(
                f"range [{start}, {stop}) covers message {start}, which is in the system block; "
                f"the system prompt is never compacted, so start at {structure.system_end} or later"
            )
        cuts = structure.cuts
        if start not in cuts or stop not in cuts:
            if not widen:
                raise InvalidHistoryError(
                    f"range [{start}, {stop}) would split a tool call from its result; pick "
                    "boundaries between steps or pass widen=True"
                )
            start = max(c for c in cuts if c <= start)
            stop = min(c for c in cuts if c >= stop)
        protected = self._protected()
        touched = sorted(i for i in protected if start <= i < stop)
        if touched:
            raise InvalidHistoryError(
                f"range [{start}, {stop}) covers message {touched[0]}, which is pinned (the "
                "system block, a pending call, or an application pin)"
            )
        ledger = ledger_part(view, start, stop, summary_budget(view), ledger_budget(view))
        if summarize is None:
            request = stretch_request(view, start, stop, max_tokens=ledger.budget, tier="range")
            answer: SummaryResult = yield request
            self._accounts.answered(request, answer)
            text = answer.text
            identifiers = list(request.identifiers)
        else:
            originals = view.originals(start, stop)
            answer = yield _Ask(summarize, originals)
            try:
                # Checked as the compactor's summarizer's answers are: bytes or a number is no
                # summary, and is never stored as its repr.
                text = normalize_result(answer).text
            except SummarizerError as exc:
                raise SummarizerError(
                    f"the summarize function given to ctx.compact for [{start}, {stop}): {exc}"
                ) from None
            identifiers = extract_identifiers(originals)
        if text is None or not str(text).strip():
            self._accounts.notes.append(
                f"callback range [{start}, {stop}) declined by its summarizer"
            )
            return self.messages
        # Checked like every summary (`identifiers-survive`), whoever wrote it; redacted after,
        # so that the check cannot put a redacted secret back.
        written = write_summary(view, start, stop, str(text).strip(), identifiers, ledger)
        edit = Replace(
            start,
            stop,
            written.message,
            kind="summary",
            protected=protected,
            identifiers=written.identifiers,
            range=(start, stop),
            summary=written.body,
            ledger=written.ledger,
        )
        replaced = view.items[start:stop]
        if view.apply(edit, STRATEGY):
            self._accounts.applied(edit, replaced, view)
            for move in list(ledger_moves(view, start)):
                before = view.items[move.start : move.end]
                if view.apply(move, STRATEGY):
                    self._accounts.applied(move, before, view)
        else:
            self._accounts.notes.append(
                f"callback range [{start}, {stop}) refused: its summary was not smaller"
            )
        return self.messages

    def _bounds(self, where: Any) -> tuple[int, int]:
        size = len(self._view.items)
        if isinstance(where, range):
            if where.step != 1:
                raise InvalidInputError(f"range {where!r} must have step 1")
            start, stop = where.start, where.stop
        elif isinstance(where, slice):
            if where.step not in (None, 1):
                raise InvalidInputError(f"slice {where!r} must have step 1")
            start = 0 if where.start is None else where.start
            stop = size if where.stop is None else where.stop
        elif (
            isinstance(where, Sequence)
            and len(where) == 2
            and all(isinstance(v, int) for v in where)
        ):
            start, stop = where[0], where[1]
        else:
            raise InvalidInputError(
                "a compaction range must be a range, a slice or a (start, stop) pair, "
                f"not {where!r}"
            )
        if stop < start:
            raise InvalidInputError(f"range [{start}, {stop}) is reversed")
        if start == stop:
            raise InvalidInputError(f"range [{start}, {stop}) is empty: nothing to compact")
        if start < 0 or stop > size:
            raise InvalidInputError(
                f"range [{start}, {stop}) is out of bounds: there are {size} messages"
            )
        return start, stop

    def _protected(self) -> frozenset[int]:
        view = self._view
        structure = view.structure()
        out = set(range(structure.system_end))
        for index in structure.pending:
            out.update(structure.unit_at(index).indices)
        return frozenset(out) | view.app_pinned()
