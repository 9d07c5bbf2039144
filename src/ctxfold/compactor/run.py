"""The compaction run: one pure plan over a snapshot, written once as a generator.

`plan` builds a working view from a `Snapshot`, lets the application's `on_compact` callback and
then the pipeline edit it, and returns the edits with what happened (`Planned`). It never sees a
store or a session. Whenever it needs a summary it yields a `SummaryCall`; whenever it needs the
callback run it yields a `CallbackCall`. The drivers (`ctxfold.compactor.drivers`) answer those,
one by calling, the other by awaiting; landing the edits is `ctxfold.compactor.landing`'s job.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from ctxfold.compactor.context import CompactionContext
from ctxfold.compactor.report import CompactionReport, Outcome, Reason, Trim
from ctxfold.events import Compaction, Event, Mask
from ctxfold.pipeline.accounting import Accounts, StrategyEffect
from ctxfold.pipeline.pipeline import Pipeline
from ctxfold.pipeline.proposals import SummaryCall
from ctxfold.pipeline.rules import Rules
from ctxfold.pipeline.view import Applied, WorkingView
from ctxfold.session.snapshot import Snapshot

Callback = Callable[[CompactionContext], Any]
"""An `on_compact(ctx)` callback: a plain function, or an `async def` one."""


@dataclass(frozen=True)
class CallbackCall:
    """Run the application's `on_compact` callback over `view`, recording into `accounts`.

    The driver builds the `CompactionContext` (it knows how to fetch summaries) and sends nothing
    meaningful back; what the callback did is in the view and the accounts."""

    callback: Callback
    view: WorkingView
    accounts: Accounts
    session_id: str | None


Step = SummaryCall | CallbackCall


@dataclass(frozen=True)
class RunSettings:
    """Everything a run needs besides the snapshot; built by `Compactor` per run."""

    pipeline: Pipeline
    rules: Rules
    target: int
    """Tokens to get down to, as the provider counts (scaled into counter units per snapshot)."""
    reason: Reason
    on_compact: Callback | None = None
    raise_failures: bool = False
    """True for a manual compact: what a summarizer or callback raised is raised, and nothing
    lands (`auto-trigger-isolates-failures`)."""
    shrink: float | None = None
    """When set, the target is at most this share of the snapshot's estimate: after a provider
    refused the prompt, the view must get smaller whatever the estimate says
    (`overflow-recovery`)."""

    def target_for(self, snapshot: Snapshot) -> int:
        """The target of a run over `snapshot`, in provider tokens."""
        if self.shrink is None:
            return self.target
        return min(self.target, int(snapshot.estimate * self.shrink))

    ceiling: int | None = None
    """What a request may take and still be sent with room for the reply, as the provider
    counts (a compactor gives its budget's trigger point): the last rung (`CutToFit`) cuts the
    newest tool output only down to it. None, or anything under the target: the target."""

    window: int | None = None
    """The most a request can hold at all, as the provider counts (a compactor gives its
    budget's window, except after an overflow): the last rung cuts the user's words only to
    get under it. None, or anything under the ceiling: the ceiling."""

    def ceiling_for(self, snapshot: Snapshot) -> int | None:
        """The ceiling of a run over `snapshot`, in provider tokens; `shrink` bounds it as it
        bounds the target, so that each overflow in a row asks for less."""
        if self.ceiling is None or self.shrink is None:
            return self.ceiling
        return min(self.ceiling, int(snapshot.estimate * self.shrink))


@dataclass(frozen=True)
class Planned:
    """What one run planned: the edits (numbered after `base_seq`) and what happened."""

    edits: tuple[Compaction | Mask, ...]
    base_seq: int
    session_id: str | None
    reason: Reason
    tokens_before: int
    tokens_after: int
    target: int
    pinned_tokens: int
    effects: tuple[StrategyEffect, ...]
    accounts: Accounts
    failed: bool
    changes: tuple[Applied, ...] = ()
    """For each of `edits`, what it took out of the view and put in."""
    listener_error: str | None = None
    """What an `on_start` listener raised, in the automatic trigger: reported, never raised."""

    def trims(self, stored: Sequence[Event]) -> tuple[Trim, ...]:
        """What each edit, stored as `stored` (one event per edit, in order), took out."""
        out = []
        for event, edit, change in zip(stored, self.edits, self.changes, strict=True):
            removed = tuple(item.message for item in change.removed)
            spans = [item.span for item in change.removed]
            out.append(
                Trim(
                    session_id=self.session_id,
                    seq=event.seq,
                    kind="mask" if isinstance(edit, Mask) else edit.kind,
                    strategy=edit.strategy,
                    reason=self.reason,
                    first_seq=min(low for low, _ in spans),
                    last_seq=max(high for _, high in spans),
                    removed=removed,
                    replacement=tuple(item.message for item in change.added),
                    summary=change.summary,
                    tokens_before=change.tokens_before,
                    tokens_after=change.tokens_after,
                )
            )
        return tuple(out)

    @property
    def outcome(self) -> Outcome:
        """How the run ended, when nothing is landed yet: "landed" stands for "has edits"."""
        if self.edits:
            return "landed"
        if self.failed:
            return "failed"
        return "within-target" if self.tokens_before <= self.target else "declined"

    def report(
        self,
        duration_s: float,
        *,
        stored: Sequence[Event] = (),
        outcome: Outcome | None = None,
        error: str | None = None,
    ) -> CompactionReport:
        """The report of this run: landed as `stored`, or ended with `outcome`."""
        accounts = self.accounts
        landed = bool(stored)
        tokens_after = self.tokens_after if landed else self.tokens_before
        if error is None and accounts.errors:
            error = accounts.errors[0]
        if self.listener_error:
            error = self.listener_error if error is None else f"{error}; {self.listener_error}"
        return CompactionReport(
            session_id=self.session_id,
            reason=self.reason,
            tokens_before=self.tokens_before,
            tokens_after=tokens_after,
            target=self.target,
            fits=tokens_after <= self.target,
            pinned_tokens=self.pinned_tokens,
            strategies=self.effects,
            summarizer_calls=accounts.summarizer_calls,
            summarizer_input_tokens=accounts.summarizer_input_tokens,
            summarizer_output_tokens=accounts.summarizer_output_tokens,
            summarizer_model=accounts.summarizer_model,
            stretch_tokens=accounts.stretch_tokens,
            identifiers_kept=accounts.identifiers_kept,
            identifiers_restored=accounts.identifiers_restored,
            identifiers_left_out=accounts.identifiers_left_out,
            left_out=tuple(accounts.left_out),
            summaries=tuple(accounts.summaries),
            notes=tuple(accounts.notes),
            duration_s=duration_s,
            outcome="landed" if landed else (outcome or self.outcome),
            error=error,
            events=tuple(stored),
        )


def plan(snapshot: Snapshot, settings: RunSettings) -> Generator[Step, Any, Planned]:
    """Plan a compaction of `snapshot` toward `settings.target`; see the module docstring."""
    ceiling = settings.ceiling_for(snapshot)
    ceiling = None if ceiling is None else snapshot.scaled(ceiling)
    target = snapshot.scaled(settings.target_for(snapshot))
    window = None if settings.window is None else snapshot.scaled(settings.window)
    view = WorkingView(snapshot, target, settings.rules, ceiling=ceiling, window=window)
    accounts = Accounts()
    tokens_before = view.total
    reason = settings.reason
    failed = False
    if settings.on_compact is not None:
        try:
            yield CallbackCall(settings.on_compact, view, accounts, snapshot.session_id)
        except Exception as exc:
            # `auto-trigger-isolates-failures`: a manual compact raises it; the automatic
            # trigger reports it, and nothing the callback did lands.
            if settings.raise_failures:
                raise
            accounts.raised(exc)
            failed = True
        if view.edits and not failed:
            reason = "callback"
            accounts.effects.append(
                StrategyEffect("callback", tokens_before, view.total, len(view.edits))
            )
    if not failed and not view.fits:
        yield from settings.pipeline.plan(view, accounts)
        if accounts.failure is not None:
            if settings.raise_failures:
                raise accounts.failure
            failed = not view.edits
    return Planned(
        edits=() if failed else tuple(view.edits),
        base_seq=snapshot.base_seq,
        session_id=snapshot.session_id,
        reason=reason,
        tokens_before=tokens_before,
        tokens_after=view.total,
        target=view.target,
        pinned_tokens=view.pinned_tokens(),
        effects=tuple(accounts.effects),
        accounts=accounts,
        failed=failed,
        changes=() if failed else tuple(view.changes),
    )
