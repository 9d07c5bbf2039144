"""CtxfoldCapability next to a capability that edits the request in `before_model_request`:
wherever it is listed, the log holds the conversation and the model gets the edit."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests._frameworks import minimum

pytest.importorskip("pydantic_ai", minversion=minimum("pydantic_ai"))

from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import RunContext

from ctxfold import MemoryStore
from ctxfold.integrations import _pydantic_ai_messages as conv
from ctxfold.integrations.pydantic_ai import CtxfoldCapability
from ctxfold.pipeline.clear import CLEARED_MARK
from tests._integration import TASKS, compactor, logged_messages, tool_output

CONTEXT = "Retrieved: the parser lives in src/parse.py."


class InjectContext(AbstractCapability[Any]):
    """Adds a retrieved context after each request's newest message, for that request only."""

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        injected = ModelRequest(parts=[UserPromptPart(CONTEXT)])
        return dataclasses.replace(request_context, messages=[*request_context.messages, injected])


class RewriteSystemPrompt(AbstractCapability[Any]):
    """Sends the first request with another system prompt, for this request only."""

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        first, *rest = request_context.messages
        assert isinstance(first, ModelRequest)
        parts = [
            SystemPromptPart("Be brief.") if isinstance(p, SystemPromptPart) else p
            for p in first.parts
        ]
        return dataclasses.replace(
            request_context, messages=[dataclasses.replace(first, parts=parts), *rest]
        )


class Model:
    """Calls `read` once a task, then answers; records every request it was sent."""

    def __init__(self) -> None:
        self.requests: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(list(messages))
        n = len(self.requests)
        if n % 2:
            return ModelResponse(
                parts=[ToolCallPart("read", {"path": "a.py"}, tool_call_id=f"c{n}")]
            )
        return ModelResponse(parts=[TextPart(f"done {n}")])


def make_agent(model: Model, capabilities: list[AbstractCapability[Any]]) -> Agent[None, str]:
    agent = Agent(FunctionModel(model), system_prompt="Fix the bug.", capabilities=capabilities)

    @agent.tool_plain
    def read(path: str) -> str:
        """Read a file."""
        return f"contents of {path}"

    return agent


async def two_runs(
    ctxfold_first: bool, other: AbstractCapability[Any] | None
) -> tuple[Model, CtxfoldCapability, list[ModelMessage]]:
    model = Model()
    capability = CtxfoldCapability(store=MemoryStore())
    order: list[AbstractCapability[Any]] = [capability]
    if other is not None:
        order = [capability, other] if ctxfold_first else [other, capability]
    agent = make_agent(model, order)
    history: list[ModelMessage] = []
    for prompt in ("fix the parser", "and the tests"):
        result = await agent.run(prompt, message_history=history, conversation_id="order")
        history = result.all_messages()
    return model, capability, history


def texts(messages: list[ModelMessage]) -> list[str]:
    return [
        str(p.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, (UserPromptPart, SystemPromptPart))
    ]


def shape(request: list[ModelMessage]) -> list[list[tuple[str, str]]]:
    """What a model was sent, by message and part (kind and text), without the injected
    context (the model merges it into the request before it)."""
    out = []
    for message in request:
        parts = [
            (p.part_kind, str(getattr(p, "content", getattr(p, "tool_name", ""))))
            for p in message.parts
            if not (isinstance(p, UserPromptPart) and p.content == CONTEXT)
        ]
        if parts:
            out.append(parts)
    return out


def logged(capability: CtxfoldCapability) -> list[Any]:
    return [m.replace(extra={}) for m in logged_messages(capability.session("order"))]


def expected(history: list[ModelMessage]) -> list[Any]:
    return [
        m.replace(extra={})
        for i, message in enumerate(history)
        for m in conv.to_messages(message, index=i)
    ]


async def test_a_context_injected_before_ctxfold_is_sent_and_never_logged() -> None:
    """Listed before CtxfoldCapability, a capability that adds a context message to each request
    gets it to the model, after the projection, which is what ctxfold alone sends; the log holds
    the conversation alone, and the second run continues it."""
    model, capability, history = await two_runs(False, InjectContext())
    alone, _, alone_history = await two_runs(True, None)

    assert len(model.requests) == len(alone.requests) == 4
    for request, without in zip(model.requests, alone.requests, strict=True):
        assert texts(request).count(CONTEXT) == 1
        assert texts(request)[-1] == CONTEXT
        assert shape(request) == shape(without)
    assert "fix the parser" in texts(model.requests[-1])  # the first run, from the projection
    assert CONTEXT not in texts(history)
    assert logged(capability) == expected(history)
    assert all(
        CONTEXT not in (m.content or "") for m in logged_messages(capability.session("order"))
    )
    assert len(history) == len(alone_history)


async def test_the_log_is_the_same_wherever_ctxfold_is_listed() -> None:
    """CtxfoldCapability listed before or after the injecting capability logs the same
    conversation, and the model gets the injected context either way."""
    before_model, before, before_history = await two_runs(False, InjectContext())
    after_model, after, after_history = await two_runs(True, InjectContext())

    assert logged(before) == logged(after) == expected(after_history)
    assert [texts(r) for r in before_model.requests] == [texts(r) for r in after_model.requests]
    assert len(before_history) == len(after_history)


async def test_a_system_prompt_rewritten_for_the_request_replaces_the_logged_one_when_sent() -> (
    None
):
    """A capability before CtxfoldCapability that rewrites the system prompt for the request
    gets its prompt to the model in place of the history's; the log keeps the history's."""
    model, capability, history = await two_runs(False, RewriteSystemPrompt())

    for request in model.requests:
        sent = texts(request)
        assert sent.count("Be brief.") == 1
        assert "Fix the bug." not in sent
    assert "Fix the bug." in texts(history)
    assert logged(capability) == expected(history)


async def test_a_context_injected_before_ctxfold_reaches_every_request_after_compaction() -> None:
    """Over a long run whose old tool results ctxfold clears, the injected context still
    reaches every request, last, and the log holds the conversation alone."""
    model = Model()
    capability = CtxfoldCapability(store=MemoryStore(), compactor=compactor())
    agent = Agent(
        FunctionModel(model),
        system_prompt="Fix the bug.",
        capabilities=[InjectContext(), capability],
    )

    @agent.tool_plain
    def read(path: str) -> str:
        """Read a file."""
        return tool_output(path)

    history: list[ModelMessage] = []
    for task in range(3 * TASKS):  # one 120-word tool result a task: past the 3,000 window
        result = await agent.run(f"task {task}", message_history=history, conversation_id="order")
        history = result.all_messages()

    assert any(e.type != "message" for e in capability.session("order").events())
    cleared = [
        p
        for m in model.requests[-1]
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart) and CLEARED_MARK in str(p.content)
    ]
    assert cleared  # the last request was sent a compacted projection
    for request in model.requests:
        assert texts(request).count(CONTEXT) == 1
        assert texts(request)[-1] == CONTEXT
    assert logged(capability) == expected(history)
