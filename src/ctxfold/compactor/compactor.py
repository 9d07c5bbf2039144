"""`Compactor`: when to compact a session, and the entry points that run a compaction.

A compactor holds configuration only (the budget, the ladder, the summarizer, listeners), never
the state of a run, so one compactor may serve many sessions from many threads at once. Each run
is `ctxfold.compactor.landing.compaction`, driven by `run_sync` or `run_async`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import takewhile
from typing import Any

from ctxfold.compactor.background import Background, BackgroundRuns, tend
from ctxfold.compactor.drivers import Edge, run_async, run_sync
from ctxfold.compactor.landing import compaction
from ctxfold.compactor.report import CompactionReport, CompactionStart, Reason, Trim
from ctxfold.compactor.run import Callback, RunSettings
from ctxfold.errors import BudgetError, ConfigurationError, InvalidInputError
from ctxfold.messages import Message
from ctxfold.overflow import overflow_figures
from ctxfold.pipeline.clear import ClearToolResults
from ctxfold.pipeline.fit import CutToFit
from ctxfold.pipeline.pipeline import Pipeline
from ctxfold.pipeline.rules import SUMMARY_ROLES, Rules, SummaryRole
from ctxfold.pipeline.strategy import Strategy
from ctxfold.pipeline.summarize import Summarize
from ctxfold.protocols import Summarizer, TokenCounter
from ctxfold.session import AsyncSession, Session
from ctxfold.summarizers.base import as_summarizer
from ctxfold.summarizers.extractive import ExtractiveSummarizer
from ctxfold.summarizers.redact import redact_secrets
from ctxfold.tokens import Budget
from ctxfold.tokens.budget import target_in_tokens
from ctxfold.tokens.counters import as_counter
from ctxfold.tokens.tally import Tally, TextCounts

log = logging.getLogger("ctxfold.compactor")

AppTrigger = Callable[[int, Session], bool]
"""`should_compact(estimate, session) -> bool`: the application's own trigger; `estimate` is in
tokens."""

OVERFLOW_SHRINK = 0.5
"""After a context overflow, the view is brought to at most this share of its estimate: the
provider refused what the estimate said would fit, so the estimate was short."""


class Compactor:
    """Keeps sessions within a `Budget`.

    - `budget`: the window, trigger and target; None turns the automatic trigger off
      (`budget-live-and-validated`). It may be changed at any time and takes effect at the next
      check; anything but a `Budget` or None is refused when it is set.
    - `pipeline`: the ladder (default `Pipeline.default()`); a list of strategies is read as
      `Pipeline(list)`.
    - `summarizer`: used by `Summarize` strategies that name none (default: extractive, no model).
    - `counter`: the token counter, or a name for `ctxfold.tokens.counter` ("cl100k_base", a
      model name; default "auto").
    - `on_compact(ctx)`: an application callback that picks ranges itself (the callback guarantees,
      `callback-ranges-compose` and the three after it); it runs before the pipeline, which then
      only runs if the view still does not fit. An `async def on_compact` runs under `acompact`
      and `amaybe_compact` and uses `await ctx.acompact(...)`.
    - `redact(text) -> text`: applied to every summary before it is stored (`summaries-redacted`).
    - `tools`: the tool schemas sent with each request; they count against the budget
      (`tool-schemas-counted`).
    - `on_start(CompactionStart)`, `on_report(CompactionReport)`: observe each run (`run-reported`).
    - `on_trim(Trim)`: told what each landed edit took out of the view, once it is stored
      (`trim-reported`).
      In the automatic trigger (and overflow recovery) a listener that raises is logged and named
      in the report's `error`, and the run goes on; a manual `compact()` raises it.
    - `should_compact(estimate, session) -> bool`: the application's own trigger, asked at each
      automatic check beside the budget (`app-trigger`). Compaction starts when either says so:
      the predicate can start it early (every few turns, at the end of a task), never hold it
      back once the estimate reaches the budget's trigger point, so a session cannot overflow.
      `min_messages` holds either way; the run aims at the budget's target (with `on_compact`,
      the callback picks the ranges). `estimate` is in tokens.
    - `summary_role`: the role summaries and notes are projected with (default "user").
    - `background`: True (or a `Background` with its marks) plans and summarizes off the turn,
      from a soft point below the trigger, and lands the finished result at a later check at
      once; a turn waits only when its request would pass the hard mark (by default the window)
      (`ctxfold.compactor.background`, `background-lands-by-the-same-rules`,
      `background-bounded`). Close the compactor (`close()`, `aclose()`, or a ``with`` block) to
      stop its runs.

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
        pipeline: Pipeline | Sequence[Strategy] | None = None,
        summarizer: Summarizer | None = None,
        counter: TokenCounter | str | None = None,
        on_compact: Callback | None = None,
        redact: Callable[[str], str] | None = None,
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        on_start: Callable[[CompactionStart], Any] | None = None,
        on_report: Callable[[CompactionReport], Any] | None = None,
        on_trim: Callable[[Trim], Any] | None = None,
        should_compact: AppTrigger | None = None,
        summary_role: SummaryRole = "user",
        background: bool | Background = False,
    ) -> None:
        self.budget = budget
        if should_compact is not None and budget is None:
            raise ConfigurationError(
                "should_compact needs a budget: the budget gives the target a compaction aims "
                "at, and stays the safety net at its trigger point"
            )
        if not isinstance(summary_role, str) or summary_role not in SUMMARY_ROLES:
            raise ConfigurationError(
                f"summary_role must be 'user', 'assistant' or 'system', not {summary_role!r}"
            )
        if not isinstance(background, (bool, Background)):
            raise ConfigurationError(
                f"background must be True, False or a Background(...), not {background!r}"
            )
        if summarizer is not None:
            as_summarizer(summarizer)  # refuses, now, what cannot be called with a request
        for name, listener, signature in (
            ("on_compact", on_compact, "on_compact(ctx)"),
            ("redact", redact, "redact(text) -> text"),
            ("on_start", on_start, "on_start(CompactionStart)"),
            ("on_report", on_report, "on_report(CompactionReport)"),
            ("on_trim", on_trim, "on_trim(Trim)"),
            ("should_compact", should_compact, "should_compact(estimate, session) -> bool"),
        ):
            if listener is not None and not callable(listener):
                raise ConfigurationError(
                    f"{name} must be a function {signature}, or None, not {listener!r}"
                )
        self.counter = as_counter("auto" if counter is None else counter, "counter")
        self._text_counts = TextCounts(self.counter)
        self.summarizer: Summarizer = (
            summarizer if summarizer is not None else ExtractiveSummarizer(count=self._text_counts)
        )
        self.pipeline = (
            Pipeline.default()
            if pipeline is None
            else pipeline
            if isinstance(pipeline, Pipeline)
            else Pipeline(pipeline)
        )
        self.on_compact = on_compact
        self.redact = redact
        self.tools = _tools_of(tools)
        self.on_start = on_start
        self.on_report = on_report
        self.on_trim = on_trim
        self.app_trigger = should_compact
        """The `should_compact` predicate, or None; may be replaced at any time."""
        self.summary_role = summary_role
        self._tools_tokens = self.counter.count_tools(self.tools) if self.tools else 0
        self.background = Background() if background is True else background or None
        self._runs = BackgroundRuns(self.background) if self.background else None

    @property
    def budget(self) -> Budget | None:
        """The budget the next check reads; set it at any time (`budget-live-and-validated`)."""
        return self._budget

    @budget.setter
    def budget(self, budget: Budget | None) -> None:
        if budget is not None and not isinstance(budget, Budget):
            raise BudgetError(
                f"budget must be a ctxfold.Budget or None, not {budget!r}; for a window of "
                f"N tokens, pass Budget(window=N)"
            )
        self._budget = budget

    # -- checking --------------------------------------------------------------------------
    def estimate(self, session: Session) -> int:
        """Tokens the next request would take: the last provider usage report plus a count of
        what came after, else a count; tool schemas included. O(1) per appended message."""
        _blocking(session, "estimate")
        return self._estimate(session.tally(self.counter))

    def _estimate(self, tally: Tally) -> int:
        return tally.estimate if tally.anchored else tally.total + self._tools_tokens

    def should_compact(
        self,
        session: Session,
        *,
        adding: Sequence[Message] | Message | None = (),
        fresh: bool = True,
    ) -> bool:
        """True when the session has at least `min_messages` messages (`min-messages`) and the
        estimate has reached the budget's trigger, or the application's `should_compact`
        predicate says so (`app-trigger`). Always False without a budget
        (`budget-live-and-validated`). A predicate that raises is logged and the budget alone
        decides.

        `adding`: messages about to be appended, judged as if they were (an integration that
        appends a request's messages only with the model's response): a list of them, one
        `Message`, or None for none. `fresh=False` judges the session as of its last look at the
        store (`Session.items`)."""
        _blocking(session, "should_compact")
        adding = _adding(adding)
        budget = self.budget
        if budget is None:
            return False
        # One look at the store (unless fresh=False): the tally counts every item.
        tally = session.tally(self.counter, fresh=fresh)
        if len(tally) + len(adding) < budget.min_messages:
            return False
        estimate = self._estimate(tally)
        if adding:
            estimate += sum(self.counter.count_message(m) for m in adding)
        if budget.should_compact(estimate):
            return True
        predicate = self.app_trigger
        if predicate is None:
            return False
        try:
            return bool(predicate(estimate, session))
        except Exception as exc:  # the application's code must not break the agent's turn
            log.warning(
                "ctxfold: should_compact raised %s: %s; the budget decides alone",
                type(exc).__name__,
                exc,
            )
            return False

    # -- running ---------------------------------------------------------------------------
    def maybe_compact(self, session: Session) -> CompactionReport | None:
        """The automatic trigger, for after each turn: compacts only when `should_compact`, and
        returns None when it did not. A summarizer or callback failure is logged and reported,
        never raised (`auto-trigger-isolates-failures`). With `background`, see
        `ctxfold.compactor.background`: the report is that of the last run this check settled."""
        _blocking(session, "maybe_compact")
        runs = self._runs
        if runs is not None and not runs.closed and self.budget is not None:
            flow = self._tend(self.budget)
            return self._finish_all(runs.check(session, flow, self._edge(), self._measure))
        if not self.should_compact(session):
            return None
        return self._finish(run_sync(self._flow("threshold"), self._edge(), session))

    async def amaybe_compact(self, session: Session | AsyncSession) -> CompactionReport | None:
        """`maybe_compact` for asyncio code; store I/O runs in worker threads, and background
        runs are asyncio tasks."""
        sync = _sync(session)
        runs = self._runs
        if runs is not None and not runs.closed and self.budget is not None:
            flow = self._tend(self.budget)
            return self._finish_all(await runs.acheck(sync, flow, self._edge(), self._measure))
        if not await asyncio.to_thread(self.should_compact, sync):
            return None
        return self._finish(await run_async(self._flow("threshold"), self._edge(), sync))

    # -- closing ---------------------------------------------------------------------------
    def close(self, timeout: float | None = None) -> None:
        """Stop background runs: none starts any more, tasks are cancelled, and threads in flight
        are joined (up to `timeout` seconds each). What they planned is dropped, since nothing
        of it was written; later checks compact in the foreground. Closing twice is fine."""
        if self._runs is not None:
            self._runs.close(timeout)

    async def aclose(self) -> None:
        """`close` for asyncio code."""
        if self._runs is not None:
            await self._runs.aclose()

    def __enter__(self) -> Compactor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Compactor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def compact(self, session: Session, *, target: float | None = None) -> CompactionReport:
        """Compact now, toward the budget's target (or `target`), and report how it went:
        `report.landed` says whether anything was appended, `report.outcome` why not. Raises on
        an empty session (`empty-session-refused`) and when the summarizer, the callback or a
        listener raises (`auto-trigger-isolates-failures`).

        `target` is read as `Budget.target` is (`ctxfold.tokens.budget.target_in_tokens`): a
        number in (0, 1] is a fraction of the budget's window (``target=0.5``: half of it), a
        larger one a count of tokens; anything else is a `BudgetError`."""
        _blocking(session, "compact")
        flow = self._flow("manual", self._target(target), manual=True)
        started: list[CompactionStart] = []
        try:
            report = run_sync(flow, self._edge(started), session)
        except Exception as exc:
            self._failed(started, exc)
            raise
        return self._finish(report, raising=True)

    async def acompact(
        self, session: Session | AsyncSession, *, target: float | None = None
    ) -> CompactionReport:
        """`compact` for asyncio code."""
        flow = self._flow("manual", self._target(target), manual=True)
        started: list[CompactionStart] = []
        try:
            report = await run_async(flow, self._edge(started), _sync(session))
        except Exception as exc:
            self._failed(started, exc)
            raise
        return self._finish(report, raising=True)

    def recover_from_overflow(
        self, session: Session, *, error: BaseException | None = None
    ) -> CompactionReport:
        """After a provider's context-overflow error (see `is_context_overflow`): record it in
        the log and compact, so the caller can retry once (`overflow-recovery`).

        The first overflow of a session runs the pipeline toward the budget's target, and toward
        at most half of the estimate: the provider has just shown the estimate to be short, so
        the view shrinks even when the estimate was within the target. Pass the provider's
        `error` and what it states is used too: the size it measured is recorded as provider
        usage (the estimate and the target are then counted as the provider counts), and a
        stated limit below the budget's window scales the target down to it. From the second
        overflow of a session on, tool results are cleared instead. The user's words get no
        protection of their own in these runs (the current request stays pinned): the
        provider has just shown the counts they are bounded with to be short. Nothing is
        appended to the conversation itself."""
        _blocking(session, "recover_from_overflow")
        _check_error(error)
        figures = overflow_figures(error)
        if figures.prompt_tokens is not None:
            session.record_usage(figures.prompt_tokens)
        session.record_overflow()
        flow = self._overflow_flow(session.overflows(), figures.limit)
        return self._finish(run_sync(flow, self._edge(), session))

    async def arecover_from_overflow(
        self, session: Session | AsyncSession, *, error: BaseException | None = None
    ) -> CompactionReport:
        """`recover_from_overflow` for asyncio code."""
        sync = _sync(session)
        _check_error(error)
        figures = overflow_figures(error)
        if figures.prompt_tokens is not None:
            await asyncio.to_thread(sync.record_usage, figures.prompt_tokens)
        await asyncio.to_thread(sync.record_overflow)
        flow = self._overflow_flow(await asyncio.to_thread(sync.overflows), figures.limit)
        return self._finish(await run_async(flow, self._edge(), sync))

    # -- internals -------------------------------------------------------------------------
    def _target(self, target: float | None) -> int | None:
        """An explicit `target` in tokens, read against the budget's window as `Budget` reads
        its own (None: the budget's target)."""
        if target is None:
            return None
        budget = self.budget
        return target_in_tokens(target, budget.window if budget is not None else None)

    def _overflow_flow(self, overflows: int, limit: int | None) -> Any:
        budget = self.budget
        if budget is None:
            raise BudgetError("this compactor has no budget; overflow recovery needs its target")
        target = budget.target_tokens
        if limit is not None and 0 < limit < budget.window:
            # The model's real window is smaller than the budget says: the same share of it.
            target = target * limit // budget.window
        # The count lives in the log, so every compactor and process sees the same one.
        if overflows > 1:
            # Every older output is cleared; then the newest outputs are cut to the target, and
            # to half the estimate (the provider has refused it again): each overflow in a row
            # asks for less, so that a retry eventually goes through.
            clear = Pipeline([ClearToolResults(min_tokens=0), CutToFit()])
            return self._flow(
                "overflow", target=0, pipeline=clear, ceiling=target, shrink=OVERFLOW_SHRINK
            )
        # The ceiling is the target itself: the provider has just refused a request under the
        # trigger point, and even the user's words may be cut to get under the target.
        return self._flow("overflow", target, shrink=OVERFLOW_SHRINK, ceiling=target)

    def _flow(
        self,
        reason: Reason,
        target: int | None = None,
        *,
        manual: bool = False,
        pipeline: Pipeline | None = None,
        shrink: float | None = None,
        quiet: bool = False,
        ceiling: int | None = None,
    ) -> Any:
        settings = self._settings(
            reason,
            target,
            raise_failures=manual,
            pipeline=pipeline,
            shrink=shrink,
            ceiling=ceiling,
        )
        return compaction(settings, manual=manual, quiet=quiet)

    def _settings(
        self,
        reason: Reason,
        target: int | None = None,
        *,
        raise_failures: bool = False,
        pipeline: Pipeline | None = None,
        shrink: float | None = None,
        ceiling: int | None = None,
    ) -> RunSettings:
        """The settings of one run, read from the budget as it is now. `ceiling` is what a
        request may take (`RunSettings.ceiling`); None: the budget's trigger point."""
        budget = self.budget
        if target is None:
            if budget is None:
                raise BudgetError("this compactor has no budget; pass target= or set a budget")
            target = budget.target_tokens
        rules = Rules(
            counter=self.counter,
            keep_steps=budget.keep_steps if budget else 1,
            keep_recent_tokens=budget.keep_recent_tokens if budget else 0,
            keep_count=budget.keep_count if budget else 0,
            min_messages=budget.min_messages if budget else 0,
            # After an overflow the provider has shown our counts to be short, so a bound
            # measured with them holds nothing: the one retry must go through.
            keep_user_tokens=0
            if reason == "overflow"
            else (budget.keep_user_tokens if budget else None),
            summary_role=self.summary_role,
            redact=self.redact,
            count_text=self._counts_for(self.counter),
        )
        return RunSettings(
            pipeline=pipeline or self.pipeline,
            rules=rules,
            target=target,
            reason=reason,
            on_compact=self.on_compact,
            raise_failures=raise_failures,
            shrink=shrink,
            ceiling=ceiling if ceiling is not None or budget is None else budget.trigger_tokens,
            # After an overflow (a ceiling given) the provider has refused what was under the
            # window: the user's words may then be cut to the ceiling like the rest.
            window=budget.window if ceiling is None and budget is not None else None,
        )

    def _counts_for(self, counter: TokenCounter) -> TextCounts:
        # The counts remembered are `counter`'s: a compactor given another counter since
        # starts remembering afresh.
        if self._text_counts.counter is not counter:
            self._text_counts = TextCounts(counter)
        return self._text_counts

    def _tend(self, budget: Budget) -> Any:
        # Background planning runs in the automatic trigger's settings, so its failures are
        # reported, never raised (`auto-trigger-isolates-failures`).
        free = _free_rungs(self.pipeline) if self.on_compact is None else None
        return tend(
            budget=budget,
            policy=self.background or Background(),
            settings=lambda: self._settings("threshold"),
            foreground=lambda: self._flow("threshold"),
            free=None
            if free is None
            else lambda: self._flow("threshold", pipeline=free, quiet=True),
        )

    def _measure(self, session: Session) -> int | None:
        budget = self.budget
        tally = session.tally(self.counter)
        if budget is None or len(tally) < budget.min_messages:
            return None
        return self._estimate(tally)

    def _finish_all(self, reports: Sequence[CompactionReport]) -> CompactionReport | None:
        finished = [self._finish(report) for report in reports]
        return finished[-1] if finished else None

    def _edge(self, started: list[CompactionStart] | None = None) -> Edge:
        """What the drivers answer with; with `started`, each run's start is kept there too."""
        on_start = self.on_start
        if started is not None:
            listener = on_start

            def on_start(start: CompactionStart) -> None:
                started.append(start)
                if listener is not None:
                    listener(start)

        return Edge(self.summarizer, self.counter, self._tools_tokens, on_start, self.on_trim)

    def _failed(self, started: Sequence[CompactionStart], exc: Exception) -> None:
        """A manual run that raises after it started still ends, for `on_report` listeners
        (a tracer's span, an audit record), with a report of outcome "failed"; then `exc` goes
        on up. A listener that raises here is logged, so that it hides nothing of `exc`."""
        if not started or self.on_report is None:
            return
        start = started[-1]
        report = CompactionReport(
            session_id=start.session_id,
            reason=start.reason,
            tokens_before=start.tokens_before,
            tokens_after=start.tokens_before,
            target=start.target,
            fits=False,
            pinned_tokens=0,
            outcome="failed",
            error=redact_secrets(f"{type(exc).__name__}: {exc}"),
        )
        self._finish(report)

    def _finish(self, report: CompactionReport, *, raising: bool = False) -> CompactionReport:
        """Log `report` and tell the `on_report` listener. One that raises is logged and named in
        the report returned, unless `raising` (a manual compact): the automatic trigger's turn,
        and the reports after it in a background check, go on (`run-reported`)."""
        if report.error:
            log.warning("ctxfold: %s", report.describe())
        elif not report.landed and report.notes:
            log.warning("ctxfold: %s; %s", report.describe(), "; ".join(report.notes))
        else:
            log.info("ctxfold: %s", report.describe())
        listener = self.on_report
        if listener is not None:
            try:
                listener(report)
            except Exception as exc:
                if raising:
                    raise
                report = report.with_listener_error("on_report", exc)
                log.warning(
                    "ctxfold: on_report raised %s: %s; the run's report: %s",
                    type(exc).__name__,
                    exc,
                    report.describe(),
                )
        return report


