"""CtxfoldMiddleware inside a real LangChain v1 agent (langchain-core's fake chat model)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from tests._frameworks import minimum

pytest.importorskip("langchain", minversion=minimum("langchain"))

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    AnyMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxfold import InvalidInputError, MemoryStore
from ctxfold.integrations import _langchain_messages as conv
from ctxfold.integrations.langchain import CtxfoldMiddleware
from ctxfold.storage.base import EventStore
from tests._integration import (
    CALLS_PER_TASK,
    MORE_TASKS,
    TASKS,
    WINDOW,
    compactor,
    logged_messages,
    overflow_compactor,
    reopen,
    tokens,
    tool_output,
)
from tests._media import (
    B64,
    CALL_ID,
    DATA_URL,
    PDF_URL,
    QUESTION,
    URL_IDS,
    URLS,
    assert_counted_like,
    assert_logged_once,
    count,
    openai_pdf,
    openai_tool,
    openai_user,
)

__all__ = ["reopen"]


def script() -> Iterator[AIMessage]:
    """Per task: three calls to `read`, then an answer."""
    calls = 0
    while True:
        calls += 1
        if calls % (CALLS_PER_TASK + 1):
            call = {"name": "read", "args": {"path": f"src/mod_{calls}.py"}, "id": f"call_{calls}"}
            yield AIMessage(content="", tool_calls=[call])
        else:
            yield AIMessage(content=f"done {calls}")


class Overflow(Exception):
    """What a provider says when the prompt is too long (as `is_context_overflow` reads it)."""


class ScriptedChat(GenericFakeChatModel):
    """langchain-core's fake chat model, recording what it was sent and accepting tools."""

    requests: list[list[BaseMessage]]
    overflows: int = 0

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.requests.append(list(messages))
        if self.overflows:
            self.overflows -= 1
            raise Overflow("This model's maximum context length is 3000 tokens")
        return super()._generate(messages, *args, **kwargs)


@tool
def read(path: str) -> str:
    """Read a file."""
    return tool_output(path)


def make_agent(model: ScriptedChat, checkpointer: InMemorySaver, middleware: list[Any]) -> Any:
    return create_agent(
        model,
        [read],
        system_prompt="Fix the bug.",
        middleware=middleware,
        checkpointer=checkpointer,
    )


def run_tasks(agent: Any, first: int, count: int, thread: str = "lc-long") -> None:
    config = {"configurable": {"thread_id": thread}}
    for task in range(first, first + count):
        agent.invoke({"messages": [{"role": "user", "content": f"task {task}"}]}, config)


def assert_valid(messages: Sequence[BaseMessage]) -> None:
    """Every tool call is answered right after the message that made it, and nothing else."""
    waiting: set[str] = set()
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in waiting, f"message {index} answers no open call"
            waiting.discard(message.tool_call_id)
            continue
        assert not waiting, f"message {index}: calls {sorted(waiting)} left unanswered"
        if isinstance(message, AIMessage):
            waiting = {str(c["id"]) for c in message.tool_calls}


def request_tokens(request: Sequence[BaseMessage]) -> int:
    return tokens(conv.to_message(m, index=i) for i, m in enumerate(request))


