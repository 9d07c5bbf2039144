"""SlidingWindow: the last resort. Drop the oldest whole turns, then the oldest steps of the
current task, and leave one note saying what went and how to recall it.

It first keeps the verbatim recent tail; if the view still does not fit, it gives the tail up
too, then the summaries (the one holding the work ledger last), and last the user's messages
past their bound; it keeps what is pinned
(system block, current request, newest steps, pending calls, the application's pins) and the
user's words within their bound, always (`user-words-kept`). The note replaces the dropped run
where it stood, and absorbs an earlier note next to it, so there is never more than one note in
a row. A drop whose note would take more than half of what it drops saves less than it loses,
and is not made (`drops-worth-their-note`). Each note records the work ledger of what it
dropped, so later summaries still account for it.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from ctxfold.messages import Message
from ctxfold.messages.structure import Unit
from ctxfold.pipeline.clear import check_keep_steps
from ctxfold.pipeline.ledgers import holds_any_ledger, record_ledger, stretch_ledger
from ctxfold.pipeline.notes import Note, note_for
from ctxfold.pipeline.proposals import Proposal, Replace
from ctxfold.pipeline.strategy import Flow
from ctxfold.pipeline.summaries import shrink_ledger
from ctxfold.pipeline.view import WorkingView
from ctxfold.summarizers.identifiers import (
    PRIORITY,
    QUOTED_NOTE,
    extract_identifiers,
    kind_of,
)
from ctxfold.summarizers.quoting import code_span


class SlidingWindow:
    """Drop whole turns, then whole steps, oldest first, until the view fits.

    - `keep_steps`: the newest steps never dropped (default: the budget's `keep_steps`); at
      least 1, since the newest step always stays (`window-drops-oldest-whole`).
    """

    name = "sliding_window"

    def __init__(self, keep_steps: int | None = None) -> None:
        check_keep_steps(keep_steps, "dropped")
        self.keep_steps = keep_steps

    def run(self, view: WorkingView) -> Flow:
        # Give up as little as possible: plain messages outside the recent tail first, then the
        # tail, then summaries, since one summary stands for many messages, and the user's
        # messages past their bound last of all.
        for stage in _STAGES:
            if stage == _STAGES[-1]:
                # Before the summary holding the work ledger may go, its least useful entries
                # give up what the target needs, and no more.
                shrink = shrink_ledger(view, view.excess)
                if shrink is not None:
                    yield shrink
                if view.fits:
                    return None
            while not view.fits:
                dropped = yield from self._drop_once(view, *stage)
                if not dropped:
                    break
            if view.fits:
                return None
        return "nothing more may be dropped"

    def _drop_once(
        self, view: WorkingView, keep_tail: bool, keep_summaries: bool, keep_users: bool
    ) -> Generator[Proposal, Any, bool]:
        """Drop the oldest stretch that makes the view smaller and is worth its note; False when
        none does."""
        protected = view.protected(self.keep_steps, tail=keep_tail)
        summaries = {i for i, item in enumerate(view.items) if item.kind == "summary"}
        if keep_summaries:
            protected |= summaries
        if keep_users:
            protected |= view.user_words().protected
            # Summaries holding the work ledger go only with the user's words past their
            # bound: the ledger stands for the work, not one stretch of it.
            protected |= {i for i in summaries if holds_any_ledger(view.items[i].message.text)}
        structure = view.structure()
        current = structure.current_turn
        task_start = current.start if current and current.user is not None else structure.size
        turn_starts = {t.start for t in structure.turns}
        want = view.excess + 64  # a note costs a few dozen tokens of its own
        for run in _runs(structure.units, protected):
            # Whole turns while in earlier turns; whole steps inside the current task.
            tokens, end = 0, run[0].start
            start = run[0].start
            chosen: tuple[int, Note] | None = None
            for position, unit in enumerate(run):
                tokens += view.tokens(unit.start, unit.end)
                end = unit.end
                following = run[position + 1].start if position + 1 < len(run) else None
                at_boundary = (
                    following is None or following >= task_start or (following in turn_starts)
                )
                last = position + 1 == len(run)
                if (tokens >= want and at_boundary) or last:
                    note = note_for(view.items, structure, start, end, view.summary_role)
                    # `drops-worth-their-note`: a note nearly as long as what it stands for
                    # gives up the messages and saves next to nothing.
                    if 2 * view.count(note.message) <= tokens:
                        chosen = (end, note)
                        break
            if chosen is None:
                continue
            end, note = chosen
            if end - start == 1 and view.items[start].kind == "note":
                continue  # a note alone: dropping it would put the same note in its place
            message = _with_identifiers(
                view, start, end, note.message, tokens=view.tokens(start, end)
            )
            applied = yield Replace(
                start,
                end,
                message,
                kind="note",
                protected=protected,
                dropped=note.dropped,
                turns=note.turns,
                ledger=record_ledger(view, start, end, stretch_ledger(view, start, end)),
            )
            if applied:
                return True
        return False


_STAGES = (
    (True, True, True),
    (False, True, True),
    (False, False, True),
    (False, False, False),
)
"""(keep the recent tail, keep summaries, keep the user's messages past their bound), in the
order the window tries them."""


def _with_identifiers(
    view: WorkingView, start: int, end: int, note: Message, *, tokens: int
) -> Message:
    """`note` with the identifiers the summaries it drops were holding, and that nothing else in
    the view holds, quoted as data on a line of their own, within a third of what is dropped
    (`identifiers-survive`): a summary goes, the paths and errors it kept need not."""
    held: list[str] = []
    for item in view.items[start:end]:
        if item.kind == "summary":
            held += item.identifiers or extract_identifiers(item.message.text)
    if not held:
        return note
    elsewhere = "\n".join(
        f"{m.text}\n" + "\n".join(c.arguments for c in m.tool_calls)
        for position, m in enumerate(view.messages)
        if not start <= position < end
    )
    wanted = [i for i in dict.fromkeys(held) if i not in elsewhere and "\n" not in i]
    ranked = sorted(wanted, key=lambda i: PRIORITY.index(kind_of(i)))
    room = tokens // 3 - view.count(note)
    quoted: list[str] = []
    for identifier in ranked:
        span = code_span(identifier)
        cost = view.count_text(span) + 1
        if cost > room:
            continue
        quoted.append(span)
        room -= cost
    if not quoted:
        return note
    line = f"{QUOTED_NOTE} {', '.join(quoted)}"
    return note.replace(content=f"{note.text}\n{line}")


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
