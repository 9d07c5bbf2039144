"""What each framework integration adds to one model call, at 1,000 and 10,000 items of history.

For each framework the same agent runs twice over the same history: once as the framework ships
it (the Agents SDK with its own `SQLiteSession`, LangChain with its checkpointer alone,
pydantic-ai with `message_history`), once with the ctxfold integration over a SQLite log. Each
timed step is one user message and one model call that answers with text; the model is the
framework's own test model, so the figures are the framework's own per-step cost and ctxfold's
addition to it, not a provider's latency. The budget is far above the history, so no compaction
runs in a timed step: compaction itself is measured by the replay benchmark.

The goal (issue 9): the overhead under 1 ms, or under 5% of the framework's own per-step cost,
whichever is larger.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import statistics
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from ctxfold.errors import MissingDependencyError

SIZES = (1_000, 10_000)
QUICK_SIZES = (100,)
STEPS = {100: 3, 1_000: 21, 10_000: 11}
"""Timed steps per size and side (after one untimed warm-up step)."""
WINDOW = 100_000_000
"""Tokens: a budget no history here reaches, so the steps measure the adapter, not a compaction."""

COLUMNS = [
    "framework",
    "items",
    "framework ms/step",
    "spread",
    "with ctxfold ms/step",
    "spread ",
    "overhead ms",
    "overhead %",
    "goal ms",
    "meets goal",
]


def _text(index: int) -> str:
    return f"step {index}: looked at src/module_{index}.py and found nothing unusual there"


# -- OpenAI Agents SDK -----------------------------------------------------------------------
def _agents_items(count: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for index in range(count // 4):
        call = f"call_{index}"
        items += [
            {"role": "user", "content": _text(index)},
            {"type": "function_call", "call_id": call, "name": "read", "arguments": "{}"},
            {"type": "function_call_output", "call_id": call, "output": _text(index) * 3},
            {"type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": "done", "annotations": []}]},
        ]  # fmt: skip
    return items


def _agents(count: int, steps: int, folder: Path) -> tuple[list[float], list[float]]:
    from agents import Agent, RunConfig, Runner
    from agents.memory import SQLiteSession
    from agents.testing import ScriptedModel, assistant_message

    from ctxfold import Budget, Compactor, SQLiteStore
    from ctxfold.integrations.openai_agents import CtxfoldSession

    loop = asyncio.new_event_loop()
    history = _agents_items(count)
    plain_session = SQLiteSession("bench", str(folder / "agents.db"))
    loop.run_until_complete(plain_session.add_items(history))
    store = SQLiteStore(str(folder / "ctxfold-agents.db"), synchronous="NORMAL")
    ours = CtxfoldSession("bench", store=store, compactor=Compactor(Budget(window=WINDOW)))
    loop.run_until_complete(ours.add_items(history))

    async def one(session: Any, config: Any) -> None:
        model = ScriptedModel([[assistant_message("ok")]])
        agent = Agent(name="bench", model=model)
        await Runner.run(agent, "next", session=session, run_config=config)

    plain = RunConfig(tracing_disabled=True)
    with_filter = RunConfig(call_model_input_filter=ours.model_input_filter, tracing_disabled=True)
    try:
        return _time_pair(
            _on(loop, lambda: one(plain_session, plain)),
            _on(loop, lambda: one(ours, with_filter)),
            steps,
        )
    finally:
        plain_session.close()
        store.close()
        loop.close()


# -- LangChain v1 ----------------------------------------------------------------------------
def _langchain(count: int, steps: int, folder: Path) -> tuple[list[float], list[float]]:
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from ctxfold import Budget, SQLiteStore
    from ctxfold.integrations.langchain import CtxfoldMiddleware

    history: list[Any] = []
    for index in range(count // 4):
        call = {"name": "read", "args": {}, "id": f"call_{index}"}
        history += [
            HumanMessage(_text(index)),
            AIMessage("", tool_calls=[call]),
            ToolMessage(_text(index) * 3, tool_call_id=f"call_{index}"),
            AIMessage("done"),
        ]

    def answers() -> Any:
        while True:
            yield AIMessage("ok")

    def agent(middleware: list[Any]) -> Any:
        built = create_agent(
            GenericFakeChatModel(messages=answers()), [], middleware=middleware,
            checkpointer=InMemorySaver(),
        )  # fmt: skip
        config = {"configurable": {"thread_id": "bench"}}
        built.invoke({"messages": history}, config)
        return lambda: built.invoke({"messages": [HumanMessage("next")]}, config)

    store = SQLiteStore(str(folder / "ctxfold-langchain.db"), synchronous="NORMAL")
    plain = agent([])
    ours = agent([CtxfoldMiddleware(store=store, budget=Budget(window=WINDOW))])
    try:
        return _time_pair(plain, ours, steps)
    finally:
        store.close()


# -- pydantic-ai -----------------------------------------------------------------------------
def _pydantic_ai(count: int, steps: int, folder: Path) -> tuple[list[float], list[float]]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from ctxfold import Budget, SQLiteStore
    from ctxfold.integrations.pydantic_ai import CtxfoldCapability

    history: list[ModelMessage] = []
    for index in range(count // 4):
        call = f"call_{index}"
        history += [
            ModelRequest(parts=[UserPromptPart(_text(index))]),
            ModelResponse(parts=[ToolCallPart("read", {}, tool_call_id=call)]),
            ModelRequest(parts=[ToolReturnPart("read", _text(index) * 3, tool_call_id=call)]),
            ModelResponse(parts=[TextPart("done")]),
        ]

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("ok")])

    store = SQLiteStore(str(folder / "ctxfold-pydantic.db"), synchronous="NORMAL")
    plain = Agent(FunctionModel(answer))
    capability = CtxfoldCapability(store=store, budget=Budget(window=WINDOW))
    ours = Agent(FunctionModel(answer), capabilities=[capability])

    def step(agent: Agent[None, str]) -> Callable[[], Coroutine[Any, Any, None]]:
        # Each run continues the last one, as an application passes all_messages() back.
        carried = list(history)

        async def one() -> None:
            result = await agent.run("next", message_history=carried, conversation_id="bench")
            carried[:] = result.all_messages()

        return one

    loop = asyncio.new_event_loop()
    try:
        return _time_pair(_on(loop, step(plain)), _on(loop, step(ours)), steps)
    finally:
        store.close()
        loop.close()


# -- timing ----------------------------------------------------------------------------------
def _on(
    loop: asyncio.AbstractEventLoop, step: Callable[[], Coroutine[Any, Any, None]]
) -> Callable[[], None]:
    """An async step as a plain call, run to its end on `loop` (one loop for every step, as an
    application keeps its own)."""
    return lambda: loop.run_until_complete(step())


def _time_pair(
    plain: Callable[[], Any], ours: Callable[[], Any], steps: int
) -> tuple[list[float], list[float]]:
    """Milliseconds of each timed step of the framework alone and with ctxfold.

    The two take turns, the first one alternating, so that a busy spell on the machine and the
    heap both agents leave behind weigh on both alike. Garbage is collected before each step,
    outside the timing: a step pays for the collections its own allocations set off, not for the
    garbage the steps before it left (which would land on whichever side happened to run next).
    """
    plain()  # warm-up: first-call imports, caches, and the first log of a history
    ours()
    timings: tuple[list[float], list[float]] = ([], [])
    sides = (plain, ours)
    for index in range(steps):
        for side in (0, 1) if index % 2 == 0 else (1, 0):
            gc.collect()
            began = time.perf_counter()
            sides[side]()
            timings[side].append((time.perf_counter() - began) * 1000)
    return timings


def _spread(samples: list[float]) -> str:
    """The interquartile range of the samples, in ms."""
    if len(samples) < 4:
        return f"{min(samples):.2f}–{max(samples):.2f}"
    quartiles = statistics.quantiles(samples, n=4)
    return f"{quartiles[0]:.2f}–{quartiles[2]:.2f}"


def _row(name: str, count: int, plain: list[float], ours: list[float]) -> list[Any]:
    base, with_ctxfold = statistics.median(plain), statistics.median(ours)
    # Each step with ctxfold against the framework's step run next to it: a busy spell on the
    # machine weighs on both sides of a difference, where it would shift one median only.
    overhead = statistics.median(o - p for p, o in zip(plain, ours, strict=True))
    goal = max(1.0, 0.05 * base)
    return [
        name,
        count,
        round(base, 2),
        _spread(plain),
        round(with_ctxfold, 2),
        _spread(ours),
        round(overhead, 2),
        round(100 * overhead / base, 1),
        round(goal, 2),
        "yes" if overhead <= goal else "no",
    ]


Timing = Callable[[int, int, Path], tuple[list[float], list[float]]]
"""Items, timed steps, a scratch folder -> the framework's step times alone and with ctxfold."""