@pytest.mark.guarantee("integration-framework-state-kept")
@pytest.mark.guarantee("integration-no-duplicates-after-restart")
@pytest.mark.guarantee("integration-requests-valid-and-within-window")
def test_long_tool_calling_agent_stays_valid_within_the_window_and_logs_each_message_once(
    reopen: Callable[[], EventStore],
) -> None:
    """A 48-turn tool-calling agent over a 3,000-token window: every request is valid and
    fits, the checkpointer still holds every message, the log holds each one once, and a new
    process over a new connection picks the thread up without appending anything twice."""
    model = ScriptedChat(messages=script(), requests=[])
    checkpointer = InMemorySaver()
    middleware = CtxfoldMiddleware(store=reopen(), compactor=compactor())
    run_tasks(make_agent(model, checkpointer, [middleware]), 0, TASKS)
    restarted = CtxfoldMiddleware(store=reopen(), compactor=compactor())
    agent = make_agent(model, checkpointer, [restarted])
    run_tasks(agent, TASKS, MORE_TASKS)

    total = (TASKS + MORE_TASKS) * (CALLS_PER_TASK + 1)
    assert len(model.requests) == total >= 40
    for request in model.requests:
        assert_valid(request)
        assert request_tokens(request) <= WINDOW
    state = agent.get_state({"configurable": {"thread_id": "lc-long"}}).values["messages"]
    assert len(state) == (TASKS + MORE_TASKS) * (2 + 2 * CALLS_PER_TASK)
    assert max(len(r) for r in model.requests) < len(state)
    logged = logged_messages(restarted.session("lc-long"))
    assert [conv.kept(m)["data"]["id"] for m in logged[1:]] == [m.id for m in state]
    assert conv.from_message(logged[0]).content == "Fix the bug."
    assert any(e.type == "compaction" for e in restarted.session("lc-long").events())


async def test_async_agent_sends_the_projection_too() -> None:
    """`ainvoke` goes through `awrap_model_call` and gets the same compacted, valid requests."""
    model = ScriptedChat(messages=script(), requests=[])
    middleware = CtxfoldMiddleware(store=MemoryStore(), compactor=compactor())
    agent = make_agent(model, InMemorySaver(), [middleware])
    config = {"configurable": {"thread_id": "lc-async"}}
    for task in range(TASKS):
        await agent.ainvoke({"messages": [{"role": "user", "content": f"task {task}"}]}, config)
    for request in model.requests:
        assert_valid(request)
        assert request_tokens(request) <= WINDOW
    assert len(agent.get_state(config).values["messages"]) == TASKS * (2 + 2 * CALLS_PER_TASK)


class KeepNewest(AgentMiddleware):
    """A middleware ahead of ctxfold that sends only the newest messages: the list the
    middleware sees changes other than by growing, call after call."""

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return handler(request.override(messages=request.messages[-2:]))


def test_a_request_list_that_changes_other_than_by_growing_is_projected_once() -> None:
    """When a middleware ahead of ctxfold hands it a shifted list, the model still receives
    each logged message once, in order, and every call paired with its result."""
    model = ScriptedChat(messages=script(), requests=[])
    middleware = CtxfoldMiddleware(store=MemoryStore())
    agent = make_agent(model, InMemorySaver(), [KeepNewest(), middleware])
    run_tasks(agent, 0, 2, thread="lc-shifted")
    logged = [conv.kept(m)["data"]["id"] for m in logged_messages(middleware.session("lc-shifted"))]
    for request in model.requests:
        assert_valid(request)
        ids = [m.id for m in request if not isinstance(m, SystemMessage)]
        assert ids == logged[1 : len(ids) + 1]


def test_the_middleware_keeps_no_graph_state_alive_between_runs() -> None:
    """The middleware keeps no message object of the graph state once the model call is over
    (holding last call's list kept a whole deserialized history alive until the next call, which
    then paid for freeing it)."""
    import gc
    import weakref

    model = ScriptedChat(messages=script(), requests=[])
    middleware = CtxfoldMiddleware(store=MemoryStore())
    agent = make_agent(model, InMemorySaver(), [middleware])
    run_tasks(agent, 0, 2, thread="lc-held")
    seen: list[weakref.ref[BaseMessage]] = []

    class Watch(AgentMiddleware):
        def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
            seen.extend(weakref.ref(m) for m in request.messages)
            return handler(request)

    # The same thread and store through a second agent whose outer middleware sees each state.
    watched = make_agent(model, agent.checkpointer, [Watch(), middleware])
    run_tasks(watched, 2, 1, thread="lc-held")
    model.requests.clear()
    gc.collect()
    assert seen and all(ref() is None for ref in seen)


