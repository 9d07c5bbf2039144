"""The integrations convert the projection only as far as it changed before each model call; what
they send must be exactly what converting the whole projection afresh gives, through appends and
compactions alike.

Each test runs the long tool-calling agent of that framework's own tests (a 3,000-token window,
so it compacts several times) and compares every request with a conversion from scratch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from ctxfold import MemoryStore
from ctxfold.events import COMPACTION
from ctxfold.session import Session
from tests._frameworks import minimum
from tests._integration import TASKS, compactor


def shape(messages: Sequence[Any]) -> list[Any]:
    """What a request says, without per-object clutter (timestamps of fresh objects)."""
    out = []
    for message in messages:
        parts = getattr(message, "parts", None)
        if parts is not None:  # pydantic-ai
            out.append(
                (type(message).__name__, [(type(p).__name__, str(getattr(p, "content", None)),
                 getattr(p, "tool_call_id", None)) for p in parts])
            )  # fmt: skip
        else:  # LangChain
            out.append(
                (type(message).__name__, message.content, getattr(message, "tool_call_id", None),
                 str(getattr(message, "tool_calls", None)))
            )  # fmt: skip
    return out


def compacted(session: Session) -> int:
    return sum(1 for e in session.events() if e.type == COMPACTION)


def test_pydantic_ai_requests_equal_a_fresh_conversion() -> None:
    """Every projection the capability hands pydantic-ai equals the whole projection converted
    and regrouped afresh."""
    pytest.importorskip("pydantic_ai", minversion=minimum("pydantic_ai"))
    from ctxfold.integrations import _pydantic_ai_messages as conv
    from ctxfold.integrations._common import source_of
    from ctxfold.integrations.pydantic_ai import CtxfoldCapability
    from tests.test_integration_pydantic_ai import Script, make_agent, run_tasks

    class Checked(CtxfoldCapability):
        compared = 0

        async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
            given = list(request_context.messages)
            out = await super().before_model_request(ctx, request_context)
            session = self.session(ctx.conversation_id)
            logged = session.messages()
            fresh = conv.regroup([(conv.group_key(m), conv.to_model_message(m)) for m in logged])
            # A run's first request goes ahead with its prompt not logged yet: it follows the
            # projection as the history's own message.
            positions = [source_of(m)[1] for m in logged if source_of(m) is not None]
            fresh += given[max(positions, default=-1) + 1 :]
            assert shape(out.messages) == shape(fresh)
            self.compared += 1
            return out

    capability = Checked(store=MemoryStore(), compactor=compactor())
    asyncio.run(run_tasks(make_agent(Script(), capability), 0, TASKS, []))
    assert capability.compared >= 40 and compacted(capability.session("pa")) >= 2


def test_langchain_requests_equal_a_fresh_conversion() -> None:
    """Every message list the middleware hands the model equals the whole projection converted
    afresh (the logged system prompt left out)."""
    pytest.importorskip("langchain", minversion=minimum("langchain"))
    from langgraph.checkpoint.memory import InMemorySaver

    from ctxfold.integrations import _langchain_messages as conv
    from ctxfold.integrations._common import source_of
    from ctxfold.integrations.langchain import SYSTEM, CtxfoldMiddleware
    from tests.test_integration_langchain import ScriptedChat, make_agent, run_tasks, script

    class Checked(CtxfoldMiddleware):
        compared = 0

        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            def checked(sent: Any) -> Any:
                session = self.session("lc-long")
                logged = session.messages()
                fresh = [conv.from_message(m) for m in logged if source_of(m) != SYSTEM]
                # A run's first call goes ahead with the user's new message not logged yet: it
                # follows the projection as the graph state's own message.
                sources = {source_of(e.message) for e in session.events() if e.type == "message"}
                fresh += [m for m in request.messages if m.id not in sources]
                assert shape(sent.messages) == shape(fresh)
                self.compared += 1
                return handler(sent)

            return super().wrap_model_call(request, checked)

    middleware = Checked(store=MemoryStore(), compactor=compactor())
    model = ScriptedChat(messages=script(), requests=[])
    run_tasks(make_agent(model, InMemorySaver(), [middleware]), 0, TASKS)
    assert middleware.compared >= 40 and compacted(middleware.session("lc-long")) >= 2


def test_agents_sdk_input_equals_a_fresh_conversion() -> None:
    """Every input the filter hands the Runner starts with the whole projection converted
    afresh."""
    pytest.importorskip("agents", minversion=minimum("agents"))
    from agents import RunConfig

    from ctxfold.integrations import _agents_items as conv
    from ctxfold.integrations.openai_agents import CtxfoldSession
    from tests.test_integration_openai_agents import ScriptedModel, run_tasks

    class Checked(CtxfoldSession):
        compared = 0

        async def model_input_filter(self, data: Any) -> Any:
            out = await super().model_input_filter(data)
            fresh = [i for m in self.session.messages() for i in conv.message_to_items(m)]
            assert list(out.input[: len(fresh)]) == fresh
            self.compared += 1
            return out

    session = Checked("sdk", store=MemoryStore(), compactor=compactor())
    config = RunConfig(call_model_input_filter=session.model_input_filter, tracing_disabled=True)
    asyncio.run(run_tasks(0, TASKS, session=session, model=ScriptedModel(), config=config))
    assert session.compared >= 40 and compacted(session.session) >= 2