def _tools_of(tools: object) -> list[Mapping[str, Any]]:
    """The tool schemas, as a list; anything but a list of mappings is refused."""
    if tools is None:
        return []
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Iterable):
        raise ConfigurationError(
            f"tools must be a list of tool schemas (dicts), not {type(tools).__name__}"
        )
    schemas = list(tools)
    for position, schema in enumerate(schemas):
        if not isinstance(schema, Mapping):
            raise ConfigurationError(
                f"tools[{position}] is a {type(schema).__name__}, not a tool schema (a dict)"
            )
    return schemas


def _adding(adding: object) -> Sequence[Message]:
    """What `should_compact(adding=...)` is given, as messages: a list of them, one `Message`,
    or None for none."""
    if adding is None or (type(adding) is tuple and not adding):
        # The default, at every check: none, without the ABC checks below.
        return ()
    if isinstance(adding, Message):
        return (adding,)
    if isinstance(adding, (str, bytes, Mapping)) or not isinstance(adding, Iterable):
        hint = _READERS if isinstance(adding, Mapping) else ""
        raise InvalidInputError(
            f"adding takes a list of Message values, not a {type(adding).__name__}{hint}"
        )
    messages = list(adding)
    for position, message in enumerate(messages):
        if not isinstance(message, Message):
            hint = _READERS if isinstance(message, Mapping) else ""
            raise InvalidInputError(
                f"adding[{position}] is a {type(message).__name__}, not a ctxfold Message{hint}"
            )
    return messages