def every_message() -> list[AnyMessage]:
    """One of every message type a thread can hold, with the fields a dict round trip loses."""
    return [
        SystemMessage(content="rules", id="s1"),
        HumanMessage(content="text", id="h1", name="ann"),
        HumanMessage(content=[{"type": "text", "text": "look"}, {"type": "image", "url": "u"}]),
        AIMessage(
            content=[
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "text", "text": "calling"},
            ],
            id="a1",
            tool_calls=[
                {"name": "read", "args": {"path": "a.py"}, "id": "c1", "type": "tool_call"}
            ],
            usage_metadata={"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
            response_metadata={"model_name": "m"},
        ),
        ToolMessage(
            content="text", tool_call_id="c1", status="error", artifact={"k": [1]}, id="t1"
        ),
        AIMessageChunk(content="partial", id="a2"),
        ChatMessage(content="chat", role="assistant", id="c9"),
        ChatMessage(content="dev", role="developer"),
    ]


@pytest.mark.guarantee("integration-lossless-conversion")
def test_every_message_type_round_trips_with_ids_status_and_artifacts() -> None:
    """Ids, `ToolMessage.status`, `artifact`, `tool_call_id`, content blocks and metadata all
    come back equal, message for message."""
    for index, message in enumerate(every_message()):
        back = conv.from_message(conv.to_message(message, index=index))
        assert back == message
        assert type(back) is type(message)


def test_a_cleared_tool_result_keeps_its_id_status_and_call() -> None:
    """When a compaction clears a tool result, only the content changes."""
    stored = conv.to_message(every_message()[4], index=0)
    back = conv.from_message(stored.replace(content="[cleared]"))
    assert isinstance(back, ToolMessage)
    assert (back.content, back.id, back.status, back.tool_call_id) == (
        "[cleared]",
        "t1",
        "error",
        "c1",
    )


@pytest.mark.guarantee("integration-lossless-conversion")
@pytest.mark.parametrize(
    ("message", "named"),
    [
        (ToolMessage(content="x", tool_call_id="c", artifact=object(), id="t9"), "id 't9'"),
        (FunctionMessage(content="x", name="f", id="f1"), "type 'function'"),
        (ChatMessage(content="x", role="robot", id="r1"), "role 'robot'"),
    ],
)
def test_a_message_that_cannot_be_carried_is_refused_and_nothing_is_written(
    message: BaseMessage, named: str
) -> None:
    """The error names the message; none of the request's messages is logged."""
    model = ScriptedChat(messages=iter([AIMessage(content="ok")]), requests=[])
    middleware = CtxfoldMiddleware(store=MemoryStore(), compactor=compactor())
    agent = make_agent(model, InMemorySaver(), [middleware])
    config = {"configurable": {"thread_id": "lc-bad"}}
    with pytest.raises(InvalidInputError, match=named):
        agent.invoke({"messages": [HumanMessage(content="fine"), message]}, config)
    assert middleware.session("lc-bad").events() == []


def test_the_converter_names_what_it_cannot_carry() -> None:
    """A `RemoveMessage` (a state edit, never sent) or a non-message is refused by position."""
    with pytest.raises(InvalidInputError, match=r"message 3 .*type 'remove'"):
        conv.to_message(RemoveMessage(id="gone"), index=3)
    with pytest.raises(InvalidInputError, match="message 0 is a dict"):
        conv.to_message({"role": "user"}, index=0)


def test_running_without_a_thread_id_is_a_clear_error() -> None:
    model = ScriptedChat(messages=iter([AIMessage(content="ok")]), requests=[])
    agent = create_agent(model, [read], middleware=[CtxfoldMiddleware(store=MemoryStore())])
    with pytest.raises(InvalidInputError, match="thread id"):
        agent.invoke({"messages": [{"role": "user", "content": "hi"}]})


@pytest.mark.guarantee("integration-overflow-retry")
def test_an_overflow_is_recovered_and_retried_once() -> None:
    """After the overflow the middleware compacts and calls the model once more, with less;
    a second overflow in a row reaches the caller."""
    model = ScriptedChat(messages=script(), requests=[])
    middleware = CtxfoldMiddleware(store=MemoryStore(), compactor=overflow_compactor())
    agent = make_agent(model, InMemorySaver(), [middleware])
    run_tasks(agent, 0, 3, thread="lc-overflow")
    model.overflows = 1
    run_tasks(agent, 3, 1, thread="lc-overflow")
    failed, retried = model.requests[-5], model.requests[-4]
    assert request_tokens(retried) < request_tokens(failed)
    assert_valid(retried)
    model.overflows = 2
    with pytest.raises(Overflow):
        run_tasks(agent, 4, 1, thread="lc-overflow")


