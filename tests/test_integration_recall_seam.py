"""The seam for recall: each integration offers a `RecallTool` to the model as a tool of its own
framework, bound to the conversation's session: a stand-in first, then ctxfold's own recall
(``recall=True``), called by each framework's test model."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from tests._frameworks import minimum

pytest.importorskip("agents", minversion=minimum("agents"))
pytest.importorskip("langchain", minversion=minimum("langchain"))
pytest.importorskip("pydantic_ai", minversion=minimum("pydantic_ai"))

from agents import Agent, RunConfig, Runner
from agents.testing import ScriptedModel, assistant_message, function_call
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from ctxfold import MemoryStore, recall_tool
from ctxfold.errors import ConfigurationError
from ctxfold.events import Compaction, NewEvent
from ctxfold.integrations import RecallTool
from ctxfold.integrations.langchain import CtxfoldMiddleware
from ctxfold.integrations.openai_agents import CtxfoldSession
from ctxfold.integrations.pydantic_ai import CtxfoldCapability
from ctxfold.messages import Message
from ctxfold.session import Session
from ctxfold.session.recall import Recall
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


# -- the real recall, offered with recall=True -----------------------------------------------------
SECRET = "The staging key rotates at 04:00 UTC from vault path kv/staging/rotor-7."


def with_history_out_of_view(store: MemoryStore, session_id: str) -> str:
    """Log a finished turn whose user message says SECRET, then summarize it away; returns the
    ref the summary prints."""
    session = store.session(session_id)
    session.append(
        [
            Message("user", SECRET),
            Message("assistant", "Noted."),
        ]
    )
    session.append(
        NewEvent.of(Compaction(1, 2, Message("user", "[summary: the user gave rotation details]")))
    )
    assert SECRET not in "".join(m.text for m in session.messages())
    return "log items 1–2"


def test_real_recall_offers_the_tool_its_schema() -> None:
    """recall=True offers ctxfold's own recall, with the schema `recall_tool` gives."""
    session = CtxfoldSession("schema", store=MemoryStore(), recall=True)
    assert isinstance(session.recall, Recall)
    tool = session.recall_tool()
    assert tool is not None and tool.name == "recall"
    assert tool.params_json_schema == recall_tool("openai")["function"]["parameters"]
    assert CtxfoldSession("none", store=MemoryStore(), recall=False).recall_tool() is None


async def test_agents_sdk_model_recalls_what_a_summary_replaced() -> None:
    """The Agents SDK model calls the real recall by the ref a summary printed and gets the
    original words back as the tool's output."""
    store = MemoryStore()
    ref = with_history_out_of_view(store, "agents-real")
    session = CtxfoldSession("agents-real", store=store, recall=True)
    tool = session.recall_tool()
    assert tool is not None
    model = ScriptedModel(
        [
            [function_call("recall", {"ref": ref}, call_id="r1")],
            [assistant_message("04:00 UTC")],
        ]
    )
    agent = Agent(name="a", model=model, tools=[tool])
    config = RunConfig(call_model_input_filter=session.model_input_filter, tracing_disabled=True)
    await Runner.run(agent, "when does the key rotate?", session=session, run_config=config)
    outputs = [i for i in await session.get_items() if i.get("type") == "function_call_output"]
    assert len(outputs) == 1
    assert f"  {SECRET}" in outputs[0]["output"]
    assert outputs[0]["output"].startswith(f'[ctxfold: recall of ref "{ref}"')


def test_langchain_model_recalls_what_a_summary_replaced() -> None:
    """The LangChain agent's model calls the real recall with a query and gets the original
    words back in the tool message."""
    store = MemoryStore()
    with_history_out_of_view(store, "lc-real")

    def script() -> Iterator[AIMessage]:
        yield AIMessage(
            content="",
            tool_calls=[{"name": "recall", "args": {"query": "kv/staging/rotor-7"}, "id": "r1"}],
        )
        yield AIMessage(content="04:00 UTC")

    middleware = CtxfoldMiddleware(store=store, recall=True)
    agent = create_agent(
        ScriptedChat(messages=script(), requests=[]),
        [],
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "lc-real"}}
    agent.invoke({"messages": [{"role": "user", "content": "when does the key rotate?"}]}, config)
    messages = agent.get_state(config).values["messages"]
    (answer,) = [m.content for m in messages if isinstance(m, ToolMessage)]
    assert f"  {SECRET}" in answer and "quoted" in answer


async def test_pydantic_ai_model_recalls_what_a_summary_replaced() -> None:
    """The pydantic-ai model calls the real recall and gets the original words back; a bad call
    gets an error text it can act on, not an exception."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            assert [t.name for t in info.function_tools] == ["recall"]
            return ModelResponse(
                parts=[
                    ToolCallPart("recall", json.dumps({"query": "rotor-7"}), tool_call_id="r1"),
                    ToolCallPart("recall", json.dumps({"ref": "c999"}), tool_call_id="r2"),
                ]
            )
        return ModelResponse(parts=[TextPart("04:00 UTC")])

    store = MemoryStore()
    with_history_out_of_view(store, "pa-real")
    capability = CtxfoldCapability(store=store, recall=True)
    agent = PydanticAgent(FunctionModel(model), capabilities=[capability])
    result = await agent.run("when does the key rotate?", conversation_id="pa-real")
    returns = {
        p.tool_call_id: p.content
        for m in result.all_messages()
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    }
    assert f"  {SECRET}" in returns["r1"]
    assert returns["r2"].startswith("recall error: ") and "c999" in returns["r2"]
