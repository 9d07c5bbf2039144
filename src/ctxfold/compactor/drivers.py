"""The two drivers of a compaction: they answer its steps, one by calling, one by awaiting.

A step is a summary call, a callback call, or (for a session) reading a snapshot, appending,
reading events and telling listeners a run started. These functions are the only place where a
compaction touches a store, a summarizer or the application's callback.

The async driver never blocks the event loop: the run's own work between steps (planning,
which takes seconds over thousands of messages), store I/O and sync summarizers run in worker
threads, async summarizers are awaited, an `async def on_compact` is awaited, and a plain
`on_compact` runs in a worker thread (where it may use a sync summarizer).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from ctxfold._drive import adrive, drive
from ctxfold.compactor.context import CompactionContext
from ctxfold.compactor.landing import Append, ReadEvents, ReadSnapshot, Started, Trimmed
from ctxfold.compactor.report import CompactionStart, Trim
from ctxfold.compactor.run import CallbackCall
from ctxfold.errors import ConfigurationError
from ctxfold.pipeline.proposals import SummaryCall
from ctxfold.protocols import Summarizer, TokenCounter
from ctxfold.session import Session
from ctxfold.summarizers.base import NormalizedSummarizer, as_summarizer
from ctxfold.summarizers.request import SummaryRequest, SummaryResult

R = TypeVar("R")


@dataclass(frozen=True)
class Edge:
    """What a driver answers with: the default summarizer, the counter a snapshot is counted
    with, the tool schemas' tokens, and the `on_start` and `on_trim` listeners."""

    summarizer: Summarizer
    counter: TokenCounter
    tools_tokens: int = 0
    on_start: Callable[[CompactionStart], Any] | None = None
    on_trim: Callable[[Trim], Any] | None = None

    def trimmed(self, step: Trimmed) -> None:
        if self.on_trim is not None:
            for trim in step.trims:
                self.on_trim(trim)

    def chosen(self, summarizer: Summarizer | None) -> NormalizedSummarizer:
        return as_summarizer(summarizer if summarizer is not None else self.summarizer)


def run_sync(
    flow: Generator[Any, Any, R],
    edge: Edge,
    session: Session | None = None,
    *,
    more: Callable[[Any], Any] | None = None,
) -> R:
    """Drive `flow` to its end with blocking calls; `session` answers the session steps, and
    `more` any step of the caller's own (a background run's, say)."""

    def resolve(request: SummaryRequest) -> SummaryResult:
        return edge.chosen(None)(request)

    def answer(step: Any) -> Any:
        if isinstance(step, SummaryCall):
            return edge.chosen(step.summarizer)(step.request)
        if isinstance(step, CallbackCall):
            context = _context(step, resolve=resolve)
            value = step.callback(context)
            if inspect.isawaitable(value):
                if inspect.iscoroutine(value):
                    value.close()  # never awaited; closing it avoids a "never awaited" warning
                raise ConfigurationError(
                    "on_compact is async; run it with acompact() or amaybe_compact()"
                )
            return None
        if isinstance(step, Started):
            if edge.on_start is not None:
                edge.on_start(step.start)
            return None
        if isinstance(step, Trimmed):
            return edge.trimmed(step)
        io = _session(session, step)
        if isinstance(step, ReadSnapshot):
            return io.snapshot(edge.counter, tools_tokens=edge.tools_tokens)
        if isinstance(step, Append):
            return io.append(list(step.events), expected_seq=step.expected_seq)
        if isinstance(step, ReadEvents):
            return io.events(step.after)
        raise ConfigurationError(f"a compaction yielded {step!r}, which no driver answers")

    def answer_all(step: Any) -> Any:
        return answer(step) if more is None or not is_own(step) else more(step)

    return drive(flow, answer_all)


async def run_async(
    flow: Generator[Any, Any, R],
    edge: Edge,
    session: Session | None = None,
    *,
    more: Callable[[Any], Awaitable[Any]] | None = None,
) -> R:
    """Drive `flow` to its end on the event loop; `session` answers the session steps, and
    `more` any step of the caller's own."""

    async def aresolve_with(summarizer: Summarizer | None, request: SummaryRequest) -> Any:
        chosen = edge.chosen(summarizer)
        if chosen.is_async or callable(getattr(chosen.wrapped, "acall", None)):
            return await chosen.acall(request)
        return await asyncio.to_thread(chosen, request)

    async def aresolve(request: SummaryRequest) -> SummaryResult:
        result: SummaryResult = await aresolve_with(None, request)
        return result

    def resolve_blocking(request: SummaryRequest) -> SummaryResult:
        chosen = edge.chosen(None)
        if chosen.is_async:
            raise ConfigurationError(
                f"on_compact is a plain function, but the summarizer {chosen.name} can only be "
                "awaited; make the callback `async def on_compact(ctx)` and call "
                "`await ctx.acompact(...)`"
            )
        return chosen(request)

    async def answer(step: Any) -> Any:
        if isinstance(step, SummaryCall):
            return await aresolve_with(step.summarizer, step.request)
        if isinstance(step, CallbackCall):
            if _is_async_callable(step.callback):
                await step.callback(_context(step, aresolve=aresolve))
            else:
                context = _context(step, resolve=resolve_blocking)
                value = await asyncio.to_thread(step.callback, context)
                if inspect.isawaitable(value):
                    await value
            return None
        if isinstance(step, Started):
            if edge.on_start is not None:
                edge.on_start(step.start)
            return None
        if isinstance(step, Trimmed):
            return edge.trimmed(step)
        io = _session(session, step)
        if isinstance(step, ReadSnapshot):
            return await asyncio.to_thread(
                io.snapshot, edge.counter, tools_tokens=edge.tools_tokens
            )
        if isinstance(step, Append):
            return await asyncio.to_thread(
                io.append, list(step.events), expected_seq=step.expected_seq
            )
        if isinstance(step, ReadEvents):
            return await asyncio.to_thread(io.events, step.after)
        raise ConfigurationError(f"a compaction yielded {step!r}, which no driver answers")

    async def answer_all(step: Any) -> Any:
        return await (answer(step) if more is None or not is_own(step) else more(step))

    return await adrive(flow, answer_all)


_KNOWN = (SummaryCall, CallbackCall, Started, Trimmed, ReadSnapshot, Append, ReadEvents)


def is_own(step: Any) -> bool:
    """True for a step neither driver knows: the caller's `more` answers it."""
    return not isinstance(step, _KNOWN)


def _context(step: CallbackCall, **resolvers: Any) -> CompactionContext:
    return CompactionContext(step.view, step.accounts, session_id=step.session_id, **resolvers)


def _session(session: Session | None, step: Any) -> Session:
    if session is None:
        raise ConfigurationError(f"{type(step).__name__} needs a session; none was given")
    return session


def _is_async_callable(obj: Any) -> bool:
    if inspect.iscoroutinefunction(obj):
        return True
    call = getattr(type(obj), "__call__", None)  # noqa: B004 - the class's, not the instance's
    return call is not None and inspect.iscoroutinefunction(call)