class Stopped(Exception):
    """Stands for a process that stops after the model answered, before LangGraph saved it."""


class DropAnswerOnce(AgentMiddleware):
    """A middleware outside ctxfold that lets the model answer, then fails the step, once: the
    answer never reaches the graph state."""

    armed = False

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        response = handler(request)
        if self.armed:
            self.armed = False
            raise Stopped("the process stopped here")
        return response


@pytest.mark.guarantee("integration-no-duplicates-after-restart")
def test_an_answer_the_graph_state_never_got_is_taken_back_and_nothing_is_twice(
    reopen: Callable[[], EventStore],
) -> None:
    """A final answer is logged as the model returns it; when the graph state never gets it,
    the next call (here by a new process) takes it back out of the projection with a
    retraction event, so the model is never shown an answer the thread does not hold, and the
    log's projection is the thread's messages, each once."""
    answers = iter([AIMessage(content=f"answer {n}") for n in range(5)])
    model = ScriptedChat(messages=answers, requests=[])
    checkpointer = InMemorySaver()
    drop = DropAnswerOnce()
    middleware = CtxfoldMiddleware(store=reopen(), compactor=compactor())
    run_tasks(make_agent(model, checkpointer, [drop, middleware]), 0, 1, thread="lc-lost")
    drop.armed = True
    with pytest.raises(Stopped):
        run_tasks(make_agent(model, checkpointer, [drop, middleware]), 1, 1, thread="lc-lost")
    logged = logged_messages(middleware.session("lc-lost"))
    assert logged[-1].content == "answer 1"  # logged, though the state never got it

    restarted = CtxfoldMiddleware(store=reopen(), compactor=compactor())
    agent = make_agent(model, checkpointer, [restarted])
    run_tasks(agent, 2, 1, thread="lc-lost")
    assert [m.content for m in model.requests[-1]] == [
        "Fix the bug.", "task 0", "answer 0", "task 1", "task 2",
    ]  # fmt: skip
    session = restarted.session("lc-lost")
    assert any(e.type == "retraction" for e in session.events())
    state = agent.get_state({"configurable": {"thread_id": "lc-lost"}}).values["messages"]
    projected = [conv.kept(m)["data"]["id"] for m in session.messages()[1:]]
    assert projected == [m.id for m in state]
    ids = [conv.kept(m)["data"]["id"] for m in logged_messages(session)[1:]]
    assert len(ids) == len(set(ids))


@pytest.mark.guarantee("integration-no-duplicates-after-restart")
def test_a_call_that_fails_before_the_answer_leaves_nothing_and_its_message_is_logged_once(
    reopen: Callable[[], EventStore],
) -> None:
    """A run's first call logs the user's message with the model's answer: when the model call
    fails in between, the log holds nothing of that call, and the next call (here by a new
    process) logs the message from the graph state once, in its place."""
    answers = iter([AIMessage(content=f"answer {n}") for n in range(5)])
    model = ScriptedChat(messages=answers, requests=[])
    checkpointer = InMemorySaver()
    middleware = CtxfoldMiddleware(store=reopen())
    run_tasks(make_agent(model, checkpointer, [middleware]), 0, 1, thread="lc-failed")
    before = len(middleware.session("lc-failed").events())
    model.overflows = 1  # without a compactor, the error reaches the caller
    with pytest.raises(Overflow):
        run_tasks(make_agent(model, checkpointer, [middleware]), 1, 1, thread="lc-failed")
    assert len(middleware.session("lc-failed").events()) == before

    restarted = CtxfoldMiddleware(store=reopen())
    agent = make_agent(model, checkpointer, [restarted])
    run_tasks(agent, 2, 1, thread="lc-failed")
    assert [m.content for m in model.requests[-1]] == [
        "Fix the bug.", "task 0", "answer 0", "task 1", "task 2",
    ]  # fmt: skip
    state = agent.get_state({"configurable": {"thread_id": "lc-failed"}}).values["messages"]
    logged = logged_messages(restarted.session("lc-failed"))
    assert [conv.kept(m)["data"]["id"] for m in logged[1:]] == [m.id for m in state]


