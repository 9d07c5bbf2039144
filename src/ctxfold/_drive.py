"""The two drivers every generator-written algorithm in ctxfold runs on.

ctxfold writes each algorithm that needs I/O in the middle (the compaction run, summarizing in
pieces, falling back to another summarizer) once, as a generator: it yields a step, and receives
the step's answer back; an exception the step raised is thrown in at the yield, for the
algorithm to judge. `drive` answers steps by calling, `adrive` by awaiting. Nothing else in the
library loops over such a generator.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

S = TypeVar("S")
R = TypeVar("R")

Flow = Generator[S, Any, R]


def drive(
    flow: Flow[S, R],
    call: Callable[[S], Any],
    catch: tuple[type[BaseException], ...] = (Exception,),
) -> R:
    """Run `flow` to its end, answering each step with `call(step)`."""
    done, step = _resume(flow, "next", None)
    while not done:
        try:
            answer = call(step)
        except catch as exc:
            done, step = _resume(flow, "throw", exc)
        else:
            done, step = _resume(flow, "send", answer)
    return step  # type: ignore[no-any-return]


async def adrive(
    flow: Flow[S, R],
    call: Callable[[S], Awaitable[Any]],
    catch: tuple[type[BaseException], ...] = (Exception,),
    *,
    in_thread: bool = False,
) -> R:
    """Run `flow` on an event loop, answering each step with `await call(step)`.

    With `in_thread`, the flow itself is resumed in a worker thread, for flows whose own steps
    block (the compaction run reads and appends to a store between summaries)."""

    async def resume(how: str, value: Any) -> tuple[bool, Any]:
        if in_thread:
            return await asyncio.to_thread(_resume, flow, how, value)
        return _resume(flow, how, value)

    done, step = await resume("next", None)
    while not done:
        try:
            answer = await call(step)
        except catch as exc:
            done, step = await resume("throw", exc)
        else:
            done, step = await resume("send", answer)
    return step  # type: ignore[no-any-return]


def _resume(flow: Flow[Any, Any], how: str, value: Any) -> tuple[bool, Any]:
    """Advance `flow` one step: (False, next step), or (True, its return value) at the end.
    StopIteration never leaves this function: a future in a worker thread cannot carry it."""
    try:
        if how == "next":
            return False, next(flow)
        if how == "throw":
            return False, flow.throw(value)
        return False, flow.send(value)
    except StopIteration as stop:
        return True, stop.value
