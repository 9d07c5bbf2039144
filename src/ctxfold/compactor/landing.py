"""A whole compaction of a session: read a snapshot, plan, land, and retry, within bounds.

Written once, as a generator that does no I/O itself: it yields what it needs done (`ReadSnapshot`,
`Append`, `ReadEvents`, `Started`, `Trimmed`) next to the run's own steps (summary and callback
calls), and the two drivers in `ctxfold.compactor.drivers` do each, one blocking, one awaiting.

Landing is one atomic append with `expected_seq`, so the edits land on exactly the history they
were planned on. When another writer got there first (`ConflictError`), the flow reads what
arrived:

- only events that leave the projection's items and pins alone (messages, usage reports, an
  application's own events): the edits still hold, since they name items by id; the flow
  renumbers the items the run itself creates and appends again, and the late messages project
  after the summary, verbatim (`late-messages-stay-verbatim`);
- anything that changes what is projected or protected (a compaction, mask, retraction, reset,
  pin or unpin): the plan may no longer hold, so the flow plans once more from a fresh snapshot,
  then declines (`one-compaction-wins`, `pins-respected`).

A background run's result (`landing_of`) is also rebased over masks that landed after the
history it read, such as the rungs a turn ran in the foreground while the run was summarizing:
a mask changes no item's id, role or call ids, so every compaction the run planned still names a
contiguous run of items between safe cut points, and its summary was written from the stretch's
originals (`WorkingView.originals`), which no mask changes. The run's own mask entries for
items already masked are left out, so nothing is masked twice and the counts the log records
stay exact.

Every loop is bounded (`landing-bounded`): a writer that keeps appending makes the run give up
with the outcome "conflict", never spin.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ctxfold.compactor.report import CompactionReport, CompactionStart, Outcome, Trim
from ctxfold.compactor.run import Planned, RunSettings, Step, plan
from ctxfold.errors import ConflictError, EmptySessionError, InvalidHistoryError
from ctxfold.events import MASK, RESHAPING, Compaction, Event, Mask, MaskedItem, NewEvent
from ctxfold.pipeline.view import Applied
from ctxfold.summarizers.redact import redact_secrets

MAX_PLANS = 2
"""Plans per compaction: the first, and one more when the history changed under it."""

MAX_APPENDS = 8
"""Append attempts per plan: the first, and a rebase over plain appends after each conflict."""


@dataclass(frozen=True)
class ReadSnapshot:
    """Read the session's projection as it stands now; answered with a `Snapshot`."""


@dataclass(frozen=True)
class Started:
    """Tell `on_start` listeners that a run began; answered with nothing."""

    start: CompactionStart


@dataclass(frozen=True)
class Trimmed:
    """Tell `on_trim` listeners what each landed edit took out; answered with nothing."""

    trims: tuple[Trim, ...]


@dataclass(frozen=True)
class Append:
    """Append `events` with `expected_seq`; answered with the stored events, or a
    `ConflictError` / `InvalidHistoryError` thrown in."""

    events: tuple[NewEvent, ...]
    expected_seq: int


@dataclass(frozen=True)
class ReadEvents:
    """Read the session's events after seq `after`; answered with a list of `Event`."""

    after: int


SessionStep = Step | ReadSnapshot | Started | Trimmed | Append | ReadEvents


@dataclass(frozen=True)
class _Landing:
    stored: tuple[Event, ...] = ()
    replan: bool = False
    why: str = ""
    planned: Planned | None = None
    """What landed: the run's plan, without the mask entries other writers got to first."""


