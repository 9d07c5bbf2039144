"""Test doubles for code built on ctxfold: summarizers you script instead of mocking internals.

`FunctionSummarizer` wraps a function (sync or async) and records every request it gets, so a
test can say what the summarizer answered and then check what it was asked::

    summarizer = FunctionSummarizer(lambda request: "## Objective\\n- ship it")
    ...  # run a compaction with it
    assert summarizer.requests[0].tier == "turns"
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from ctxfold.errors import ConfigurationError
from ctxfold.summarizers.request import SummaryRequest, SummaryResult

Answer = str | SummaryResult | None
"""What a summarizer may answer: text, a result, or None to decline."""


class FunctionSummarizer:
    """A summarizer that answers with `fn(request)` and keeps every request in `requests`.

    - `fn`: a function or an async function taking a `SummaryRequest`; with an async `fn` the
      summarizer is async (`is_async` is True, calling it returns an awaitable).
    - `requests`: what it was asked, in order; `calls` is how many.

    >>> s = FunctionSummarizer.returning("## Objective\\n- nothing")
    >>> from ctxfold.summarizers.prompt import build_request
    >>> from ctxfold.messages import Message
    >>> s(build_request([Message("user", "hi")]))
    '## Objective\\n- nothing'
    >>> s.calls
    1
    """

    def __init__(self, fn: Callable[[SummaryRequest], Answer | Awaitable[Answer]]) -> None:
        self.fn = fn
        self.requests: list[SummaryRequest] = []
        self.is_async = inspect.iscoroutinefunction(fn)

    @property
    def calls(self) -> int:
        """How many requests it has answered (or raised on)."""
        return len(self.requests)

    @property
    def name(self) -> str:
        """The wrapped function's name, which reports and fallback notes show."""
        return str(getattr(self.fn, "__name__", type(self).__name__))

    def __repr__(self) -> str:
        return f"FunctionSummarizer({self.name})"

    def __call__(self, request: SummaryRequest) -> Any:
        self.requests.append(request)
        return self.fn(request)

    @classmethod
    def returning(cls, *answers: Answer) -> FunctionSummarizer:
        """Answers with `answers` in turn, repeating the last one once they run out."""
        if not answers:
            raise ConfigurationError("returning() needs at least one answer (None declines)")

        def answer(request: SummaryRequest) -> Answer:
            return answers[min(len(summarizer.requests), len(answers)) - 1]

        summarizer = cls(answer)
        return summarizer

    @classmethod
    def declining(cls) -> FunctionSummarizer:
        """Always declines (answers None)."""
        return cls.returning(None)

    @classmethod
    def raising(cls, error: Exception) -> FunctionSummarizer:
        """Always raises `error`."""

        def fail(request: SummaryRequest) -> Answer:
            raise error

        return cls(fail)
