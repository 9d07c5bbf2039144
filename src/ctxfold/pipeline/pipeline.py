"""The pipeline: strategies in order, cheapest first, and the default ladder.

The pipeline runs each strategy's generator. It passes `SummaryCall`s up to the driver (so the
whole compaction is one generator, and only the drivers know whether a summarizer is called or
awaited), applies the edits strategies propose to the view, keeps the accounts (`Accounts`),
and stops as soon as the view fits.
"""

from __future__ import annotations

import inspect
from collections.abc import Generator, Iterable, Mapping
from typing import Any, TypeGuard

from ctxfold.errors import ConfigurationError
from ctxfold.pipeline.accounting import Accounts, StrategyEffect
from ctxfold.pipeline.clear import ClearToolResults
from ctxfold.pipeline.fit import CutToFit
from ctxfold.pipeline.proposals import MaskResults, Replace, SummaryCall
from ctxfold.pipeline.strategy import Strategy
from ctxfold.pipeline.summarize import Summarize
from ctxfold.pipeline.user_messages import CollapseRepeats, ShortenUserMessages
from ctxfold.pipeline.view import WorkingView
from ctxfold.pipeline.window import SlidingWindow
from ctxfold.protocols import Summarizer
from ctxfold.summarizers.request import SummaryResult

Plan = Generator[SummaryCall, "SummaryResult | None", Accounts]


class Pipeline:
    """Strategies in order, cheapest first; stops as soon as the view fits.

    `strategies`: the rungs in order (a list, a tuple, any iterable); a single strategy is a
    ladder of one rung.

    >>> reference = Pipeline([ClearToolResults(), SlidingWindow(), Summarize()])
    >>> [s.name for s in reference.strategies]
    ['clear_tool_results', 'sliding_window', 'summarize']
    >>> [s.name for s in Pipeline(ClearToolResults()).strategies]
    ['clear_tool_results']
    """

    def __init__(self, strategies: Iterable[Strategy] | Strategy) -> None:
        if _is_strategy(strategies):
            rungs: tuple[object, ...] = (strategies,)
        elif isinstance(strategies, Iterable) and not isinstance(strategies, (str, bytes, Mapping)):
            rungs = tuple(strategies)
        else:
            raise ConfigurationError(
                f"Pipeline takes a list of strategies, such as [ClearToolResults(), "
                f"Summarize()], not {strategies!r}; Pipeline.default() is the default ladder"
            )
        checked: list[Strategy] = []
        for strategy in rungs:
            if not _is_strategy(strategy):
                raise ConfigurationError(
                    f"{strategy!r} is not a Strategy: it needs a name and run(view)"
                )
            checked.append(strategy)
        self.strategies = tuple(checked)

    @classmethod
    def default(cls, summarizer: Summarizer | None = None) -> Pipeline:
        """ClearToolResults → CollapseRepeats → Summarize → ClearToolResults(keep_tail=False)
        → Summarize(keep_tail=False) → ShortenUserMessages → SlidingWindow → CutToFit: free
        first (old tool output, a harness's repeated nudges), the summarizer next, then the
        recent tail's output cleared and its oldest steps summarized, the user's messages past
        their bound shortened, dropping turns only when nothing else reached the target, and
        last, when the newest output alone is too large to send, that output cut to fit (then
        the user's words, when even that is not enough). The user's words within their bound are
        never summarized or dropped."""
        return cls(
            [
                ClearToolResults(),
                CollapseRepeats(),
                Summarize(summarizer),
                ClearToolResults(keep_tail=False),
                Summarize(summarizer, keep_tail=False),
                ShortenUserMessages(),
                SlidingWindow(),
                CutToFit(),
            ]
        )

    def plan(self, view: WorkingView, accounts: Accounts | None = None) -> Plan:
        """Run the strategies over `view`, recording what happened in `accounts` (a new one when
        None), which it returns; a generator of `SummaryCall`s (see the module docstring)."""
        accounts = accounts if accounts is not None else Accounts()
        for strategy in self.strategies:
            if view.fits:
                # `under-target-no-op`, `cheapest-first`: once it fits, nothing more runs
                break
            before, edits = view.total, len(view.edits)
            stopped = yield from _run(strategy, view, accounts)
            if stopped:
                accounts.notes.append(f"{strategy.name} stopped: {stopped}")
            if len(view.edits) > edits:
                accounts.effects.append(
                    StrategyEffect(strategy.name, before, view.total, len(view.edits) - edits)
                )
        return accounts


def _is_strategy(value: object) -> TypeGuard[Strategy]:
    return callable(getattr(value, "run", None)) and bool(getattr(value, "name", ""))


def _run(
    strategy: Strategy, view: WorkingView, accounts: Accounts
) -> Generator[SummaryCall, SummaryResult | None, str | None]:
    """Drive one strategy: pass its summary calls up, apply its edits; return its stop reason."""
    flow = strategy.run(view)
    if not inspect.isgenerator(flow):
        raise ConfigurationError(
            f"strategy {strategy.name!r}: run(view) must be a generator of proposals"
        )
    answer: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = flow.throw(error) if error is not None else flow.send(answer)
        except StopIteration as stop:
            reason: str | None = stop.value
            return reason
        error = None
        if isinstance(step, SummaryCall):
            try:
                answer = yield step
            except Exception as exc:  # the strategy judges it; the accounts keeps it
                accounts.raised(exc)
                error = exc
                continue
            accounts.answered(step.request, answer)
        elif isinstance(step, (Replace, MaskResults)):
            replaced = view.items[step.start : step.end] if isinstance(step, Replace) else []
            answer = view.apply(step, strategy.name)
            if answer:
                accounts.applied(step, replaced, view)
        else:
            flow.close()
            raise ConfigurationError(
                f"strategy {strategy.name!r} yielded {step!r}; it may yield a SummaryCall, "
                "a Replace or a MaskResults"
            )
