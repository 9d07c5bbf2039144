"""The compaction run, written once as a generator, and the two drivers that run it.

`plan_compaction` reads a session, builds a working view, lets an application callback and then
the pipeline edit it, and appends the edits in one atomic append with `expected_seq`. Whenever it
needs a summary it yields a `SummaryCall`; whenever it needs to run the application's callback it
yields a `CallbackCall`. `run_sync` and `run_async` answer those, the one by calling, the other by
awaiting (callbacks run in a worker thread there, so a sync callback may still ask for an async
summarizer's answer).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from ctxfold._drive import adrive, drive
from ctxfold.compactor.callback import CompactionContext
from ctxfold.compactor.report import CompactionReport, Reason
from ctxfold.errors import ConflictError, SummarizerError
from ctxfold.events import COMPACTION, MASK, Event, NewEvent
from ctxfold.pipeline.base import Pipeline, StrategyEffect, SummaryCall
from ctxfold.pipeline.view import WorkingView
from ctxfold.projection import Item
from ctxfold.protocols import TokenCounter
from ctxfold.session import Session
from ctxfold.summarizers.base import as_summarizer
from ctxfold.summarizers.request import SummaryRequest, SummaryResult

Callback = Callable[[CompactionContext], Any]


@dataclass(frozen=True)
class CallbackCall:
    """Run the application's `on_compact` callback with this context."""

    callback: Callback
    context: CompactionContext


Step = SummaryCall | CallbackCall
Run = Generator[Step, Any, CompactionReport]


@dataclass(frozen=True)
class Settings:
    """Everything a run needs besides the session; built by `Compactor` per run."""

    pipeline: Pipeline
    counter: TokenCounter
    target: int
    keep_steps: int
    keep_recent_tokens: int
    tools_tokens: int
    summary_role: str
    redact: Callable[[str], str] | None
    on_compact: Callback | None
    raise_failures: bool = False
    """True for a manual compact: a summarizer's exception is raised and nothing lands
    (`auto-trigger-isolates-failures`)."""


def plan_compaction(session: Session, settings: Settings, reason: Reason) -> Run:
    """Compact `session` toward `settings.target`; returns the report. See the module docstring.

    On a conflict (another writer appended first) the run is rebased when only plain messages
    arrived: its edits name items by id, so they still hold, and the new messages project after
    them verbatim (`late-messages-stay-verbatim`). When another compaction landed, it re-plans once,
    then declines (`one-compaction-wins`).
    """
    started = time.perf_counter()
    for attempt in (1, 2):
        view, base = _view_of(session, settings)
        tokens_before = view.total
        if settings.on_compact is not None:
            context = CompactionContext(view, _no_resolver, session.id)
            yield CallbackCall(settings.on_compact, context)
            if context.compacted:
                reason = "callback"
        effects: list[StrategyEffect] = []
        if not view.fits:
            effects = yield from settings.pipeline.plan(view)
        if view.stats.failure is not None and settings.raise_failures:
            # `auto-trigger-isolates-failures`: a manual compact raises what the summarizer raised
            raise view.stats.failure
        stored: list[Event] = []
        error = view.stats.errors[0] if view.stats.errors else None
        if view.events:
            try:
                stored = _land(session, view.events, base)
            except ConflictError as exc:
                if attempt == 1:
                    continue
                error = f"declined: {exc}"
        break
    return _report(session, view, reason, tokens_before, effects, stored, error, started)


def _no_resolver(request: SummaryRequest) -> SummaryResult | None:  # pragma: no cover
    raise SummarizerError("the compactor's driver sets the resolver before running a callback")


def _view_of(session: Session, settings: Settings) -> tuple[WorkingView, int]:
    session.refresh()
    items = session.items()
    base = session.last_seq
    tally = session.tally(settings.counter)
    counter = settings.counter

    projected = {item.id: item.message for item in items}

    def count(item: Item) -> int:
        # The tally's cached count holds only for the message it counted: a masked item keeps
        # its id but not its message.
        if projected.get(item.id) is item.message:
            return tally.count(item.id)
        return counter.count_message(item.message)

    counted = sum(count(item) for item in items)
    fixed = max(0, tally.total - counted) + settings.tools_tokens
    target = settings.target
    if tally.anchored and tally.estimate > 0 and tally.total > 0:
        # The provider counts differently from our counter: scale the target into our units so
        # that "fits" means fits by the provider's count.
        target = int(target * (counted + fixed) / max(tally.estimate, 1))
    view = WorkingView(
        items,
        count=count,
        count_text=counter.count_text,
        target=target,
        next_seq=base + 1,
        keep_steps=settings.keep_steps,
        keep_recent_tokens=settings.keep_recent_tokens,
        pinned_ids=session.pinned,
        fixed_tokens=fixed,
        summary_role=settings.summary_role,
        redact=settings.redact,
    )
    return view, base