def compaction(
    settings: RunSettings, *, manual: bool = False, quiet: bool = False
) -> Generator[SessionStep, Any, CompactionReport]:
    """Compact a session toward `settings.target` and return the report (see the module
    docstring). `manual` refuses an empty session (`empty-session-refused`). `quiet` tells the
    `on_start` listeners only once the plan holds edits or failed: for a run the caller reports
    only then (a background check's free rungs, `ctxfold.compactor.background`)."""
    started = time.perf_counter()
    planned: Planned | None = None
    why = ""
    listener: str | None = None
    for attempt in range(MAX_PLANS):
        first = attempt == 0
        planned = yield from planning(settings, manual=manual, announce=first, quiet=quiet)
        if first:
            listener = planned.listener_error
        elif listener:
            planned = replace(planned, listener_error=listener)  # heard once, reported at the end
        if not planned.edits:
            return planned.report(time.perf_counter() - started)
        landing = yield from _land(planned)
        if landing.stored:
            report = planned.report(time.perf_counter() - started, stored=landing.stored)
            return (yield from _trimmed(planned, landing.stored, report, settings.raise_failures))
        why = landing.why
        if not landing.replan:
            break
    assert planned is not None
    return planned.report(time.perf_counter() - started, outcome="conflict", error=why)


def planning(
    settings: RunSettings, *, manual: bool = False, announce: bool = True, quiet: bool = False
) -> Generator[SessionStep, Any, Planned]:
    """Read the session's projection and plan on it: the first half of a run, and all that a
    background run does off the turn (`ctxfold.compactor.background`). `announce` tells the
    `on_start` listeners (with `quiet`, only once the plan holds edits or failed); `manual`
    refuses an empty session then."""
    snapshot = yield ReadSnapshot()
    start = CompactionStart(
        snapshot.session_id, settings.reason, snapshot.estimate, settings.target_for(snapshot)
    )
    listener = ""
    if announce and not quiet:
        if manual and not snapshot.items:
            raise EmptySessionError(f"session {snapshot.session_id!r} has no messages to compact")
        listener = yield from _started(start, settings.raise_failures)
    planned: Planned = yield from plan(snapshot, settings)
    if announce and quiet and (planned.edits or planned.failed):
        listener = yield from _started(start, settings.raise_failures)
    return replace(planned, listener_error=listener) if listener else planned


def landing_of(planned: Planned, started: float) -> Generator[SessionStep, Any, CompactionReport]:
    """Land what a background run planned, by the rules of every landing: rebased over plain
    appends; dropped, never half-applied, when the history it read changed underneath (outcome
    "stale"). `started` is when the run began (`time.perf_counter()`)."""
    if not planned.edits:
        return planned.report(time.perf_counter() - started)
    landing = yield from _land(planned, over_masks=True)
    if landing.stored and landing.planned is not None:
        planned = landing.planned
        report = planned.report(time.perf_counter() - started, stored=landing.stored)
        return (yield from _trimmed(planned, landing.stored, report, raise_failures=False))
    outcome: Outcome = "stale" if landing.replan else "conflict"
    return planned.report(time.perf_counter() - started, outcome=outcome, error=landing.why)


def _trimmed(
    planned: Planned, stored: Sequence[Event], report: CompactionReport, raise_failures: bool
) -> Generator[SessionStep, Any, CompactionReport]:
    """Tell the `on_trim` listeners what the stored edits took out, and return `report`."""
    try:
        yield Trimmed(planned.trims(stored))
    except Exception as exc:
        # The edits are stored already: the trigger reports the listener's failure beside the
        # landed outcome; a manual compact raises it.
        if raise_failures:
            raise
        return report.with_listener_error("on_trim", exc)
    return report


def _started(start: CompactionStart, raise_failures: bool) -> Generator[SessionStep, Any, str]:
    """Tell the `on_start` listeners that a run began; returns what one raised ("" when none
    did), for the run's report: the run goes on. A manual compact raises it instead, before
    anything is planned (`run-reported`)."""
    try:
        yield Started(start)
    except Exception as exc:
        if raise_failures:
            raise
        return redact_secrets(f"on_start raised {type(exc).__name__}: {exc}")
    return ""


