"""SlidingWindow: the last resort. Drop the oldest whole turns, then the oldest steps of the
current task, and leave one note saying what went and how to recall it.

It first keeps the verbatim recent tail; if the view still does not fit, it gives the tail up too
and keeps only what is pinned (system block, current request, newest steps, pending calls, the
application's pins). The note replaces the dropped run where it stood, and absorbs an earlier
note next to it, so there is never more than one note in a row.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxfold.errors import ConfigurationError
from ctxfold.messages import Message
from ctxfold.messages.structure import Unit
from ctxfold.pipeline.view import WorkingView
from ctxfold.summarizers.identifiers import extract_identifiers

NOTE_MARK = "[ctxfold: earlier history dropped"


class SlidingWindow:
    """Drop whole turns, then whole steps, oldest first, until the view fits.

    - `keep_steps`: the newest steps never dropped (default: the budget's `keep_steps`).
    """

    name = "sliding_window"

    def __init__(self, keep_steps: int | None = None) -> None:
        if keep_steps is not None and keep_steps < 0:
            raise ConfigurationError(f"keep_steps must be >= 0, not {keep_steps}")
        self.keep_steps = keep_steps

    def run(self, view: WorkingView) -> None:
        # Give up as little as possible: plain messages outside the recent tail first, then the
        # tail, and summaries last, since one summary stands for many messages.
        for keep_tail, keep_summaries in ((True, True), (False, True), (False, False)):
            while not view.fits:
                if not self._drop_once(view, keep_tail, keep_summaries):
                    break
            if view.fits:
                return

    def _drop_once(self, view: WorkingView, keep_tail: bool, keep_summaries: bool) -> bool:
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
            note, meta = note_for(view, start, end)
            summaries = [i.message.text for i in view.items[start:end] if i.kind == "summary"]
            if (
                view.replace(
                    start,
                    end,
                    note,
                    kind="note",
                    strategy=self.name,
                    meta=meta,
                    protected=protected,
                )
                is not None
            ):
                _count_lost_identifiers(view, summaries)
                return True
        return False


def note_for(view: WorkingView, start: int, end: int) -> tuple[Message, dict[str, int]]:
    """The note that stands for items `[start, end)` of `view` once they are dropped."""
    dropped = view.items[start:end]
    structure = view.structure()
    turns = sum(1 for t in structure.turns if start <= t.start < end and t.user is not None)
    low = dropped[0].covers[0] if dropped[0].covers else dropped[0].id
    high = dropped[-1].covers[1] if dropped[-1].covers else dropped[-1].id
    note = Message(view.summary_role, _note_text(len(dropped), turns, low, high))  # type: ignore[arg-type]
    return note, {"dropped": len(dropped), "turns": turns}


def _count_lost_identifiers(view: WorkingView, dropped_summaries: list[str]) -> None:
    """A dropped summary takes the identifiers it was keeping with it (`identifiers-survive`):
    report those that no longer appear anywhere in the view as left out."""
    if not dropped_summaries:
        return
    remaining = "\n".join(
        text for m in view.messages for text in (m.text, *(c.arguments for c in m.tool_calls))
    )
    lost = [i for i in extract_identifiers("\n".join(dropped_summaries)) if i not in remaining]
    view.stats.left_out.extend(lost)
    view.stats.identifiers_left_out += len(lost)


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


def _note_text(items: int, turns: int, first_seq: int, last_seq: int) -> str:
    what = f"{items} message{'s' if items != 1 else ''}"
    if turns:
        what += f" spanning {turns} user turn{'s' if turns != 1 else ''}"
    return (
        f"{NOTE_MARK}: {what} (log items {first_seq}–{last_seq}) were removed to fit the "
        "context window. The originals are kept in the session log; recall them from there if "
        "their exact text matters.]"
    )