class InjectContext(AgentMiddleware):
    """A middleware outside ctxfold that adds retrieved context to each request, not the state."""

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        context = HumanMessage(content="Retrieved context: the freeze starts Friday.")
        return handler(request.override(messages=[*request.messages, context]))


@pytest.mark.guarantee("integration-no-duplicates-after-restart")
def test_a_message_only_the_request_holds_is_sent_once_and_never_logged() -> None:
    """Context a middleware adds to each request reaches the model once per call, where it was
    put, and the log holds only the thread's own messages."""
    model = ScriptedChat(messages=script(), requests=[])
    middleware = CtxfoldMiddleware(store=MemoryStore())
    agent = make_agent(model, InMemorySaver(), [InjectContext(), middleware])
    run_tasks(agent, 0, 2, thread="lc-inject")
    for request in model.requests:
        assert_valid(request)
        injected = [m for m in request if "Retrieved context" in str(m.content)]
        assert len(injected) == 1 and request[-1] is injected[0]
    logged = logged_messages(middleware.session("lc-inject"))
    assert not any("Retrieved context" in (m.content or "") for m in logged)


def invalid_calls() -> Iterator[AIMessage]:
    """Per task: one valid and one invalid tool call, then an answer."""
    for n in range(10):
        yield AIMessage(
            content="calling",
            tool_calls=[{"name": "read", "args": {"path": f"f{n}"}, "id": f"c{n}"}],
            invalid_tool_calls=[
                {"name": "read", "args": "{broken", "id": f"bad{n}", "error": "bad json"}
            ],
        )
        yield AIMessage(content=f"done {n}")


@pytest.mark.guarantee("integration-no-duplicates-after-restart")
@pytest.mark.guarantee("integration-requests-valid-and-within-window")
def test_invalid_tool_calls_get_their_error_result_once_across_a_restart(
    reopen: Callable[[], EventStore],
) -> None:
    """The error result LangChain adds for an invalid tool call follows its call in every
    request, once, as LangChain alone would send it; a new process appends nothing twice."""
    model = ScriptedChat(messages=invalid_calls(), requests=[])
    checkpointer = InMemorySaver()
    middleware = CtxfoldMiddleware(store=reopen())
    run_tasks(make_agent(model, checkpointer, [middleware]), 0, 1, thread="lc-invalid")
    restarted = CtxfoldMiddleware(store=reopen())
    agent = make_agent(model, checkpointer, [restarted])
    run_tasks(agent, 1, 1, thread="lc-invalid")
    state = agent.get_state({"configurable": {"thread_id": "lc-invalid"}}).values["messages"]
    last = model.requests[-1][1:]
    assert [(type(m), m.content) for m in last] == [(type(m), m.content) for m in state[:-1]]
    for request in model.requests:
        results = [m.tool_call_id for m in request if isinstance(m, ToolMessage)]
        assert len(results) == len(set(results))
    ids = [conv.kept(m)["data"]["id"] for m in logged_messages(restarted.session("lc-invalid"))]
    assert len(ids) == len(set(ids))


class Wipe(AgentMiddleware):
    """Empties the graph state before the next model call but for the newest message, once."""

    armed = False

    def before_model(self, state: Any, runtime: Any) -> Any:
        from langgraph.graph.message import REMOVE_ALL_MESSAGES

        if not self.armed:
            return None
        self.armed = False
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *state["messages"][-1:]]}


class TrimOld(AgentMiddleware):
    """Removes all but the three newest messages from the graph state, by id."""

    def before_model(self, state: Any, runtime: Any) -> Any:
        old = state["messages"][:-3]
        return {"messages": [RemoveMessage(id=m.id) for m in old]} if old else None