def _land(planned: Planned, *, over_masks: bool = False) -> Generator[SessionStep, Any, _Landing]:
    """Append the edits of `planned`, rebasing over plain appends, and over masks too when
    `over_masks` (see the module docstring); bounded."""
    first_base = base = planned.base_seq
    as_landed = planned
    masked: set[int] = set()
    for attempt in range(MAX_APPENDS):
        # Moves compose (an id above the first base stays above each later one), so each try
        # moves the run's own edits once, from the history it read.
        edits = [_moved(edit, first_base, base - first_base) for edit in as_landed.edits]
        if not edits:
            return _Landing(
                replan=True, why="other writers masked everything the run meant to mask"
            )
        try:
            stored = yield Append(tuple(NewEvent.of(edit) for edit in edits), base)
        except ConflictError:
            newer: list[Event] = yield ReadEvents(base)
        except InvalidHistoryError as exc:
            if attempt == 0:
                raise  # planned on exactly this history and still invalid: a bug, say so
            # A rebase put the edits on a history they no longer fit: plan again.
            return _Landing(replan=True, why=f"the history changed under the run: {exc}")
        else:
            return _Landing(tuple(stored), planned=as_landed)
        reshaped = [e for e in newer if e.type in RESHAPING and not (over_masks and e.type == MASK)]
        if reshaped:
            first = reshaped[0]
            return _Landing(
                replan=True,
                why=f"a {first.type} (seq {first.seq}) landed while the run was planning",
            )
        if newer:
            news = {i.id for e in newer if e.type == MASK for i in Mask.from_data(e.data).items}
            if news:
                masked |= news
                as_landed = _without_masked(planned, frozenset(masked))
            base = newer[-1].seq
    return _Landing(
        why=f"other writers appended before each of {MAX_APPENDS} attempts to land; "
        "the next trigger tries again"
    )


def _without_masked(planned: Planned, masked: frozenset[int]) -> Planned:
    """`planned` without the mask entries for `masked` items: a mask left empty goes, and so
    does its change. Compactions stay whole: they replace their items whatever the content."""
    edits: list[Compaction | Mask] = []
    changes: list[Applied] = []
    kept: list[int] = []
    for place, (edit, change) in enumerate(zip(planned.edits, planned.changes, strict=True)):
        if not isinstance(edit, Mask) or not any(i.id in masked for i in edit.items):
            edits.append(edit)
            changes.append(change)
            kept.append(place)
            continue
        keep = [k for k, item in enumerate(change.removed) if item.id not in masked]
        if not keep:
            continue
        kept.append(place)
        counts = [change.counts[k] for k in keep]
        before, after = sum(c[0] for c in counts), sum(c[1] for c in counts)
        edits.append(
            replace(
                edit,
                items=tuple(i for i in edit.items if i.id not in masked),
                tokens_saved=None if edit.tokens_saved is None else before - after,
            )
        )
        changes.append(
            replace(
                change,
                removed=tuple(change.removed[k] for k in keep),
                added=tuple(change.added[k] for k in keep),
                tokens_before=before,
                tokens_after=after,
                counts=tuple(counts),
            )
        )
    # The run numbered the items it creates by the place of each edit in its list (edit k
    # lands as seq base + 1 + k); a mask that went changes the places of the edits after it.
    base = planned.base_seq
    places = {base + 1 + k: base + 1 + j for j, k in enumerate(kept)}
    edits = [_renumbered(edit, lambda item_id: places.get(item_id, item_id)) for edit in edits]
    return replace(planned, edits=tuple(edits), changes=tuple(changes))


def _moved(edit: Compaction | Mask, base: int, shift: int) -> Compaction | Mask:
    """`edit` with the ids this run created (those above `base`) moved up by `shift`."""
    return _renumbered(edit, lambda item_id: item_id + shift if item_id > base else item_id)


def _renumbered(edit: Compaction | Mask, move: Callable[[int], int]) -> Compaction | Mask:
    """`edit` with each item id it names replaced by `move(id)`."""
    if isinstance(edit, Mask):
        return replace(
            edit, items=tuple(MaskedItem(move(i.id), i.content, i.tokens) for i in edit.items)
        )
    return replace(
        edit,
        first=move(edit.first),
        last=move(edit.last),
        replaced=None if edit.replaced is None else tuple(move(i) for i in edit.replaced),
    )
