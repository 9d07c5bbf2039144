"""The strategy protocol, the pipeline that runs strategies in order, and its two drivers.

A strategy is a small object with a `name` and a `run(view)` method. Strategies that need no model
return None; a strategy that summarizes is a generator that yields `SummaryCall`s and receives each
answer back (a `SummaryResult`, or the exception the summarizer raised, thrown in at the yield).
So the whole compaction is one generator, and only the drivers (`ctxfold.compactor.engine`)
know whether a summarizer is called synchronously or awaited.
"""

from __future__ import annotations

import inspect
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from ctxfold.errors import ConfigurationError
from ctxfold.summarizers.request import SummaryRequest, SummaryResult

if TYPE_CHECKING:
    from ctxfold.pipeline.view import WorkingView

T = TypeVar("T")


@dataclass(frozen=True)
class SummaryCall:
    """A request for a summary. `summarizer` None means the compactor's default summarizer."""

    request: SummaryRequest
    summarizer: Any = None


Plan = Generator[SummaryCall, "SummaryResult | None", T]


@runtime_checkable
class Strategy(Protocol):
    """One rung of the ladder.

    `run(view)` edits the view through `view.replace` / `view.mask` and must:
    - cut only at safe cut points and never touch what `view.protected()` names;
    - stop as soon as `view.fits`;
    - return None, or be a generator yielding `SummaryCall`s (it receives the `SummaryResult`, or
      None for a decline, and the summarizer's exception is thrown in at the yield).
    """

    name: str

    def run(self, view: WorkingView) -> Plan[None] | None: ...


@dataclass(frozen=True)
class StrategyEffect:
    """What one strategy did in one run."""

    name: str
    tokens_before: int
    tokens_after: int
    edits: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "edits": self.edits,
        }


class Pipeline:
    """Strategies in order, cheapest first; stops as soon as the view fits.

    >>> from ctxfold.pipeline import ClearToolResults, SlidingWindow, Summarize
    >>> reference = Pipeline([ClearToolResults(), SlidingWindow(), Summarize()])
    >>> [s.name for s in reference.strategies]
    ['clear_tool_results', 'sliding_window', 'summarize']
    """

    def __init__(self, strategies: Sequence[Strategy]) -> None:
        for strategy in strategies:
            if not callable(getattr(strategy, "run", None)) or not getattr(strategy, "name", ""):
                raise ConfigurationError(
                    f"{strategy!r} is not a Strategy: it needs a name and run(view)"
                )
        self.strategies = tuple(strategies)

    @classmethod
    def default(cls, summarizer: Any = None) -> Pipeline:
        """ClearToolResults → Summarize → ClearToolResults(keep_tail=False) → SlidingWindow:
        free first, the summarizer next, then clearing recent output too, and dropping turns
        only when nothing else reached the target."""
        from ctxfold.pipeline.clear import ClearToolResults
        from ctxfold.pipeline.summarize import Summarize
        from ctxfold.pipeline.window import SlidingWindow

        return cls(
            [
                ClearToolResults(),
                Summarize(summarizer),
                ClearToolResults(keep_tail=False),
                SlidingWindow(),
            ]
        )

    def plan(self, view: WorkingView) -> Plan[list[StrategyEffect]]:
        """Run the strategies over `view`; a generator (see the module docstring)."""
        effects: list[StrategyEffect] = []
        for strategy in self.strategies:
            if view.fits:
                # `under-target-no-op`, `cheapest-first`: once it fits, nothing more runs
                break
            before, edits = view.total, len(view.events)
            steps = strategy.run(view)
            if inspect.isgenerator(steps):
                yield from steps
            if len(view.events) > edits:
                effects.append(
                    StrategyEffect(strategy.name, before, view.total, len(view.events) - edits)
                )
        return effects
