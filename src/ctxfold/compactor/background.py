"""Background compaction: plan and summarize off the turn, land without waiting.

With ``Compactor(..., background=True)`` each automatic check (`maybe_compact`,
`amaybe_compact`) runs `tend`, written once as a generator and driven by the compactor's two
drivers, with the marks of `Background` read from the budget at each check:

1. **Soft point** (`Background.start` of the trigger point, 85% by default): a run starts in the
   background, unless one is in flight or waiting to land. It reads a snapshot and plans on it
   (`ctxfold.compactor.landing.planning`) with the compactor's pipeline, summarizer and drivers,
   like any run, in a thread for `maybe_compact` and an asyncio task for `amaybe_compact`. It
   never writes to the store: everything it decides waits in memory for a check to land it.
2. **A finished run** lands at the first check at or past the soft point, by the rules of every
   landing (`landing_of`): rebased over what was appended meanwhile, whose messages stay verbatim
   after the summary, and over masks (see `ctxfold.compactor.landing`); dropped whole, never
   half-applied, when a compaction, pin, retraction or reset landed after the history it read
   (outcome "stale"). A new run then starts if the estimate is still past the soft point.
   Landing before the trigger makes room early, so that a big step later need not wait.
3. **Past the trigger point** the turn runs the free rungs: the pipeline's strategies before its
   first `Summarize` (none when the compactor has an `on_compact` callback), which call no
   summarizer. A run in flight goes on: it lands over their masks later.
4. **No result yet**: the turn goes on without waiting while the estimate stays below the hard
   mark (`Background.overshoot` of the reserve between the trigger point and the window; by
   default the whole reserve, so the window itself). Past it the request may not go out as it
   stands: the turn waits for the run in flight, at most `Background.wait_s` seconds, and lands
   it, when what that run can save is enough. If there is no such run, it did not finish in
   time, or landing leaves the estimate past the mark, the turn compacts in the foreground,
   exactly as without background. So a request never grows past the hard mark.

Failures are reported, never lost: a run whose summarizer or callback raised, or that declined,
is reported at the next check like a foreground run of the automatic trigger (logged, passed to
`on_report`, returned by the check), and so is anything else a background run raised.

`Compactor.close()` (or leaving a ``with`` block) stops new runs, cancels tasks and joins the
threads in flight; results not landed are dropped, since nothing of them was written. A thread
also ends by itself when its run ends, so none outlives its run.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ctxfold.compactor.drivers import Edge, run_async, run_sync
from ctxfold.compactor.landing import landing_of, planning
from ctxfold.compactor.report import CompactionReport
from ctxfold.compactor.run import Planned, RunSettings
from ctxfold.errors import ConfigurationError
from ctxfold.tokens import Budget

if TYPE_CHECKING:
    from ctxfold.session import Session

log = logging.getLogger("ctxfold.compactor")


@dataclass(frozen=True)
class Background:
    """When background runs start, and how far a turn may go on without one.

    - `start`: the soft point, as a fraction of the trigger point (default 0.85); it is never
      below the target.
    - `overshoot`: the hard mark, how far past the trigger point a request may grow while a run
      is in flight, as a fraction of the reserve between the trigger point and the window
      (default 1: the request stays within the window, and may take the room the reserve keeps
      for the reply). An application that sends a fixed `max_tokens` should keep trigger +
      overshoot × reserve + `max_tokens` within the window; one that always asks for the
      model's whole output should set 0: a turn at the trigger then waits for the run.
    - `wait_s`: seconds a turn past the hard mark waits for the run in flight before it
      compacts in the foreground (default 30).

    >>> Background().marks(Budget(window=10_000, reserve=2_000))
    (6800, 8000, 10000)
    >>> Background(overshoot=0.5).marks(Budget(window=10_000, reserve=2_000))
    (6800, 8000, 9000)
    """

    start: float = 0.85
    overshoot: float = 1.0
    wait_s: float = 30.0

    def __post_init__(self) -> None:
        if not isinstance(self.start, (int, float)) or not 0 < self.start <= 1:
            raise ConfigurationError(f"start must be a fraction in (0, 1], not {self.start!r}")
        if not isinstance(self.overshoot, (int, float)) or not 0 <= self.overshoot <= 1:
            raise ConfigurationError(
                f"overshoot must be a fraction in [0, 1], not {self.overshoot!r}"
            )
        if (
            isinstance(self.wait_s, bool)
            or not isinstance(self.wait_s, (int, float))
            or not self.wait_s >= 0  # NaN too
        ):
            raise ConfigurationError(f"wait_s must be 0 or more seconds, not {self.wait_s!r}")

    def marks(self, budget: Budget) -> tuple[int, int, int]:
        """(soft point, trigger point, overshoot mark) in tokens, for `budget`."""
        trigger = budget.trigger_tokens
        soft = max(budget.target_tokens + 1, min(trigger, int(trigger * self.start)))
        return soft, trigger, trigger + int((budget.window - trigger) * self.overshoot)


# -- the steps `tend` yields besides those of a compaction ----------------------------------------
@dataclass(frozen=True)
class Measure:
    """Answered with the session's estimate (tokens, tool schemas included), or None when it
    holds fewer than the budget's `min_messages` messages."""


