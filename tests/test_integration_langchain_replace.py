"""CtxfoldMiddleware follows a message replaced in the graph state under the same id
(``update_state``, a middleware returning an edited message), inside a real LangChain v1 agent
with langchain-core's fake chat model and LangGraph's in-memory checkpointer."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from tests._frameworks import minimum

pytest.importorskip("langchain", minversion=minimum("langchain"))

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxfold import Budget, Compactor, MemoryStore, Summarize
from ctxfold.events import MESSAGE
from ctxfold.integrations import _langchain_messages as conv
from ctxfold.integrations.langchain import CtxfoldMiddleware
from ctxfold.session import Session
from ctxfold.summarizers.request import SummaryRequest
from ctxfold.testing import FixedCounter, FunctionSummarizer


class RecordingChat(GenericFakeChatModel):
    """langchain-core's fake chat model, keeping what it was sent and accepting tools."""

    requests: list[list[BaseMessage]]

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.requests.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def answers(*texts: str) -> Iterator[AIMessage]:
    yield from (AIMessage(content=text) for text in texts)
    n = 0
    while True:
        n += 1
        yield AIMessage(content=f"answer {n}")


def chat_with_tools() -> Iterator[AIMessage]:
    """Per task: one call to `read`, then an answer."""
    n = 0
    while True:
        n += 1
        call = {"name": "read", "args": {"path": f"src/m{n}.py"}, "id": f"call_{n}"}
        yield AIMessage(content="", tool_calls=[call])
        yield AIMessage(content=f"done {n}")


@tool
def read(path: str) -> str:
    """Read a file."""
    return f"{path}: print('hello')"


def agent_with(model: RecordingChat, middleware: list[Any], checkpointer: Any = None) -> Any:
    return create_agent(
        model,
        [read],
        system_prompt="Be brief.",
        middleware=middleware,
        checkpointer=checkpointer if checkpointer is not None else InMemorySaver(),
    )


def ask(agent: Any, text: str, thread: str) -> None:
    agent.invoke({"messages": [{"role": "user", "content": text}]}, config(thread))


def config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def state_of(agent: Any, thread: str) -> list[BaseMessage]:
    return list(agent.get_state(config(thread)).values["messages"])


def sent_text(request: list[BaseMessage]) -> str:
    return "\n".join(str(m.content) for m in request)


def projected(session: Session) -> list[tuple[str | None, str]]:
    """The session's projection, system prompt left out, as (id, text)."""
    out = []
    for message in session.messages()[1:]:
        stored = conv.kept(message)
        out.append((stored["data"]["id"] if stored else None, message.content or ""))
    return out


def logged_ids(session: Session) -> Counter[str]:
    """How many times each LangChain id was appended to the log."""
    ids = (conv.kept(e.message) for e in session.events() if e.type == MESSAGE)
    return Counter(stored["data"]["id"] for stored in ids if stored and stored["data"]["id"])


def edits(session: Session) -> list[str]:
    return [e.type for e in session.events() if e.type in ("reset", "retraction")]


def test_a_message_replaced_with_update_state_is_what_the_model_and_the_log_show_next() -> None:
    """After ``update_state`` puts a corrected message in place of an earlier one (same id),
    the next model call is sent the correction, the session's projection holds it instead of
    the old text, the log still holds the old text, and the correction is appended once."""
    model = RecordingChat(messages=answers(), requests=[])
    middleware = CtxfoldMiddleware(store=MemoryStore())
    agent = agent_with(model, [middleware])
    ask(agent, "my name is Bob", "replace")
    ask(agent, "I live in Paris", "replace")
    first = state_of(agent, "replace")[0]
    agent.update_state(
        config("replace"), {"messages": [HumanMessage(id=first.id, content="my name is Alice")]}
    )
    ask(agent, "what is my name?", "replace")
    ask(agent, "and where do I live?", "replace")

    for request in model.requests[2:]:
        assert "my name is Alice" in sent_text(request)
        assert "Bob" not in sent_text(request)
    session = middleware.session("replace")
    state = state_of(agent, "replace")
    assert projected(session) == [(m.id, m.content) for m in state]
    assert any(e.message.content == "my name is Bob" for e in session.events() if e.type == MESSAGE)
    assert edits(session) == ["reset"]
    # The turn after the correction appended its own two messages and nothing else again.
    assert logged_ids(session)[state[-1].id] == logged_ids(session)[state[-2].id] == 1