_READERS = "; read a provider's messages with from_openai or from_anthropic"


def _check_error(error: object) -> None:
    """Refuse, before anything is recorded, an overflow `error` that is no exception."""
    if error is not None and not isinstance(error, BaseException):
        raise ConfigurationError(
            f"error must be the exception the provider's SDK raised (or None), not {error!r}"
        )


def _free_rungs(pipeline: Pipeline) -> Pipeline | None:
    """The rungs of `pipeline` before its first `Summarize` (None when there are none): what a
    turn can run without waiting for a summarizer."""
    free = list(
        takewhile(lambda strategy: not isinstance(strategy, Summarize), pipeline.strategies)
    )
    return Pipeline(free) if free else None


def _sync(session: Session | AsyncSession) -> Session:
    return session.sync if isinstance(session, AsyncSession) else session


def _blocking(session: object, call: str) -> None:
    """Refuse, with the call to make instead, what a blocking entry point cannot use: an
    `AsyncSession` (its methods are coroutines) or anything else that is not a `Session`."""
    if isinstance(session, Session):
        return
    if isinstance(session, AsyncSession):
        instead = (
            f"await compactor.a{call}(session)"
            if call in ("maybe_compact", "compact", "recover_from_overflow")
            else f"compactor.{call}(session.sync)"
        )
        raise ConfigurationError(
            f"compactor.{call}() blocks and takes a Session, not an AsyncSession: use {instead}"
        )
    hint = (
        "; for a list of messages, use ctxfold.compact_messages"
        if isinstance(session, (list, tuple))
        else ""
    )
    raise InvalidInputError(
        f"compactor.{call}() takes a Session (store.session(id)), not "
        f"{type(session).__name__}{hint}"
    )