FRAMEWORKS: tuple[tuple[str, str, Timing], ...] = (
    ("openai-agents", "ctxfold.integrations.openai_agents", _agents),
    ("langchain", "ctxfold.integrations.langchain", _langchain),
    ("pydantic-ai", "ctxfold.integrations.pydantic_ai", _pydantic_ai),
)
"""Each framework's name in the table, its integration's module and its timing."""


def left_out() -> dict[str, str]:
    """The frameworks whose integration cannot be imported here, each with ctxfold's reason (not
    installed, or older than its extra declares: on Python 3.10, pydantic-ai)."""
    reasons = {}
    for framework, module, _ in FRAMEWORKS:
        try:
            importlib.import_module(module)
        except MissingDependencyError as exc:
            reasons[framework] = str(exc)
    return reasons


def run(quick: bool = False) -> dict[str, Any]:
    """Time each framework with and without its ctxfold integration at each size."""
    rows: list[list[Any]] = []
    missing = left_out()
    for count in QUICK_SIZES if quick else SIZES:
        steps = STEPS[count]
        with tempfile.TemporaryDirectory() as name:
            folder = Path(name)
            for framework, _, timed in FRAMEWORKS:
                if framework not in missing:
                    plain, ours = timed(count, steps, folder)
                    rows.append(_row(framework, count, plain, ours))
    return {
        "title": "What each framework integration adds to one model call",
        "columns": COLUMNS,
        "rows": rows,
        "notes": [
            *(f"Left out: {framework}, because {reason}." for framework, reason in missing.items()),
            "A step is one user message and one model call answered by the framework's own test "
            "model (Agents SDK ScriptedModel, langchain-core GenericFakeChatModel, pydantic-ai "
            "FunctionModel); 'framework' is the agent as the framework ships it (Agents SDK "
            "SQLiteSession, LangChain InMemorySaver, pydantic-ai message_history), 'with "
            "ctxfold' adds the integration over a SQLite log with synchronous=NORMAL (WAL: an "
            "append survives a crash of the process, not of the machine; with the default FULL "
            "each append adds one fsync, about 1.4 ms on the machine these figures come from).",
            "items: the history before the timed steps, a quarter each user messages, tool "
            "calls, tool results and answers.",
            "ms/step is the median of the timed steps after one warm-up step each; the framework "
            "alone and with ctxfold take turns step by step (who goes first alternates), with "
            "garbage collected before each step outside the timing, so a step pays for the "
            "collections its own allocations set off; spread is the interquartile range "
            "(min–max under four samples). overhead is the median of the differences between "
            "each step with ctxfold and the framework's step beside it.",
            "goal: issue 9 asks for an overhead under 1 ms or under 5% of the framework's own "
            "per-step cost, whichever is larger.",
            "No compaction runs in a timed step (the budget is far above the history): the "
            "figures are the adapter's cost, logging and projecting; compaction is measured by "
            "the replay benchmark.",
        ],
    }