async def test_a_replaced_message_is_followed_by_an_async_agent_too() -> None:
    """`ainvoke` (`awrap_model_call`) follows the replacement the same way."""
    model = RecordingChat(messages=answers(), requests=[])
    middleware = CtxfoldMiddleware(store=MemoryStore())
    agent = agent_with(model, [middleware])
    cfg = config("async")
    await agent.ainvoke({"messages": [{"role": "user", "content": "my name is Bob"}]}, cfg)
    first = state_of(agent, "async")[0]
    await agent.aupdate_state(cfg, {"messages": [HumanMessage(id=first.id, content="I am Alice")]})
    await agent.ainvoke({"messages": [{"role": "user", "content": "who am I?"}]}, cfg)

    assert "I am Alice" in sent_text(model.requests[-1])
    assert "Bob" not in sent_text(model.requests[-1])
    state = state_of(agent, "async")
    assert projected(middleware.session("async")) == [(m.id, m.content) for m in state]


def test_a_replaced_model_answer_is_taken_back_and_logged_again_without_a_reset() -> None:
    """A correction of the newest logged message (here the model's last answer, replaced with
    ``update_state`` under its id) is followed with a retraction and the corrected message, not
    by logging the whole thread again; each other message stays logged once."""
    model = RecordingChat(messages=answers("the capital is Lyon"), requests=[])
    middleware = CtxfoldMiddleware(store=MemoryStore())
    agent = agent_with(model, [middleware])
    ask(agent, "capital of France?", "answer")
    wrong = state_of(agent, "answer")[-1]
    fixed = AIMessage(id=wrong.id, content="the capital is Paris")
    agent.update_state(config("answer"), {"messages": [fixed]})
    ask(agent, "thanks", "answer")

    assert "the capital is Paris" in sent_text(model.requests[-1])
    assert "Lyon" not in sent_text(model.requests[-1])
    session = middleware.session("answer")
    state = state_of(agent, "answer")
    assert projected(session) == [(m.id, m.content) for m in state]
    assert edits(session) == ["retraction"]
    assert logged_ids(session) == Counter({m.id: 2 if m.id == wrong.id else 1 for m in state})


class Redact(AgentMiddleware):
    """Rewrites the model's answer in the graph state, under its id, after the model call
    (as a guardrail that redacts secrets from output does)."""

    def after_model(self, state: Any, runtime: Any) -> Any:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and "hunter2" in str(last.content):
            redacted = str(last.content).replace("hunter2", "[redacted]")
            return {"messages": [last.model_copy(update={"content": redacted})]}
        return None


def test_an_answer_a_middleware_rewrites_after_the_model_call_is_logged_as_rewritten() -> None:
    """The answer ctxfold logs as the model returns it, then rewritten in the state by a
    middleware under the same id: from the next call on, the projection (what the budget
    counts, what a summary would be written from) holds the rewritten answer."""
    model = RecordingChat(messages=answers("your password is hunter2"), requests=[])
    middleware = CtxfoldMiddleware(store=MemoryStore())
    agent = agent_with(model, [Redact(), middleware])
    ask(agent, "what is my password?", "redact")
    ask(agent, "thanks", "redact")
    ask(agent, "bye", "redact")

    for request in model.requests[1:]:
        assert "[redacted]" in sent_text(request)
        assert "hunter2" not in sent_text(request)
    session = middleware.session("redact")
    state = state_of(agent, "redact")
    assert projected(session) == [(m.id, m.content) for m in state]
    assert edits(session) == ["retraction"]


def test_a_replacement_is_followed_by_a_process_that_reopens_the_log() -> None:
    """A new middleware over the same store (a restarted process) that finds a state message
    whose text differs from the one logged under its id follows the state."""
    store = MemoryStore()
    checkpointer = InMemorySaver()
    model = RecordingChat(messages=answers(), requests=[])
    agent = agent_with(model, [CtxfoldMiddleware(store=store)], checkpointer)
    ask(agent, "my name is Bob", "reopen")
    ask(agent, "hello", "reopen")
    first = state_of(agent, "reopen")[0]
    agent.update_state(config("reopen"), {"messages": [HumanMessage(id=first.id, content="Al")]})

    restarted = CtxfoldMiddleware(store=store)
    agent = agent_with(model, [restarted], checkpointer)
    ask(agent, "who am I?", "reopen")
    ask(agent, "really?", "reopen")

    assert "Bob" not in sent_text(model.requests[-1])
    state = state_of(agent, "reopen")
    assert projected(restarted.session("reopen")) == [(m.id, m.content) for m in state]
    assert edits(restarted.session("reopen")) == ["reset"]