def _land(session: Session, events: Sequence[NewEvent], base: int) -> list[Event]:
    """Append `events` planned against `base`; rebase over plain appends that came meanwhile."""
    while True:
        try:
            return session.append(list(events), expected_seq=base)
        except ConflictError:
            session.refresh()
            newer = session.events(after=base)
            if any(e.type in (COMPACTION, MASK) for e in newer):
                raise
            shift = newer[-1].seq - base if newer else 0
            events = [_shift(e, base, shift) for e in events]
            base += shift


def _shift(event: NewEvent, base: int, shift: int) -> NewEvent:
    """Renumber the ids this run created (those above `base`) by `shift`."""

    def move(item_id: int) -> int:
        return item_id + shift if item_id > base else item_id

    data = dict(event.data)
    if event.type == COMPACTION:
        data["first"], data["last"] = move(data["first"]), move(data["last"])
        data["replaced"] = [move(i) for i in data.get("replaced", [])]
    elif event.type == MASK:
        data["items"] = [{**entry, "id": move(entry["id"])} for entry in data["items"]]
    return NewEvent(event.type, data)


def _report(
    session: Session,
    view: WorkingView,
    reason: Reason,
    tokens_before: int,
    effects: list[StrategyEffect],
    stored: list[Event],
    error: str | None,
    started: float,
) -> CompactionReport:
    stats = view.stats
    return CompactionReport(
        session_id=session.id,
        reason=reason,
        tokens_before=tokens_before,
        tokens_after=view.total if stored else tokens_before,
        target=view.target,
        fits=(view.total if stored else tokens_before) <= view.target,
        pinned_tokens=view.pinned_tokens(),
        strategies=tuple(effects),
        summarizer_calls=stats.summarizer_calls,
        summarizer_input_tokens=stats.summarizer_input_tokens,
        summarizer_output_tokens=stats.summarizer_output_tokens,
        summarizer_model=stats.summarizer_model,
        stretch_tokens=stats.stretch_tokens,
        identifiers_kept=stats.identifiers_kept,
        identifiers_left_out=stats.identifiers_left_out,
        left_out=tuple(stats.left_out),
        summaries=tuple(stats.summaries),
        notes=tuple(stats.notes),
        duration_s=time.perf_counter() - started,
        landed=bool(stored),
        error=error,
        events=tuple(stored),
    )


# -- answering the run's steps ----------------------------------------------------------------
def run_sync(run: Generator[Step, Any, Any], default: Any) -> Any:
    """Drive a run, calling summarizers and callbacks directly."""

    def resolve(request: SummaryRequest, summarizer: Any = None) -> SummaryResult | None:
        return as_summarizer(summarizer if summarizer is not None else default)(request)

    def answer(step: Step) -> SummaryResult | None:
        if isinstance(step, SummaryCall):
            return resolve(step.request, step.summarizer)
        _call_back(step, resolve)
        return None

    return drive(run, answer)


async def run_async(run: Generator[Step, Any, Any], default: Any) -> Any:
    """Drive a run on an event loop: summarizers are awaited when async, called in a worker
    thread when sync (they do network I/O); callbacks run in a worker thread. The run itself
    reads and appends to the store, so it is resumed in a worker thread too."""
    loop = asyncio.get_running_loop()

    async def aresolve(request: SummaryRequest, summarizer: Any = None) -> SummaryResult | None:
        chosen = as_summarizer(summarizer if summarizer is not None else default)
        if chosen.is_async or callable(getattr(chosen.wrapped, "acall", None)):
            return await chosen.acall(request)
        return await asyncio.to_thread(chosen, request)

    def resolve_from_thread(request: SummaryRequest, summarizer: Any = None) -> Any:
        return asyncio.run_coroutine_threadsafe(aresolve(request, summarizer), loop).result()

    async def answer(step: Step) -> SummaryResult | None:
        if isinstance(step, SummaryCall):
            return await aresolve(step.request, step.summarizer)
        await asyncio.to_thread(_call_back, step, resolve_from_thread)
        return None

    return await adrive(run, answer, in_thread=True)


def _call_back(step: CallbackCall, resolve: Callable[..., SummaryResult | None]) -> None:
    step.context._resolve = resolve
    step.callback(step.context)
