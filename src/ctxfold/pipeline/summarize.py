"""Summarize: the paid rung (free with the extractive summarizer), in rounds.

Each round replaces one stretch with a summary, giving up as little as it can. Stretches are
taken in four tiers, oldest and least useful first:

1. ``turns``: plain turns before the current task;
2. ``summaries``: earlier summaries before the current task, combined, once no plain turn is left;
3. ``steps``: older steps of the current task, keeping the newest;
4. ``task-summaries``: the current task's summaries, combined.

Within a region a plain stretch is always summarized before summaries are combined
(`plain-before-combined`), so each stretch of history is read by a summarizer once. A plain
stretch too short to be worth a summary of its own (two summaries apart, say, by an old task's
one-line request) is summarized together with the summaries beside it, once no other plain
stretch of its region is left, so that it never keeps them from combining. The rounds stop
at the last one that worked when the summarizer declines, raises, echoes its input, or answers
something no smaller than the stretch (`summarize-stops-at-last-good-round`), and when no stretch is
left to give up (`unreachable-target-terminates`).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from typing import Any

from ctxfold.errors import ConfigurationError
from ctxfold.messages.structure import Unit
from ctxfold.pipeline.clear import check_keep_steps, check_whole
from ctxfold.pipeline.proposals import Proposal, Replace, SummaryCall
from ctxfold.pipeline.strategy import Flow
from ctxfold.pipeline.summaries import (
    LEDGER_SHARE,
    identifier_counts,
    ledger_budget,
    ledger_moves,
    ledger_part,
    stretch_request,
    summary_budget,
    write_summary,
)
from ctxfold.pipeline.view import WorkingView
from ctxfold.protocols import Summarizer
from ctxfold.summarizers.base import as_summarizer, is_echo
from ctxfold.summarizers.request import SummaryResult, Tier

__all__ = [
    "Summarize",
    "identifier_counts",
    "stretch_request",
    "summary_budget",
]


@dataclass(frozen=True)
class Stretch:
    start: int
    end: int
    tier: Tier


class Summarize:
    """Replace old stretches with summaries until the view fits.

    - `summarizer`: any summarizer (sync or async callable); None uses the compactor's.
    - `keep_steps`: the newest steps never summarized (default: the budget's `keep_steps`); at
      least 1, since the newest step is what the agent is working on.
    - `summary_tokens`: the most a summary may take, in tokens (default 1,024); smaller windows
      get proportionally less (an eighth of the target, never under 128).
    - `max_stretch_tokens`: the most history one request carries, in tokens (default 64,000);
      an LLM summarizer splits a stretch that is still too big for its own window.
    - `redact`: applied to every summary before it is stored (`summaries-redacted`).
    - `ledger_share`: the most the work ledger section of the newest summary may take, as a
      share of the target (default 0.25); 0 writes no section (the ledger is still recorded).
    - `keep_tail`: leave the verbatim recent tail (`keep_recent_tokens`) alone (default True).
      The default ladder runs a second `Summarize(keep_tail=False)` once clearing the tail's
      output was not enough, so that the oldest steps of the tail are summarized rather than
      dropped.

    Summaries are written from the originals (`summaries-from-originals`) and land around the
    user's words, never over them (`user-words-kept`).
    """

    name = "summarize"

    def __init__(
        self,
        summarizer: Summarizer | None = None,
        *,
        keep_steps: int | None = None,
        summary_tokens: int = 1024,
        max_stretch_tokens: int = 64_000,
        redact: Callable[[str], str] | None = None,
        ledger_share: float = LEDGER_SHARE,
        keep_tail: bool = True,
    ) -> None:
        if summarizer is not None:
            as_summarizer(summarizer)  # refuses what cannot be called with a request
        check_keep_steps(keep_steps, "summarized")
        if (
            not isinstance(ledger_share, (int, float))
            or isinstance(ledger_share, bool)
            or not 0 <= ledger_share < 1
        ):
            raise ConfigurationError(
                f"ledger_share must be a share of the target in [0, 1), not {ledger_share!r}"
            )
        check_whole("summary_tokens", summary_tokens, minimum=16, unit="tokens")
        check_whole("max_stretch_tokens", max_stretch_tokens, minimum=17, unit="tokens")
        if max_stretch_tokens <= summary_tokens:
            raise ConfigurationError(
                f"max_stretch_tokens ({max_stretch_tokens:,}) must exceed summary_tokens "
                f"({summary_tokens:,})"
            )
        if redact is not None and not callable(redact):
            raise ConfigurationError(
                f"redact must be a function(text) -> text, or None, not {redact!r}"
            )
        self.summarizer = summarizer
        self.keep_steps = keep_steps
        self.summary_tokens = summary_tokens
        self.max_stretch_tokens = max_stretch_tokens
        self.redact = redact
        self.ledger_share = ledger_share
        self.keep_tail = keep_tail

    def run(self, view: WorkingView) -> Flow:
        while not view.fits:
            budget = self._summary_budget(view)
            stretch = self._next_stretch(view, budget)
            if stretch is None:
                # `unreachable-target-terminates`: nothing more may be given up, so no call is made
                return None
            stopped = yield from self._round(view, stretch, budget)
            if stopped is not None:
                return stopped
        return None

    # -- one round -------------------------------------------------------------------------
    def _round(
        self, view: WorkingView, stretch: Stretch, budget: int
    ) -> Generator[Proposal, Any, str | None]:
        """One request and, if the answer is usable, one edit. A reason means stop
        (`summarize-stops-at-last-good-round`)."""
        start, end = stretch.start, stretch.end
        ledger = ledger_part(view, start, end, budget, ledger_budget(view, self.ledger_share))
        full = stretch_request(view, start, end, max_tokens=ledger.budget, tier=stretch.tier)
        # What the ledger section holds verbatim, the summary need not repeat.
        request = replace(
            full, identifiers=tuple(i for i in full.identifiers if not ledger.holds(i))
        )
        try:
            answer: SummaryResult | None = yield SummaryCall(request, self.summarizer)
        except Exception as exc:  # stop at the last round that worked
            return f"the summarizer raised {type(exc).__name__}"
        text = _usable_text(answer)
        if text is None:
            return "the summarizer declined"
        if is_echo(text, request):
            return "the summary echoed its input"
        written = write_summary(
            view,
            start,
            end,
            text,
            full.identifiers,
            ledger,
            redact=self.redact,
            unheld=request.identifiers,
        )
        applied = yield Replace(
            start,
            end,
            written.message,
            kind="summary",
            protected=self._protected(view),
            tier=stretch.tier,
            identifiers=written.identifiers,
            summarizer=answer.model if answer and answer.model else None,
            summary=written.body,
            ledger=written.ledger,
        )
        if not applied:
            return "the summary was no smaller than its stretch"
        # The new summary holds the ledger of everything before it: older copies go.
        for move in list(ledger_moves(view, start)):
            _ = yield move  # each goes or stays on its own: smaller, or refused
        return None

    # -- choosing the stretch --------------------------------------------------------------
    def _summary_budget(self, view: WorkingView) -> int:
        return summary_budget(view, self.summary_tokens)

    def _protected(self, view: WorkingView) -> frozenset[int]:
        # Past the bound the user's words may be shortened, never turned into prose.
        protected = view.protected(self.keep_steps, tail=self.keep_tail)
        return protected | view.user_words().protected

    def _next_stretch(self, view: WorkingView, budget: int) -> Stretch | None:
        structure = view.structure()
        protected = self._protected(view)
        current = structure.current_turn
        task_start = current.start if current and current.user is not None else structure.size
        if current is not None and current.user is None:
            task_start = current.start  # no real user message at all: everything is the task
        historical = [u for u in structure.units if u.end <= task_start]
        task = [u for u in structure.units if u.start >= task_start]
        # The summary, the identifiers its check may add and the ledger section must fit in
        # what the stretch gives up, with the excess still to go.
        want = view.excess + 2 * budget + ledger_budget(view, self.ledger_share)
        turn_starts = {t.start for t in structure.turns}
        rounds: tuple[tuple[Tier, list[Unit], bool], ...] = (
            ("turns", historical, True),
            ("summaries", historical, False),
            ("steps", task, True),
            ("task-summaries", task, False),
        )
        for tier, units, plain in rounds:
            runs = _runs(units, protected, plain)
            short: list[list[Unit]] = []
            for run in runs:
                if not plain and len(run) < 2:
                    continue  # one summary alone has nothing to be combined with
                chosen = self._take(
                    view, run, want, budget, turn_starts if tier == "turns" else None
                )
                if chosen is not None:
                    return Stretch(chosen[0], chosen[1], tier)
                short.append(run)
            if not plain:
                continue
            # No plain stretch of the region is worth a summary of its own. One too short for
            # that is summarized together with the summaries beside it, so that it is read once
            # and they are no longer kept apart by it (`plain-before-combined`).
            # Units by start, once per region: looking each run up in the list compared units
            # field by field, once per run (quadratic in a history of many short runs).
            at = {unit.start: index for index, unit in enumerate(units)}
            for run in short:
                joined = _with_summaries_beside(run, units, at, protected)
                if joined is not None and view.tokens(*joined) > budget:
                    return Stretch(joined[0], joined[1], tier)
        return None

    def _take(
        self,
        view: WorkingView,
        run: list[Unit],
        want: int,
        budget: int,
        boundaries: set[int] | None,
    ) -> tuple[int, int] | None:
        """The oldest part of `run` worth summarizing: enough to cover `want` tokens (at least
        twice the summary budget, so the summary can be smaller), ending at a turn boundary when
        `boundaries` are given, and no more than `max_stretch_tokens`."""
        floor = max(want, 2 * budget)
        start = run[0].start
        tokens = 0
        end = start
        for position, unit in enumerate(run):
            unit_tokens = view.tokens(unit.start, unit.end)
            if tokens and tokens + unit_tokens > self.max_stretch_tokens:
                break
            tokens += unit_tokens
            end = unit.end
            at_boundary = (
                boundaries is None
                or position + 1 == len(run)
                or (run[position + 1].start in boundaries)
            )
            if tokens >= floor and at_boundary:
                break
        if tokens <= budget:
            return None  # a summary could not be smaller than this stretch
        return start, end


def _with_summaries_beside(
    run: list[Unit], units: list[Unit], at: dict[int, int], protected: frozenset[int]
) -> tuple[int, int] | None:
    """`run` widened to the unprotected summary (or note) right before it and the one right
    after it, when there are any; None when there is neither. `at` maps each unit's start to
    its index in `units`."""
    first, last = at[run[0].start], at[run[-1].start]
    start, end = run[0].start, run[-1].end
    if first > 0 and _free_synthetic(units[first - 1], protected):
        start = units[first - 1].start
    if last + 1 < len(units) and _free_synthetic(units[last + 1], protected):
        end = units[last + 1].end
    return (start, end) if (start, end) != (run[0].start, run[-1].end) else None


def _free_synthetic(unit: Unit, protected: frozenset[int]) -> bool:
    return unit.kind == "synthetic" and not any(i in protected for i in unit.indices)


def _runs(units: list[Unit], protected: frozenset[int], plain: bool) -> list[list[Unit]]:
    """Maximal runs of adjacent units that are all plain (or all synthetic) and unprotected."""
    runs: list[list[Unit]] = []
    current: list[Unit] = []
    for unit in units:
        wanted = (unit.kind != "synthetic") if plain else (unit.kind == "synthetic")
        free = not any(i in protected for i in unit.indices) and unit.kind != "system"
        if wanted and free:
            current.append(unit)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs


def _usable_text(answer: SummaryResult | None) -> str | None:
    if answer is None or answer.text is None or not answer.text.strip():
        return None
    return answer.text.strip()
