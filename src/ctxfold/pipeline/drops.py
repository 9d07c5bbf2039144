"""The drops of one stage of the sliding window: which stretches go, oldest first, and the note
each leaves.

A stage drops until the view fits. Each drop takes, from the oldest run of units that nothing
protects and that has one, the shortest stretch from the run's start that ends at a whole turn
(a whole step inside the current task), covers the excess and is worth its note
(`drops-worth-their-note`), or the whole run when it is shorter; its note absorbs the note
an earlier drop left at the start of the run.

`Drops` reads the view once per stage, not once per drop: a long task dropped run after run
used to cost a pass over the whole view for every drop. It makes exactly the drops that reading
the view again before each one would, because between two drops:

- what is protected stays the same items, only their positions move: the structure's pins (system
  block, current request, newest steps, pending calls) and the application's are never dropped,
  summaries stay summaries, and the user's words within and past their bound are the same
  messages, unless a drop took the task or the newest message past the bound (the stage then
  reads the view again); the recent tail is the same, unless its start depends on what comes
  before it (`WorkingView.tail_floor`), and then it is read again before a run next to it is
  weighed;
- a run nothing was dropped from weighs the same, except that a smaller excess lets a stretch
  end earlier: only those ends are weighed, each once (`_Run.seen`), and a run none of whose
  ends can still be reached is left alone.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Container, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxfold.messages import Message
from ctxfold.messages.structure import Unit
from ctxfold.pipeline.ledgers import holds_any_ledger, record_ledger, stretch_ledger
from ctxfold.pipeline.notes import Note, note_over
from ctxfold.pipeline.proposals import Proposal, Replace
from ctxfold.pipeline.view import WorkingView
from ctxfold.session.projection import Item
from ctxfold.summarizers.identifiers import (
    PRIORITY,
    QUOTED_NOTE,
    extract_identifiers,
    kind_of,
)
from ctxfold.summarizers.quoting import code_span

NOTE_ALLOWANCE = 64
"""Tokens a drop covers beyond the excess: a note costs a few dozen tokens of its own."""


@dataclass(eq=False)
class _Run:
    """Adjacent units nothing protects, in the positions of the view as the stage read it, and
    what the stage dropped from its start so far."""

    units: list[Unit]
    tokens: list[int]
    """`tokens[j]`: the tokens of `units[0]` to `units[j]`."""
    turns: list[int]
    """`turns[j]`: the user turns that begin in `units[0]` to `units[j]`."""
    ends: list[bool]
    """`ends[j]`: whether a stretch may end after `units[j]` (whole turns before the current
    task, whole steps inside it)."""
    first: int = 0
    """`units[first:]` are still in the view; `note` stands for the ones before."""
    note: Item | None = None
    note_tokens: int = 0
    seen: int = field(init=False)
    """Every end at or after `units[seen]` that the excess let a stretch reach has been weighed
    and was not worth its note; `len(units)` while none was weighed."""

    def __post_init__(self) -> None:
        self.seen = len(self.units)

    @property
    def removed(self) -> int:
        """How many fewer items the view holds since this run was read."""
        if self.note is None:
            return 0
        gone = self.units[self.first].start if self.first < len(self.units) else self.end
        return gone - self.units[0].start - 1

    @property
    def end(self) -> int:
        return self.units[-1].end


class Drops:
    """The drops of one stage of `SlidingWindow` over `view` (see the module docstring).

    - `keep_steps`: the newest steps never dropped (None: the view's rules).
    - `keep_tail`, `keep_summaries`, `keep_users`: whether the recent tail, the summaries and the
      user's messages past their bound are protected in this stage.
    """

    def __init__(
        self,
        view: WorkingView,
        keep_steps: int | None,
        keep_tail: bool,
        keep_summaries: bool,
        keep_users: bool,
    ) -> None:
        self.view = view
        self.keep_steps = keep_steps
        self.keep_tail = keep_tail
        self.keep_summaries = keep_summaries
        self.keep_users = keep_users
        self._read()

    def until_fits(self) -> Generator[Proposal, Any, None]:
        """Drop until the view fits or nothing more may be dropped in this stage."""
        view = self.view
        while not view.fits:
            if self._stale:
                self._read()
            want = view.excess + NOTE_ALLOWANCE
            while self._sleeping and -self._sleeping[0][0] >= want:
                heapq.heappush(self._ready, heapq.heappop(self._sleeping)[1])
            dropped = yield from self._one_drop(want)
            if not dropped:
                return

    def _one_drop(self, want: int) -> Generator[Proposal, Any, bool]:
        """Drop the oldest stretch that covers `want` tokens (or a whole run) and is worth its
        note; False when no run has one."""
        refused: list[int] = []
        tail_checked = self._floor is None
        try:
            while True:
                index = self._next()
                if not tail_checked and (index is None or index >= self._near_tail):
                    tail_checked = True
                    if self.view.tail_start() != self._tail - self._shifts.before(len(self._runs)):
                        # The tail moved since the stage read the view: read it again, as this
                        # drop would have, and weigh every run afresh.
                        self._read()
                        refused.clear()
                        continue
                if index is None:
                    return False
                run = self._runs[index]
                chosen = self._weigh(run, want)
                if chosen is None:
                    self._sleep(index, run)
                    continue
                end, note = chosen
                if note.dropped == 1 and self._first_item(run).kind == "note":
                    continue  # a note alone: dropping it would put the same note in its place
                start = run.units[0].start - self._shifts.before(index)
                tokens = self._tokens_to(run, end)
                applied = yield from self._drop(start, start + note.dropped, note, tokens)
                if not applied:
                    run.seen = len(run.units)
                    refused.append(index)
                    continue
                self._dropped(index, run, end, start)
                return True
        finally:
            for index in refused:
                heapq.heappush(self._ready, index)

    # -- reading the view ------------------------------------------------------------------
    def _read(self) -> None:
        """Read what this stage protects and the runs it may drop from, from the view as it
        stands (what every drop did before the window read the view once per stage)."""
        view = self.view
        protected = view.protected(self.keep_steps, tail=self.keep_tail)
        summaries = {i for i, item in enumerate(view.items) if item.kind == "summary"}
        if self.keep_summaries:
            protected |= summaries
        self._watched: frozenset[int] = frozenset()
        if self.keep_users:
            protected |= view.user_words().protected
            # Summaries holding the work ledger go only with the user's words past their
            # bound: the ledger stands for the work, not one stretch of it.
            protected |= {i for i in summaries if holds_any_ledger(view.items[i].message.text)}
        else:
            # Which messages stay within the bound changes only when the task goes, or the
            # newest one past it (the one that did not fit).
            words = view.user_words()
            over = [i for i in words.over if i != words.task]
            watched = (words.task, max(over, default=None))
            self._watched = frozenset(i for i in watched if i is not None)
        structure = view.structure()
        current = structure.current_turn
        task_start = current.start if current and current.user is not None else structure.size
        turn_starts = {t.start for t in structure.turns}
        self._items = list(view.items)
        self._runs = [
            _run(units, view.counts, task_start, turn_starts)
            for units in _runs(structure.units, protected)
        ]
        self._guard = _Protected(view.items, frozenset(view.items[i].id for i in protected))
        self._shifts = _Shifts(len(self._runs))
        self._ready: list[int] = []
        self._unread = 0
        self._sleeping: list[tuple[int, int]] = []
        self._stale = False
        # Runs that end at or after the floor may grow or shrink as the tail moves.
        self._floor = view.tail_floor() if self.keep_tail else None
        self._tail = view.tail_start() if self._floor is not None else 0
        self._near_tail = next(
            (i for i, run in enumerate(self._runs) if self._reaches_floor(run)), len(self._runs)
        )

    def _reaches_floor(self, run: _Run) -> bool:
        return self._floor is not None and run.end >= self._floor

    def _next(self) -> int | None:
        """The oldest run that may have a stretch to drop at the present excess."""
        if self._ready:
            return heapq.heappop(self._ready)  # all of them older than the runs not yet weighed
        if self._unread < len(self._runs):
            self._unread += 1
            return self._unread - 1
        return None

    # -- weighing a run --------------------------------------------------------------------
    def _weigh(self, run: _Run, want: int) -> tuple[int, Note] | None:
        """The end and note of the shortest stretch from the start of `run` that covers `want`
        tokens (or all of it) at a whole turn or step and is worth its note; None when none
        is. Only the ends not weighed before are weighed."""
        size = len(run.units)
        low = run.first - 1 if run.note is not None else run.first
        base = self._base(run)
        reach = min(bisect_left(run.tokens, want - base, low, size), size - 1)
        for end in range(reach, run.seen):
            if not run.ends[end]:
                continue
            note = self._note(run, end)
            # `drops-worth-their-note`: a note nearly as long as what it stands for gives up
            # the messages and saves next to nothing.
            if 2 * self.view.count(note.message) <= base + run.tokens[end]:
                return end, note
        run.seen = reach
        return None

    def _sleep(self, index: int, run: _Run) -> None:
        """Set aside a run with nothing to drop, until the excess gets small enough for a
        stretch to end earlier in it; for good when none can."""
        low = run.first - 1 if run.note is not None else run.first
        for end in range(run.seen - 1, low - 1, -1):
            if run.ends[end]:
                heapq.heappush(self._sleeping, (-(self._base(run) + run.tokens[end]), index))
                return

    def _base(self, run: _Run) -> int:
        """What to add to `run.tokens[j]` for the tokens of a stretch from its start now."""
        return run.note_tokens - (run.tokens[run.first - 1] if run.first else 0)

    def _tokens_to(self, run: _Run, end: int) -> int:
        return self._base(run) + run.tokens[end]

    def _first_item(self, run: _Run) -> Item:
        return run.note if run.note is not None else self._items[run.units[run.first].start]

    def _note(self, run: _Run, end: int) -> Note:
        """The note for the stretch from the start of `run` to the end of `run.units[end]`."""
        role = self.view.summary_role
        if end < run.first:
            assert run.note is not None
            return note_over(run.note, run.note, 1, 0, role)
        head = run.units[run.first]
        dropped = run.units[end].end - head.start + (run.note is not None)
        turns = run.turns[end] - (run.turns[run.first - 1] if run.first else 0)
        last = self._items[run.units[end].end - 1]
        return note_over(self._first_item(run), last, dropped, turns, role)

    # -- dropping --------------------------------------------------------------------------
    def _drop(
        self, start: int, end: int, note: Note, tokens: int
    ) -> Generator[Proposal, Any, bool]:
        """Propose the note in place of view positions `[start, end)`; whether it was applied."""
        view = self.view
        applied = yield Replace(
            start,
            end,
            with_identifiers(view, start, end, note.message, tokens=tokens),
            kind="note",
            protected=self._guard,
            dropped=note.dropped,
            turns=note.turns,
            ledger=record_ledger(view, start, end, stretch_ledger(view, start, end)),
        )
        return bool(applied)

    def _dropped(self, index: int, run: _Run, end: int, start: int) -> None:
        """`run` lost its stretch to `units[end]`, now the note at view position `start`."""
        before = run.removed
        first = run.units[run.first].start if run.first < len(run.units) else run.end
        if any(first <= i < run.units[end].end for i in self._watched) or (
            self._floor is not None and run.units[end].end > self._floor
        ):
            self._stale = True  # see `_read`
        run.note, run.note_tokens = self.view.items[start], self.view.counts[start]
        run.first, run.seen = end + 1, len(run.units)
        self._shifts.add(index, run.removed - before)
        if run.first < len(run.units):
            heapq.heappush(self._ready, index)  # else a note alone, which never goes


def _run(units: list[Unit], counts: Sequence[int], task_start: int, turn_starts: set[int]) -> _Run:
    tokens: list[int] = []
    turns: list[int] = []
    ends: list[bool] = []
    total = begun = 0
    for position, unit in enumerate(units):
        total += sum(counts[unit.start : unit.end])
        begun += unit.kind == "user"
        following = units[position + 1].start if position + 1 < len(units) else None
        tokens.append(total)
        turns.append(begun)
        ends.append(following is None or following >= task_start or following in turn_starts)
    return _Run(units, tokens, turns, ends)


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


class _Protected(Container[int]):
    """The view positions of the items a stage protects, wherever its drops moved them."""

    def __init__(self, items: list[Item], ids: frozenset[int]) -> None:
        self._items = items
        self._ids = ids

    def __contains__(self, position: object) -> bool:
        return isinstance(position, int) and self._items[position].id in self._ids


class _Shifts:
    """How many items the drops took out of each run, summed over the runs before one in
    log(runs) steps (a Fenwick tree): where a run starts in the view now."""

    def __init__(self, runs: int) -> None:
        self._tree = [0] * (runs + 1)

    def add(self, run: int, items: int) -> None:
        i = run + 1
        while i < len(self._tree):
            self._tree[i] += items
            i += i & -i

    def before(self, run: int) -> int:
        total, i = 0, run
        while i > 0:
            total += self._tree[i]
            i -= i & -i
        return total


def with_identifiers(
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