@dataclass(frozen=True)
class Look:
    """Answered with the session's background run (a `Run`), or None."""


@dataclass(frozen=True)
class Begin:
    """Start a background run that plans with `settings`, the session's estimate being
    `estimate` tokens; answered with nothing."""

    settings: RunSettings
    estimate: int


@dataclass(frozen=True)
class Wait:
    """Wait up to `seconds` for `run` to finish; answered with nothing."""

    run: Run
    seconds: float


@dataclass(frozen=True)
class Forget:
    """Take `run` out of the session's slot (its result is being landed or reported)."""

    run: Run


class Run:
    """One background run: when it started, and what it came to once `done` (a `Planned`, or
    what it raised). Only its own thread or task sets the result."""

    def __init__(self, session_id: str, settings: RunSettings, estimate: int) -> None:
        self.session_id = session_id
        self.settings = settings
        self.estimate = estimate
        """The session's estimate when the run began (tokens)."""
        self.started = time.perf_counter()
        self.result: Planned | BaseException | None = None
        self.thread: threading.Thread | None = None
        self.task: asyncio.Task[Any] | None = None
        self._done = threading.Event()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def finish(self, result: Planned | BaseException) -> None:
        self.result = result
        self._done.set()

    def wait(self, seconds: float | None) -> None:
        self._done.wait(seconds)

    async def await_done(self, seconds: float) -> None:
        task = self.task
        if task is not None and task.get_loop() is _running_loop():
            await asyncio.wait({task}, timeout=seconds)
        else:
            await asyncio.to_thread(self._done.wait, seconds)


def tend(
    policy: Background,
    budget: Budget,
    settings: Callable[[], RunSettings],
    foreground: Callable[[], Generator[Any, Any, CompactionReport]],
    free: Callable[[], Generator[Any, Any, CompactionReport]] | None = None,
) -> Generator[Any, Any, list[CompactionReport]]:
    """One automatic check with background runs (see the module docstring); returns the reports
    of every run it settled, in order. `free` is a foreground run of the rungs that call no
    summarizer (None when there are none)."""
    soft, trigger, overshoot = policy.marks(budget)
    reports: list[CompactionReport] = []
    estimate: int | None = yield Measure()
    run: Run | None = yield Look()
    if run is not None and run.done:
        planned = run.result
        holds_edits = isinstance(planned, Planned) and bool(planned.edits)
        # A finished result lands from the soft point on, not only at the trigger: the room it
        # makes now is what lets a big step later go out without waiting for another summary.
        if not holds_edits or (estimate is not None and estimate >= soft):
            yield Forget(run)
            report = yield from _settle(run, estimate)
            reports.append(report)
            run = None
            if report.landed:
                estimate = yield Measure()
    if estimate is None or estimate < soft:
        return reports
    if estimate >= trigger and free is not None:
        # Past the trigger the free rungs run in the turn: they take no summarizer's time, and
        # a run in flight is rebased over their masks when it lands, so it goes on. They run
        # quiet: listeners hear of them, start and end, only when they land or fail, not at
        # each turn that finds nothing to clear.
        report = yield from free()
        if report.landed or report.error:
            reports.append(report)
        if report.landed:
            estimate = yield Measure()
            if estimate is None:
                return reports
    if estimate < overshoot:
        # Within the hard mark nothing waits: a run in flight lands at a later check.
        if run is None and estimate >= soft:
            yield Begin(settings(), estimate)
        return reports
    # Past the hard mark the request may not go out as it stands. Waiting for the run in flight
    # helps only if what it can save (down to the target from where it began) is enough; else
    # the turn compacts in the foreground at once, rather than wait twice.
    if run is not None and not run.done:
        saving = max(0, run.estimate - budget.target_tokens)
        if estimate - saving >= overshoot:
            run = None
    if run is not None:
        if not run.done:
            yield Wait(run, policy.wait_s)
        if run.done:
            yield Forget(run)
            report = yield from _settle(run, estimate)
            reports.append(report)
            if report.landed:
                estimate = yield Measure()
                if estimate is None or estimate < overshoot:
                    if estimate is not None and estimate >= soft:
                        yield Begin(settings(), estimate)
                    return reports
    reports.append((yield from foreground()))
    return reports


def _settle(run: Run, estimate: int | None) -> Generator[Any, Any, CompactionReport]:
    """Land a finished run, or report why it cannot land."""
    result = run.result
    if isinstance(result, Planned):
        report: CompactionReport = yield from landing_of(result, run.started)
        return report
    assert result is not None
    tokens = estimate or 0
    return CompactionReport(
        session_id=run.session_id,
        reason=run.settings.reason,
        tokens_before=tokens,
        tokens_after=tokens,
        target=run.settings.target,
        fits=tokens <= run.settings.target,
        pinned_tokens=0,
        duration_s=time.perf_counter() - run.started,
        outcome="failed",
        error=f"the background run raised {type(result).__name__}: {result}",
    )