def echo(request: SummaryRequest) -> str:
    """A short summary that keeps the facts (``fact:...`` words) of the stretch."""
    facts = [w for m in request.messages for w in (m.content or "").split() if "fact:" in w]
    return "## Objective\n- " + " ".join(facts or ["nothing"])


FILLER = " ".join(f"word{i}" for i in range(60))


@tool
def look(path: str) -> str:
    """Read a file."""
    return f"{path} {FILLER}"


def three_looks_a_task() -> Iterator[AIMessage]:
    """Per task: three calls to `look`, the first of all at ``fact:bob``, then an answer."""
    n = 0
    while True:
        for _ in range(3):
            n += 1
            path = "fact:bob" if n == 1 else f"src/m{n}.py"
            call = {"name": "look", "args": {"path": path}, "id": f"call_{n}"}
            yield AIMessage(content="", tool_calls=[call])
        yield AIMessage(content=f"done {n}")


def summarizing() -> Compactor:
    """One word a token; a window a few tasks fill; summaries that keep the facts."""
    budget = Budget(window=1000, max_output=100, keep_recent_tokens=200)
    return Compactor(budget, [Summarize()], FunctionSummarizer(echo), counter=FixedCounter())


def test_a_message_replaced_inside_a_summarized_stretch_reaches_the_model() -> None:
    """A tool result ctxfold has already summarized, then replaced in the state: the model is
    no longer sent the summary of the old text; the projection starts over from the state, and
    is summarized again, from the replacement, as the budget calls for it."""
    model = RecordingChat(messages=three_looks_a_task(), requests=[])
    middleware = CtxfoldMiddleware(store=MemoryStore(), compactor=summarizing())
    agent = create_agent(model, [look], middleware=[middleware], checkpointer=InMemorySaver())
    for task in range(5):
        ask(agent, f"task {task}", "summarized")
    session = middleware.session("summarized")
    assert any(e.type == "compaction" for e in session.events())
    summary = model.requests[-1][1]
    assert "fact:bob" in str(summary.content) and "summary" in str(summary.content)

    result = state_of(agent, "summarized")[2]
    assert isinstance(result, ToolMessage) and "fact:bob" in str(result.content)
    fixed = ToolMessage(
        id=result.id, tool_call_id=result.tool_call_id, content=f"fact:alice {FILLER}"
    )
    agent.update_state(config("summarized"), {"messages": [fixed]})
    ask(agent, "task 5", "summarized")
    ask(agent, "task 6", "summarized")

    for request in model.requests[-8:]:
        assert "fact:alice" in sent_text(request)
        assert "fact:bob" not in sent_text(request)
    assert edits(session) == ["reset"]
    assert session.messages()[1].content and "fact:alice" in session.messages()[1].content


def test_an_untouched_thread_appends_no_reset_or_retraction() -> None:
    """A tool-calling thread whose state only grows, over several runs: the log holds each
    message once, and no reset or retraction."""
    model = RecordingChat(messages=chat_with_tools(), requests=[])
    middleware = CtxfoldMiddleware(store=MemoryStore())
    agent = agent_with(model, [middleware])
    for task in range(4):
        ask(agent, f"task {task}", "untouched")

    session = middleware.session("untouched")
    state = state_of(agent, "untouched")
    assert edits(session) == []
    assert logged_ids(session) == Counter(m.id for m in state)
    assert projected(session) == [(m.id, m.content) for m in state]
    for request in model.requests:
        assert isinstance(request[0], SystemMessage)


def test_a_message_in_content_blocks_is_not_taken_for_a_replacement_run_after_run() -> None:
    """A message whose content is a list of blocks comes back from the checkpointer as a new
    list each run, and from the log as the stored data: no reset, no retraction."""
    model = RecordingChat(messages=answers(), requests=[])
    middleware = CtxfoldMiddleware(store=MemoryStore())
    agent = agent_with(model, [middleware])
    blocks: list[str | dict[str, Any]] = [
        {"type": "text", "text": "look at this"},
        {"type": "text", "text": "and this"},
    ]
    agent.invoke({"messages": [HumanMessage(content=blocks)]}, config("blocks"))
    for turn in range(3):
        ask(agent, f"turn {turn}", "blocks")

    session = middleware.session("blocks")
    assert edits(session) == []
    assert logged_ids(session) == Counter(m.id for m in state_of(agent, "blocks"))
