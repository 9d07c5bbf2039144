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
dropped, so later summaries still account for it. Which stretches each stage drops, and how
that stays linear in the length of the history: `ctxfold.pipeline.drops`.
"""

from __future__ import annotations

from ctxfold.pipeline.clear import check_keep_steps
from ctxfold.pipeline.drops import Drops
from ctxfold.pipeline.strategy import Flow
from ctxfold.pipeline.summaries import shrink_ledger
from ctxfold.pipeline.view import WorkingView


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
            if not view.fits:
                yield from Drops(view, self.keep_steps, *stage).until_fits()
            if view.fits:
                return None
        return "nothing more may be dropped"


_STAGES = (
    (True, True, True),
    (False, True, True),
    (False, False, True),
    (False, False, False),
)
"""(keep the recent tail, keep summaries, keep the user's messages past their bound), in the
order the window tries them."""
