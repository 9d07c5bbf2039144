"""Application-chosen ranges: the context an `on_compact(ctx)` callback receives (the callback
guarantees, `callback-ranges-compose` and the three after it)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ctxfold.errors import InvalidHistoryError, InvalidInputError
from ctxfold.messages import Message
from ctxfold.pipeline.view import WorkingView
from ctxfold.summarizers.prompt import build_request
from ctxfold.summarizers.record import frame_summary
from ctxfold.summarizers.request import SummaryRequest, SummaryResult

Resolve = Callable[[SummaryRequest], "SummaryResult | None"]
RangeLike = range | slice | tuple[int, int]


class CompactionContext:
    """Passed to `on_compact(ctx)`. Each `ctx.compact(range, summarize)` replaces exactly that
    range of `ctx.messages` with one summary, in place; later calls see the result of earlier
    ones. Every replacement is stored as its own compaction event with the first and last seq of
    what it replaced.

    >>> def on_compact(ctx):                       # summarize the oldest half, by hand
    ...     half = len(ctx.messages) // 2
    ...     ctx.compact(range(1, half), lambda msgs: f"{len(msgs)} messages about setup")
    """

    def __init__(self, view: WorkingView, resolve: Resolve, session_id: str | None) -> None:
        self._view = view
        self._resolve = resolve
        self.session_id = session_id
        self.compacted = 0

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
        return list(self._view.counts)

    @property
    def total_tokens(self) -> int:
        return self._view.total

    @property
    def target(self) -> int:
        return self._view.target

    def compact(
        self,
        where: RangeLike,
        summarize: Callable[[list[Message]], str | None] | None = None,
        *,
        widen: bool = False,
    ) -> list[Message]:
        """Replace `messages[where]` with a summary and return the new message list.

        `where` is a `range`, a `slice` or a `(start, stop)` pair, half-open like Python slices.
        `summarize(messages) -> str` writes the summary; None uses the compactor's summarizer.
        A range that would split a tool call from its result raises `InvalidHistoryError`, unless
        `widen=True`, which grows it to the nearest safe boundaries.
        """
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
        stretch = view.messages[start:stop]
        if summarize is None:
            synthetic = frozenset(i - start for i in range(start, stop) if view.items[i].synthetic)
            request = build_request(
                stretch, synthetic=synthetic, tier="range", tokens=view.tokens(start, stop)
            )
            answer = self._resolve(request)
            text = answer.text if answer else None
        else:
            text = summarize(list(stretch))
        if text is None or not str(text).strip():
            view.stats.notes.append(f"callback range [{start}, {stop}) declined by its summarizer")
            return self.messages
        first, last = view.items[start], view.items[stop - 1]
        low = first.covers[0] if first.covers else first.id
        high = last.covers[1] if last.covers else last.id
        body = view.redact(str(text).strip())
        message = Message(
            view.summary_role,  # type: ignore[arg-type]
            frame_summary(body, view.summary_role, first_seq=low, last_seq=high),
        )
        item = view.replace(
            start,
            stop,
            message,
            kind="summary",
            strategy="callback",
            meta={"range": [start, stop]},
            protected=protected,
        )
        if item is None:
            view.stats.notes.append(
                f"callback range [{start}, {stop}) refused: its summary was not smaller"
            )
        else:
            self.compacted += 1
            view.stats.summaries.append(body)
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
        out.update(i for i, item in enumerate(view.items) if item.id in view.pinned_ids)
        return frozenset(out)