class BackgroundRuns:
    """The background runs of one compactor, one slot per session; `check` and `acheck` drive
    `tend` for a session."""

    def __init__(self, policy: Background) -> None:
        self.policy = policy
        self.closed = False
        self._slots: dict[int, tuple[Session, Run]] = {}
        self._lock = threading.Lock()

    # -- checking --------------------------------------------------------------------------
    def check(
        self,
        session: Session,
        flow: Generator[Any, Any, list[CompactionReport]],
        edge: Edge,
        measure: Callable[[Session], int | None],
    ) -> list[CompactionReport]:
        """Drive `flow` (a `tend`) with blocking calls; new runs go to threads."""

        def more(step: Any) -> Any:
            if isinstance(step, Measure):
                return measure(session)
            if isinstance(step, Begin):
                return self._begin_thread(session, step, edge)
            if isinstance(step, Wait):
                return step.run.wait(step.seconds)
            return self._slot(session, step)

        return run_sync(flow, edge, session, more=more)

    async def acheck(
        self,
        session: Session,
        flow: Generator[Any, Any, list[CompactionReport]],
        edge: Edge,
        measure: Callable[[Session], int | None],
    ) -> list[CompactionReport]:
        """Drive `flow` on the event loop; new runs are asyncio tasks."""

        async def more(step: Any) -> Any:
            if isinstance(step, Measure):
                return await asyncio.to_thread(measure, session)
            if isinstance(step, Begin):
                return self._begin_task(session, step, edge)
            if isinstance(step, Wait):
                return await step.run.await_done(step.seconds)
            return self._slot(session, step)

        answer: Callable[[Any], Awaitable[Any]] = more
        return await run_async(flow, edge, session, more=answer)

    # -- the slots -------------------------------------------------------------------------
    def _slot(self, session: Session, step: Any) -> Run | None:
        """Answer the steps both drivers answer alike: they only read or clear the slot."""
        if isinstance(step, Look):
            return self._look(session)
        if isinstance(step, Forget):
            self._forget(session, step.run)
            return None
        raise ConfigurationError(f"a background check yielded {step!r}, which nothing answers")

    def _look(self, session: Session) -> Run | None:
        with self._lock:
            slot = self._slots.get(id(session))
            return slot[1] if slot is not None and slot[0] is session else None

    def _forget(self, session: Session, run: Run) -> None:
        with self._lock:
            slot = self._slots.get(id(session))
            if slot is not None and slot[1] is run:
                del self._slots[id(session)]

    def _claim(self, session: Session, step: Begin) -> Run | None:
        with self._lock:
            if self.closed:
                return None
            run = Run(session.id, step.settings, step.estimate)
            # The slot keeps the session alive, so its id cannot be reused while it is here.
            self._slots[id(session)] = (session, run)
            return run

    def _begin_thread(self, session: Session, step: Begin, edge: Edge) -> None:
        run = self._claim(session, step)
        if run is None:
            return
        settings = step.settings

        def work() -> None:
            try:
                result: Planned | BaseException = run_sync(planning(settings), edge, session)
            except BaseException as exc:  # reported at the next check, never lost
                result = exc
            run.finish(result)

        run.thread = threading.Thread(
            target=work, name=f"ctxfold-background-{session.id}", daemon=True
        )
        run.thread.start()

    def _begin_task(self, session: Session, step: Begin, edge: Edge) -> None:
        run = self._claim(session, step)
        if run is None:
            return
        settings = step.settings

        async def work() -> None:
            try:
                result: Planned | BaseException = await run_async(planning(settings), edge, session)
            except BaseException as exc:  # cancelled, or raised: reported at the next check
                result = exc
                run.finish(result)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                return
            run.finish(result)

        run.task = asyncio.create_task(work(), name=f"ctxfold-background-{session.id}")

    # -- closing ---------------------------------------------------------------------------
    def close(self, timeout: float | None = None) -> None:
        """Start no more runs; cancel tasks and join threads in flight (up to `timeout` seconds
        each). Results not landed are dropped."""
        for run in self._drain():
            task = run.task
            if task is not None and not task.done():
                loop = task.get_loop()
                if not loop.is_closed():
                    loop.call_soon_threadsafe(task.cancel)
            if run.thread is not None:
                run.thread.join(timeout)

    async def aclose(self) -> None:
        """`close` for asyncio code: tasks of this loop are cancelled and awaited."""
        loop = _running_loop()
        for run in self._drain():
            task = run.task
            if task is not None and not task.done():
                if task.get_loop() is loop:
                    task.cancel()
                    await asyncio.wait({task})
                elif not task.get_loop().is_closed():
                    task.get_loop().call_soon_threadsafe(task.cancel)
            if run.thread is not None:
                await asyncio.to_thread(run.thread.join)

    def _drain(self) -> list[Run]:
        with self._lock:
            self.closed = True
            runs = [run for _, run in self._slots.values()]
            self._slots.clear()
        return runs


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


__all__ = ["Background", "BackgroundRuns", "tend"]
