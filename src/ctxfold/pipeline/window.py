"""SlidingWindow: the last resort. Drop the oldest whole turns, then the oldest steps of the
current task, and leave one note saying what went and how to recall it.

It first keeps the verbatim recent tail; if the view still does not fit, it gives the tail up too
and keeps only what is pinned (system block, current request, newest steps, pending calls, the
application's pins). The note replaces the dropped run where it stood, and absorbs an earlier
note next to it, so there is never more than one note in a row.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from ctxfold.errors import ConfigurationError
from ctxfold.messages.structure import Unit
from ctxfold.pipeline.notes import note_for
from ctxfold.pipeline.proposals import Proposal, Replace
from ctxfold.pipeline.strategy import Flow
from ctxfold.pipeline.view import WorkingView


class SlidingWindow:
    """Drop whole turns, then whole steps, oldest first, until the view fits.

    - `keep_steps`: the newest steps never dropped (default: the budget's `keep_steps`).
    """

    name = "sliding_window"

    def __init__(self, keep_steps: int | None = None) -> None:
        if keep_steps is not None and keep_steps < 0:
            raise ConfigurationError(f"keep_steps must be >= 0, not {keep_steps}")
        self.keep_steps = keep_steps

    def run(self, view: WorkingView) -> Flow:
        # Give up as little as possible: plain messages outside the recent tail first, then the
        # tail, and summaries last, since one summary stands for many messages.
        for keep_tail, keep_summaries in ((True, True), (False, True), (False, False)):
            while not view.fits:
                dropped = yield from self._drop_once(view, keep_tail, keep_summaries)
                if not dropped:
                    break
            if view.fits:
                return None
        return "nothing more may be dropped"

    def _drop_once(
        self, view: WorkingView, keep_tail: bool, keep_summaries: bool
    ) -> Generator[Proposal, Any, bool]:
        """Drop the oldest stretch that makes the view smaller; False when none does."""
        protected = view.protected(self.keep_steps, tail=keep_tail)
        if keep_summaries:
            protected |= {i for i, item in enumerate(view.items) if item.kind == "summary"}
        structure = view.structure()
        current = structure.current_turn
        task_start = current.start if current and current.user is not None else structure.size
        turn_starts = {t.start for t in structure.turns}
        want = view.excess + 64  # a note costs a few dozen tokens of its own
        for run in _runs(structure.units, protected):
            # Whole turns while in earlier turns; whole steps inside the current task.
            tokens, end = 0, run[0].start
            for position, unit in enumerate(run):
                tokens += view.tokens(unit.start, unit.end)
                end = unit.end
                following = run[position + 1].start if position + 1 < len(run) else None
                at_boundary = (
                    following is None or following >= task_start or (following in turn_starts)
                )
                if tokens >= want and at_boundary:
                    break
            start = run[0].start
            note = note_for(view.items, structure, start, end, view.summary_role)
            applied = yield Replace(
                start,
                end,
                note.message,
                kind="note",
                protected=protected,
                dropped=note.dropped,
                turns=note.turns,
            )
            if applied:
                return True
        return False


def _runs(units: Sequence[Unit], protected: frozenset[int]) -> list[list[Unit]]:
    """Maximal runs of adjacent units that nothing protects, oldest first."""
    runs: list[list[Unit]] = []
    for unit in units:
        if any(i in protected for i in unit.indices):
            continue
        if runs and runs[-1][-1].end == unit.start:
            runs[-1].append(unit)
        else:
            runs.append([unit])
    return runs
