"""The seam for recall: each integration offers a `RecallTool` to the model as a tool of its own
framework, bound to the conversation's session. (Recall itself comes later; this is a stand-in.)"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("langchain")
pytest.importorskip("pydantic_ai")

from agents import Agent, RunConfig, Runner
from agents.testing import ScriptedModel, assistant_message, function_call
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from ctxfold import MemoryStore
from ctxfold.errors import ConfigurationError
from ctxfold.integrations import RecallTool
from ctxfold.integrations.langchain import CtxfoldMiddleware
from ctxfold.integrations.openai_agents import CtxfoldSession
from ctxfold.integrations.pydantic_ai import CtxfoldCapability
from ctxfold.session import Session
from tests.test_integration_langchain import ScriptedChat


class EventCount:
    """A stand-in for recall: answers with the session it was handed and the query."""

    name = "recall"
    description = "Look up earlier parts of this conversation."
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    }

    def __call__(self, session: Session, arguments: Mapping[str, Any]) -> str:
        return f"{arguments['query']} in {session.id}"


def test_the_stand_in_has_the_seam_shape() -> None:
    assert isinstance(EventCount(), RecallTool)


def test_a_recall_without_an_object_schema_is_refused() -> None:
    bad = EventCount()
    bad.parameters = {"type": "string"}
    with pytest.raises(ConfigurationError, match="parameters"):
        CtxfoldSession("s", store=MemoryStore(), recall=bad)


async def test_agents_sdk_offers_recall_as_a_function_tool() -> None:
    session = CtxfoldSession("agents-recall", store=MemoryStore(), recall=EventCount())
    tool = session.recall_tool()
    assert tool is not None
    model = ScriptedModel(
        [
            [function_call("recall", {"query": "the path"}, call_id="r1")],
            [assistant_message("ok")],
        ]
    )
    agent = Agent(name="a", model=model, tools=[tool])
    config = RunConfig(call_model_input_filter=session.model_input_filter, tracing_disabled=True)
    await Runner.run(agent, "what was the path?", session=session, run_config=config)
    outputs = [i for i in await session.get_items() if i.get("type") == "function_call_output"]
    assert [o["output"] for o in outputs] == ["the path in agents-recall"]


def test_langchain_offers_recall_as_a_middleware_tool() -> None:
    def script() -> Iterator[AIMessage]:
        yield AIMessage(
            content="", tool_calls=[{"name": "recall", "args": {"query": "the path"}, "id": "r1"}]
        )
        yield AIMessage(content="ok")

    middleware = CtxfoldMiddleware(store=MemoryStore(), recall=EventCount())
    agent = create_agent(
        ScriptedChat(messages=script(), requests=[]),
        [],
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "lc-recall"}}
    agent.invoke({"messages": [{"role": "user", "content": "what was the path?"}]}, config)
    messages = agent.get_state(config).values["messages"]
    answers = [m.content for m in messages if isinstance(m, ToolMessage)]
    assert answers == ["the path in lc-recall"]


async def test_pydantic_ai_offers_recall_as_a_capability_tool() -> None:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            assert [t.name for t in info.function_tools] == ["recall"]
            args = json.dumps({"query": "the path"})
            return ModelResponse(parts=[ToolCallPart("recall", args, tool_call_id="r1")])
        return ModelResponse(parts=[TextPart("ok")])

    capability = CtxfoldCapability(store=MemoryStore(), recall=EventCount())
    agent = PydanticAgent(FunctionModel(model), capabilities=[capability])
    result = await agent.run("what was the path?", conversation_id="pa-recall")
    returns = [
        p.content for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)
    ]
    assert returns == ["the path in pa-recall"]
