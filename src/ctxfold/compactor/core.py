"""`Compactor`: when to compact a session, and the entry points that run a compaction."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ctxfold.compactor.engine import Callback, Settings, plan_compaction, run_async, run_sync
from ctxfold.compactor.report import CompactionReport, CompactionStart, Reason
from ctxfold.errors import BudgetError, ConfigurationError, EmptySessionError
from ctxfold.pipeline.base import Pipeline
from ctxfold.pipeline.clear import ClearToolResults
from ctxfold.protocols import TokenCounter
from ctxfold.session import AsyncSession, Session
from ctxfold.tokens import Budget
from ctxfold.tokens import counter as make_counter

log = logging.getLogger("ctxfold.compactor")


class Compactor:
    """Keeps sessions within a `Budget`.

    - `budget`: the window, trigger and target; None turns the automatic trigger off
      (`budget-live-and-validated`). It may be changed at any time and takes effect at the next
      check.
    - `pipeline`: the ladder (default ClearToolResults → Summarize → SlidingWindow).
    - `summarizer`: used by `Summarize` strategies that name none (default: extractive, no model).
    - `counter`: the token counter (default `ctxfold.tokens.counter("auto")`).
    - `on_compact(ctx)`: an application callback that picks ranges itself (the callback guarantees,
      `callback-ranges-compose` and the three after it); it runs before the pipeline, which then
      only runs if the view still does not fit.
    - `redact(text) -> text`: applied to every summary before it is stored (`summaries-redacted`).
    - `tools`: the tool schemas sent with each request; they count against the budget
      (`tool-schemas-counted`).
    - `on_start(CompactionStart)`, `on_report(CompactionReport)`: observe each run (`run-reported`).
    - `summary_role`: the role summaries and notes are projected with (default "user").

    >>> from ctxfold import Budget, Message
    >>> from ctxfold.storage import MemoryStore
    >>> session = MemoryStore().session("s")
    >>> _ = session.append([Message("system", "Be brief."), Message("user", "hello")])
    >>> Compactor(Budget(window=8000)).should_compact(session)
    False
    """

    def __init__(
        self,
        budget: Budget | None,
        pipeline: Pipeline | None = None,
        summarizer: Any = None,
        counter: TokenCounter | None = None,
        on_compact: Callback | None = None,
        redact: Callable[[str], str] | None = None,
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        on_start: Callable[[CompactionStart], Any] | None = None,
        on_report: Callable[[CompactionReport], Any] | None = None,
        summary_role: str = "user",
    ) -> None:
        from ctxfold.summarizers.extractive import ExtractiveSummarizer

        if budget is not None and not isinstance(budget, Budget):
            raise BudgetError(f"budget must be a ctxfold.Budget or None, not {budget!r}")
        if summary_role not in ("user", "assistant", "system"):
            raise ConfigurationError(
                f"summary_role must be user, assistant or system, not {summary_role!r}"
            )
        self.budget = budget
        self.counter = counter or make_counter("auto")
        self.summarizer = (
            summarizer
            if summarizer is not None
            else ExtractiveSummarizer(count=self.counter.count_text)
        )
        self.pipeline = pipeline or Pipeline.default()
        self.on_compact = on_compact
        self.redact = redact
        self.tools = list(tools or [])
        self.on_start = on_start
        self.on_report = on_report
        self.summary_role = summary_role
        self.last_report: CompactionReport | None = None
        self._tools_tokens = self.counter.count_tools(self.tools) if self.tools else 0
        self._overflows: dict[str, int] = {}

    # -- checking --------------------------------------------------------------------------
    def estimate(self, session: Session) -> int:
        """Tokens the next request would take: the last provider usage report plus a count of
        what came after, else a count; tool schemas included. O(1) per appended message."""
        tally = session.tally(self.counter)
        return tally.estimate if tally.anchored else tally.total + self._tools_tokens

    def should_compact(self, session: Session) -> bool:
        """True when the estimate has reached the trigger and the session has at least
        `min_messages` messages (`min-messages`). Always False without a budget
        (`budget-live-and-validated`)."""
        budget = self.budget
        if budget is None:
            return False
        if session.message_count() < budget.min_messages:
            return False
        return budget.should_compact(self.estimate(session))

    # -- running ---------------------------------------------------------------------------
    def maybe_compact(self, session: Session) -> CompactionReport | None:
        """The automatic trigger, for after each turn: compacts only when `should_compact`.
        A summarizer failure is logged and reported, never raised
        (`auto-trigger-isolates-failures`)."""
        if not self.should_compact(session):
            return None
        return self._finish(run_sync(self._run(session, "threshold"), self.summarizer))

    async def amaybe_compact(self, session: Session | AsyncSession) -> CompactionReport | None:
        """`maybe_compact` for asyncio code; store I/O runs in worker threads."""
        sync = _sync(session)
        if not await asyncio.to_thread(self.should_compact, sync):
            return None
        report = await run_async(self._run(sync, "threshold"), self.summarizer)
        return self._finish(report)

    def compact(self, session: Session, *, target: int | None = None) -> CompactionReport | None:
        """Compact now, toward the budget's target (or `target` tokens). Returns the report, or
        None when nothing was appended (declined, or already within the target); the report is
        in `last_report` either way. Raises on an empty session (`empty-session-refused`) and when
        the summarizer raises (`auto-trigger-isolates-failures`)."""
        report = run_sync(self._run(session, "manual", target, manual=True), self.summarizer)
        return self._finish(report, manual=True)

    async def acompact(
        self, session: Session | AsyncSession, *, target: int | None = None
    ) -> CompactionReport | None:
        """`compact` for asyncio code."""
        sync = _sync(session)
        report = await run_async(self._run(sync, "manual", target, manual=True), self.summarizer)
        return self._finish(report, manual=True)

    def recover_from_overflow(self, session: Session) -> CompactionReport | None:
        """After a provider's context-overflow error (see `is_context_overflow`): compact, so the
        caller can retry once. A second overflow in the same session clears tool results
        instead (`overflow-recovery`). Nothing is appended to the conversation itself."""
        return self._finish(run_sync(self._overflow_run(session), self.summarizer))

    async def arecover_from_overflow(
        self, session: Session | AsyncSession
    ) -> CompactionReport | None:
        sync = _sync(session)
        return self._finish(await run_async(self._overflow_run(sync), self.summarizer))

    # -- internals -------------------------------------------------------------------------
    def _overflow_run(self, session: Session) -> Any:
        seen = self._overflows.get(session.id, 0)
        self._overflows[session.id] = seen + 1
        if seen == 0:
            return self._run(session, "overflow")
        clear = Pipeline([ClearToolResults(min_tokens=0)])
        return self._run(session, "overflow", target=0, pipeline=clear)

    def _run(
        self,
        session: Session,
        reason: Reason,
        target: int | None = None,
        *,
        manual: bool = False,
        pipeline: Pipeline | None = None,
    ) -> Any:
        budget = self.budget
        if manual and not session.message_count():
            raise EmptySessionError(f"session {session.id!r} has no messages to compact")
        if budget is None and target is None:
            raise BudgetError("this compactor has no budget; pass target= or set a budget")
        settings = Settings(
            pipeline=pipeline or self.pipeline,
            counter=self.counter,
            target=target if target is not None else budget.target_tokens,  # type: ignore[union-attr]
            keep_steps=budget.keep_steps if budget else 1,
            keep_recent_tokens=budget.keep_recent_tokens if budget else 0,
            tools_tokens=self._tools_tokens,
            summary_role=self.summary_role,
            redact=self.redact,
            on_compact=self.on_compact,
            raise_failures=manual,
        )
        if self.on_start is not None:
            self.on_start(
                CompactionStart(session.id, reason, self.estimate(session), settings.target)
            )
        return plan_compaction(session, settings, reason)

    def _finish(self, report: CompactionReport, *, manual: bool = False) -> CompactionReport | None:
        self.last_report = report
        if report.error:
            log.warning("ctxfold: %s", report.describe())
        elif not report.landed and report.notes:
            log.warning("ctxfold: %s; %s", report.describe(), "; ".join(report.notes))
        else:
            log.info("ctxfold: %s", report.describe())
        if self.on_report is not None:
            self.on_report(report)
        if report.landed:
            return report
        return None if manual else report


def _sync(session: Session | AsyncSession) -> Session:
    return session.sync if isinstance(session, AsyncSession) else session