def test_removing_every_message_from_the_state_resets_what_the_model_is_sent() -> None:
    """After ``RemoveMessage(id=REMOVE_ALL_MESSAGES)`` the model no longer sees what was
    removed; the log keeps it behind a reset event."""
    model = ScriptedChat(
        messages=iter([AIMessage(content=f"answer {n}") for n in range(3)]), requests=[]
    )
    wipe = Wipe()
    middleware = CtxfoldMiddleware(store=MemoryStore())
    agent = make_agent(model, InMemorySaver(), [wipe, middleware])
    agent.invoke(
        {"messages": [{"role": "user", "content": "my password is hunter2"}]},
        {"configurable": {"thread_id": "lc-wipe"}},
    )
    wipe.armed = True
    run_tasks(agent, 0, 2, thread="lc-wipe")
    assert [m.content for m in model.requests[1]] == ["Fix the bug.", "task 0"]
    assert [m.content for m in model.requests[2]] == [
        "Fix the bug.",
        "task 0",
        "answer 1",
        "task 1",
    ]
    assert any(e.type == "reset" for e in middleware.session("lc-wipe").events())


def test_messages_a_middleware_removes_by_id_are_no_longer_sent() -> None:
    """A middleware that trims the state with ``RemoveMessage(id=...)``: the model is sent what
    the state holds, with the system prompt."""
    model = ScriptedChat(
        messages=iter([AIMessage(content=f"answer {n}") for n in range(5)]), requests=[]
    )
    middleware = CtxfoldMiddleware(store=MemoryStore())
    agent = make_agent(model, InMemorySaver(), [TrimOld(), middleware])
    run_tasks(agent, 0, 4, thread="lc-trim")
    state = agent.get_state({"configurable": {"thread_id": "lc-trim"}}).values["messages"]
    assert [m.content for m in state] == ["task 2", "answer 2", "task 3", "answer 3"]
    assert [m.content for m in model.requests[-1]] == [
        "Fix the bug.",
        "task 2",
        "answer 2",
        "task 3",
    ]
    session = middleware.session("lc-trim")
    assert [m.content for m in session.messages()][1:] == [m.content for m in state]


def test_an_answer_with_a_lone_surrogate_is_stored_with_a_replacement_character() -> None:
    """A model answer holding half an emoji is logged with U+FFFD in its place (pairs kept)
    and the thread goes on."""
    answers = iter(
        [
            AIMessage(content="half \ud83d, whole \U0001f600", id="a1"),
            AIMessage(content="fine", id="a2"),
        ]
    )
    model = ScriptedChat(messages=answers, requests=[])
    middleware = CtxfoldMiddleware(store=MemoryStore())
    agent = make_agent(model, InMemorySaver(), [middleware])
    run_tasks(agent, 0, 2, thread="lc-surrogate")
    logged = [m.content for m in logged_messages(middleware.session("lc-surrogate"))]
    assert "half \ufffd, whole \U0001f600" in logged and "fine" in logged


@pytest.mark.parametrize("thread_id", [1, uuid.UUID(int=7)])
def test_thread_ids_langgraph_accepts_name_the_session_of_their_text(thread_id: Any) -> None:
    """An int or a UUID thread id names the ctxfold session of its ``str()``."""
    model = ScriptedChat(messages=iter([AIMessage(content="ok")]), requests=[])
    middleware = CtxfoldMiddleware(store=MemoryStore())
    agent = make_agent(model, InMemorySaver(), [middleware])
    agent.invoke(
        {"messages": [{"role": "user", "content": "hi"}]},
        {"configurable": {"thread_id": thread_id}},
    )
    assert [m.content for m in middleware.session(str(thread_id)).messages()][1:] == ["hi", "ok"]


