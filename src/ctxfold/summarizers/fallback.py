"""`FallbackSummarizer`: try a summarizer, and when it fails, use another (`summarizer-fallback`).

The decision (call the primary; on an exception, a decline or an echo, call the fallback; say
why) is written once, as a generator that yields which summarizer to call and receives what it
answered (or has its exception thrown in). `__call__` and `acall` hand it to ctxfold's two
drivers and hold no logic of their own.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, replace
from typing import Any

from ctxfold._drive import adrive, drive
from ctxfold.errors import SummarizerError
from ctxfold.summarizers.base import NormalizedSummarizer, as_summarizer, is_decline, is_echo
from ctxfold.summarizers.extractive import ExtractiveSummarizer
from ctxfold.summarizers.request import SummaryRequest, SummaryResult


@dataclass(frozen=True)
class _Outcome:
    result: SummaryResult | None = None
    error: Exception | None = None


_Flow = Generator[NormalizedSummarizer, SummaryResult, Any]


class FallbackSummarizer:
    """Answers with `primary`, or with `fallback` when the primary raises, declines, or echoes its
    prompt or input. The result's `notes` say why it fell back, and its token counts include what
    the failed primary call cost.

    `fallback` defaults to `ExtractiveSummarizer()`, which needs no model. If the fallback fails
    too, its exception is raised as a `SummarizerError` naming both failures; if it declines or
    echoes, the result is a decline with notes.

    >>> def broken(request):
    ...     raise TimeoutError("model took too long")
    >>> from ctxfold.summarizers.prompt import build_request
    >>> from ctxfold.messages import Message
    >>> result = FallbackSummarizer(broken)(build_request([Message("user", "fix app.py")]))
    >>> result.notes[0]
    'broken raised TimeoutError: model took too long; used ExtractiveSummarizer instead'
    """

    def __init__(self, primary: Any, fallback: Any = None) -> None:
        self.primary = as_summarizer(primary)
        self.fallback = as_summarizer(fallback if fallback is not None else ExtractiveSummarizer())

    @property
    def is_async(self) -> bool:
        """True when either summarizer can only be awaited: use `acall`."""
        return self.primary.is_async or self.fallback.is_async

    def __repr__(self) -> str:
        return f"FallbackSummarizer({self.primary.wrapped!r}, {self.fallback.wrapped!r})"

    def __call__(self, request: SummaryRequest) -> SummaryResult:
        result: SummaryResult = drive(self._flow(request), lambda summarizer: summarizer(request))
        return result

    async def acall(self, request: SummaryRequest) -> SummaryResult:
        result: SummaryResult = await adrive(
            self._flow(request), lambda summarizer: summarizer.acall(request)
        )
        return result

    def _flow(self, request: SummaryRequest) -> _Flow:
        primary, fallback = self.primary, self.fallback
        first = yield from _ask(primary)
        reason = _rejection(first, request, primary.name)
        if reason is None:
            assert first.result is not None
            return first.result
        note = f"{reason}; used {fallback.name} instead"
        second = yield from _ask(fallback)
        if second.error is not None:
            raise SummarizerError(
                f"{reason}, and the fallback {fallback.name} raised "
                f"{type(second.error).__name__}: {second.error}"
            ) from second.error
        assert second.result is not None
        spent_in, spent_out = _spent(first)
        result = replace(
            second.result,
            input_tokens=second.result.input_tokens + spent_in,
            output_tokens=second.result.output_tokens + spent_out,
            calls=second.result.calls + (first.result.calls if first.result else 1),
            notes=(note, *second.result.notes),
        )
        fallback_reason = _rejection(second, request, fallback.name)
        if fallback_reason is not None:
            return replace(result, text=None, notes=(*result.notes, fallback_reason))
        return result


def _ask(summarizer: NormalizedSummarizer) -> _Flow:
    """One step: call `summarizer`; what it answered or raised (any failure is the flow's to
    judge, so every exception comes back as an outcome)."""
    try:
        answer = yield summarizer
    except Exception as exc:
        return _Outcome(error=exc)
    return _Outcome(result=answer)


def _rejection(outcome: _Outcome, request: SummaryRequest, name: str) -> str | None:
    """Why an outcome cannot be used as the summary, or None when it can."""
    if outcome.error is not None:
        return f"{name} raised {type(outcome.error).__name__}: {outcome.error}"
    result = outcome.result
    if result is None or is_decline(result):
        return f"{name} declined"
    if is_echo(result, request):
        return f"{name} echoed its prompt or input"
    return None


def _spent(outcome: _Outcome) -> tuple[int, int]:
    result = outcome.result
    return (result.input_tokens, result.output_tokens) if result else (0, 0)
