"""The two drivers every generator-written algorithm in ctxfold runs on.

ctxfold writes each algorithm that needs I/O in the middle (a compaction, summarizing in pieces,
falling back to another summarizer) once, as a generator: it yields a step, and receives
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
) -> R:
    """Run `flow` on an event loop, answering each step with `await call(step)`.

    The flow does no I/O, but its work between two steps can take long (planning a compaction
    of thousands of messages): it is resumed in a worker thread, so the loop goes on serving
    other tasks meanwhile. One step at a time, so the flow never runs in two threads at once."""
    done, step = await asyncio.to_thread(_resume, flow, "next", None)
    while not done:
        try:
            answer = await call(step)
        except catch as exc:
            done, step = await asyncio.to_thread(_resume, flow, "throw", exc)
        else:
            done, step = await asyncio.to_thread(_resume, flow, "send", answer)
    return step  # type: ignore[no-any-return]


def _resume(flow: Flow[Any, Any], how: str, value: Any) -> tuple[bool, Any]:
    """Advance `flow` one step: (False, next step), or (True, its return value) at the end."""
    try:
        if how == "next":
            return False, next(flow)
        if how == "throw":
            return False, flow.throw(value)
        return False, flow.send(value)
    except StopIteration as stop:
        return True, stop.value