def image_blocks(url: str) -> list[dict[str, Any]]:
    """The same image in the shapes a LangChain message may hold it: OpenAI's ``image_url``
    part, and LangChain's own standard image block (by URL, or by base64 data)."""
    blocks: list[dict[str, Any]] = [
        {"type": "image_url", "image_url": {"url": url}},
        {"type": "image", "url": url},
    ]
    if url == DATA_URL:
        blocks.append({"type": "image", "base64": B64, "mime_type": "image/png"})
    return blocks


@pytest.mark.parametrize("url", URLS, ids=URL_IDS)
def test_an_image_costs_what_openai_bills_for_it_not_its_text(url: str) -> None:
    """A human message with an image, in any block shape, costs what the same message costs
    through `from_openai` (a 1024 x 1024 image: 765 tokens), far more than its question; and
    it comes back from the log as it went in."""
    for block in image_blocks(url):
        human = HumanMessage(content=[{"type": "text", "text": QUESTION}, block], id="h1")
        converted = conv.to_message(human, index=0)
        assert_counted_like([converted], openai_user(url))
        assert conv.from_message(converted) == human


def test_a_pdf_costs_its_pages() -> None:
    """A PDF in a standard file block costs its pages, as through `from_openai`."""
    pdf = {"type": "file", "base64": PDF_URL.partition(",")[2], "mime_type": "application/pdf"}
    human = HumanMessage(content=[{"type": "text", "text": QUESTION}, pdf])
    assert_counted_like([conv.to_message(human, index=0)], openai_pdf())


def test_an_image_a_tool_returns_costs_an_image_not_its_base64() -> None:
    """A `ToolMessage` whose content is an image costs what the same tool message costs
    through `from_openai`; it comes back from the log as it went in, and cleared by a
    compaction it costs its placeholder alone and sends no image."""
    result = ToolMessage(
        content=[{"type": "image", "base64": B64, "mime_type": "image/png"}],
        tool_call_id=CALL_ID,
        id="t1",
    )
    converted = conv.to_message(result, index=0)
    assert_counted_like([converted], openai_tool(DATA_URL))
    assert conv.from_message(converted) == result
    cleared = converted.replace(content="[cleared]")
    assert count([cleared]) == count([cleared.replace(extra={})])
    back = conv.from_message(cleared)
    assert (back.content, back.id) == ("[cleared]", "t1")


def test_an_inline_image_is_logged_once() -> None:
    """An inline image, in a question or a tool's result, in any block shape, is logged once, in
    the stored message: what ctxfold records to price it is its size, not its data."""
    for block in image_blocks(DATA_URL):
        human = HumanMessage(content=[{"type": "text", "text": QUESTION}, block])
        assert_logged_once([conv.to_message(human, index=0)])
    result = ToolMessage(
        content=[{"type": "image", "base64": B64, "mime_type": "image/png"}], tool_call_id=CALL_ID
    )
    assert_logged_once([conv.to_message(result, index=0)])


def test_images_reach_the_model_unchanged_through_the_middleware() -> None:
    """A question with an image and a tool that returns one: the model is sent both as
    LangChain made them, and the log prices them as images."""

    @tool(response_format="content")
    def shot() -> list[dict[str, Any]]:
        """Take a screenshot."""
        return [{"type": "image", "base64": B64, "mime_type": "image/png"}]

    call = {"name": "shot", "args": {}, "id": CALL_ID}
    answers = iter([AIMessage(content="", tool_calls=[call]), AIMessage(content="grey")])
    model = ScriptedChat(messages=answers, requests=[])
    middleware = CtxfoldMiddleware(store=MemoryStore(), compactor=compactor())
    agent = create_agent(model, [shot], middleware=[middleware], checkpointer=InMemorySaver())
    question = [{"type": "text", "text": QUESTION}, *image_blocks(DATA_URL)[:1]]
    config = {"configurable": {"thread_id": "lc-images"}}
    agent.invoke({"messages": [HumanMessage(content=question)]}, config)

    first, second = model.requests
    assert first[-1].content == question
    assert second[-1].content == shot.invoke({})
    user, _, result, _ = middleware.session("lc-images").messages()
    assert_counted_like([user], openai_user(DATA_URL))
    assert_counted_like([result], openai_tool(DATA_URL))
