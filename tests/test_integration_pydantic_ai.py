"""CtxfoldCapability inside a real pydantic-ai agent (its `FunctionModel`, no network)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

import pytest

from tests._frameworks import minimum

pytest.importorskip("pydantic_ai", minversion=minimum("pydantic_ai"))

from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    BinaryContent,
    CapabilityLoadDeltaPart,
    CompactionPart,
    FilePart,
    ImageUrl,
    InstructionBaselinePart,
    InstructionDeltaPart,
    InstructionPart,
    LoadCapabilityCallPart,
    LoadCapabilityReturnPart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    ModelSettingsDeltaPart,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryFeedbackPart,
    RetryInfo,
    RetryPromptPart,
    SpeechPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolAvailabilityDeltaPart,
    ToolCallPart,
    ToolReturnPart,
    ToolSearchCallPart,
    ToolSearchReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from ctxfold import (
    Budget,
    ClearToolResults,
    InvalidInputError,
    MemoryStore,
    Message,
    compact_messages,
)
from ctxfold.integrations import _pydantic_ai_messages as conv
from ctxfold.integrations.pydantic_ai import CtxfoldCapability
from ctxfold.messages.media import attachments
from ctxfold.pipeline.clear import CLEARED_MARK
from ctxfold.storage.base import EventStore
from ctxfold.tokens.attachments import openai_image_tokens
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
    PDF,
    PNG,
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

WHEN = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


class Overflow(Exception):
    """What a provider says when the prompt is too long (as `is_context_overflow` reads it)."""


class Script:
    """Per task: three calls to `read`, then an answer. Records every request it was sent."""

    def __init__(self) -> None:
        self.calls = 0
        self.overflows = 0
        self.requests: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(list(messages))
        if self.overflows:
            self.overflows -= 1
            raise Overflow("This model's maximum context length is 3000 tokens")
        self.calls += 1
        if self.calls % (CALLS_PER_TASK + 1):
            args = {"path": f"src/mod_{self.calls}.py"}
            return ModelResponse(parts=[ToolCallPart("read", args, tool_call_id=f"c{self.calls}")])
        return ModelResponse(parts=[TextPart(f"done {self.calls}")])


def make_agent(script: Script, capability: CtxfoldCapability) -> Agent[None, str]:
    agent = Agent(FunctionModel(script), instructions="Fix the bug.", capabilities=[capability])

    @agent.tool_plain
    def read(path: str) -> str:
        """Read a file."""
        return tool_output(path)

    return agent


async def run_tasks(
    agent: Agent[None, str], first: int, count: int, history: list[ModelMessage]
) -> list[ModelMessage]:
    for task in range(first, first + count):
        result = await agent.run(f"task {task}", message_history=history, conversation_id="pa")
        history = result.all_messages()
    return history


def assert_valid(messages: Sequence[ModelMessage]) -> None:
    """Each tool return answers a call of the response right before it, and each call of a
    response is answered in the request right after it."""
    waiting: set[str] = set()
    for index, message in enumerate(messages):
        if isinstance(message, ModelResponse):
            assert not waiting, f"message {index}: calls {sorted(waiting)} left unanswered"
            waiting = {p.tool_call_id for p in message.parts if isinstance(p, ToolCallPart)}
            continue
        returns = {p.tool_call_id for p in message.parts if isinstance(p, ToolReturnPart)}
        assert returns == waiting, f"message {index} answers {returns}, not {waiting}"
        waiting = set()


def request_tokens(messages: Sequence[ModelMessage]) -> int:
    converted = [
        m for i, message in enumerate(messages) for m in conv.to_messages(message, index=i)
    ]
    return tokens(converted, "Fix the bug.")


@pytest.mark.guarantee("integration-framework-state-kept")
@pytest.mark.guarantee("integration-no-duplicates-after-restart")
@pytest.mark.guarantee("integration-requests-valid-and-within-window")
async def test_long_tool_calling_agent_stays_valid_within_the_window_and_logs_each_part_once(
    reopen: Callable[[], EventStore],
) -> None:
    """A 48-turn tool-calling agent over a 3,000-token window: every request is valid and
    fits, `all_messages()` still returns everything, the log holds each message once, and a new
    process over a new connection continues the conversation without duplicates."""
    script = Script()
    capability = CtxfoldCapability(store=reopen(), compactor=compactor())
    history = await run_tasks(make_agent(script, capability), 0, TASKS, [])
    restarted = CtxfoldCapability(store=reopen(), compactor=compactor())
    history = await run_tasks(make_agent(script, restarted), TASKS, MORE_TASKS, history)

    assert script.calls == (TASKS + MORE_TASKS) * (CALLS_PER_TASK + 1) >= 40
    for request in script.requests:
        assert_valid(request)
        assert request_tokens(request) <= WINDOW
    assert len(history) == (TASKS + MORE_TASKS) * (2 + 2 * CALLS_PER_TASK)
    assert max(len(r) for r in script.requests) < len(history)
    logged = logged_messages(restarted.session("pa"))
    expected = [m for i, message in enumerate(history) for m in conv.to_messages(message, index=i)]
    assert [m.replace(extra={}) for m in logged] == [m.replace(extra={}) for m in expected]
    assert any(e.type == "compaction" for e in restarted.session("pa").events())


def every_request_part() -> ModelRequest:
    retry = RetryInfo("model_retry")
    return ModelRequest(
        parts=[
            SystemPromptPart("rules", timestamp=WHEN),
            InstructionBaselinePart(instructions=[InstructionPart("base")]),
            UserPromptPart(["look at", "this"], timestamp=WHEN),
            ToolAvailabilityDeltaPart(tools_added=["grep"]),
            ToolReturnPart("read", "file text", tool_call_id="c1", timestamp=WHEN),
            ToolReturnPart("read", {"rows": [1, 2]}, tool_call_id="c2", timestamp=WHEN),
            ToolSearchReturnPart(
                content={"discovered_tools": [{"name": "grep"}]}, tool_call_id="c3", timestamp=WHEN
            ),
            LoadCapabilityReturnPart(
                content={"message": "loaded"}, tool_call_id="c4", timestamp=WHEN
            ),
            RetryFeedbackPart("try again", retry=retry, timestamp=WHEN),
            CapabilityLoadDeltaPart(loaded=["x"]),
            ModelSettingsDeltaPart(settings={"temperature": 0.1}),
            InstructionDeltaPart(id="d1", content="more"),
            CompactionPart("earlier work"),
            SpeechPart(speaker="user", transcript="spoken"),
        ],
        timestamp=WHEN,
        instructions="be brief",
        run_id="run-1",
        conversation_id="conv",
        metadata={"k": "v"},
    )


def every_response_part() -> ModelResponse:
    return ModelResponse(
        parts=[
            ThinkingPart("thinking it over", signature="sig"),
            TextPart("calling"),
            ToolCallPart("read", {"path": "a.py"}, tool_call_id="c1"),
            ToolCallPart("read", '{"path": "b.py"}', tool_call_id="c2"),
            ToolSearchCallPart(args={"queries": ["grep"]}, tool_call_id="c3"),
            LoadCapabilityCallPart(args={"id": "x"}, tool_call_id="c4"),
            NativeToolCallPart("web_search", {"q": "x"}, tool_call_id="n1"),
            NativeToolReturnPart("web_search", {"hits": 1}, tool_call_id="n1", timestamp=WHEN),
        ],
        model_name="m",
        timestamp=WHEN,
        provider_response_id="resp-1",
    )


def round_trip(history: Sequence[ModelMessage]) -> list[ModelMessage]:
    pieces = [
        (conv.group_key(m), conv.to_model_message(m))
        for i, message in enumerate(history)
        for m in conv.to_messages(message, index=i)
    ]
    return conv.regroup(pieces)


@pytest.mark.guarantee("integration-lossless-conversion")
def test_every_part_type_round_trips_and_requests_regroup() -> None:
    """Every request and response part pydantic-ai defines comes back as pydantic-ai's own
    message serializer gives it back; a request split into several messages is regrouped into
    the one request it was."""
    history: list[ModelMessage] = [every_response_part(), every_request_part()]
    stored_by_pydantic_ai = ModelMessagesTypeAdapter.validate_json(
        ModelMessagesTypeAdapter.dump_json(history)
    )
    assert round_trip(history) == stored_by_pydantic_ai
    # That serializer itself keeps neither a settings delta's settings nor an instruction
    # delta's id; every other part comes back equal to what went in.
    lossy = (ModelSettingsDeltaPart, InstructionDeltaPart)
    request = round_trip(history)[1]
    assert isinstance(request, ModelRequest)
    kept = [p for p in request.parts if not isinstance(p, lossy)]
    assert kept == [p for p in every_request_part().parts if not isinstance(p, lossy)]
    assert round_trip(history)[0] == history[0]


def test_request_parts_become_messages_in_their_roles() -> None:
    """System, user, tool returns (answering their calls) and retry feedback each become a
    message; settings parts ride with the next speaking part; thinking rides in extra."""
    split = conv.to_messages(every_request_part(), index=0)
    assert [m.role for m in split] == ["system", "user", "tool", "tool", "tool", "tool", "user"]
    assert [m.tool_call_id for m in split if m.role == "tool"] == ["c1", "c2", "c3", "c4"]
    (response,) = conv.to_messages(every_response_part(), index=1)
    assert response.content == "calling"
    assert [c.id for c in response.tool_calls] == ["c1", "c2", "c3", "c4"]
    assert "thinking it over" not in response.text


def test_a_legacy_retry_prompt_is_a_tool_message_when_it_answers_a_call() -> None:
    with pytest.warns(Warning, match="RetryPromptPart. is deprecated"):
        for_call = RetryPromptPart("bad args", tool_name="read", tool_call_id="c1")
        free = RetryPromptPart("no output")
    split = conv.to_messages(ModelRequest(parts=[for_call, free]), index=0)
    assert [(m.role, m.tool_call_id) for m in split] == [("tool", "c1"), ("user", None)]


def test_a_cleared_tool_return_keeps_its_part_with_the_new_content() -> None:
    tool = conv.to_messages(every_request_part(), index=0)[2]
    back = conv.to_model_message(tool.replace(content="[cleared]"))
    assert isinstance(back, ModelRequest)
    returned = [p for p in back.parts if isinstance(p, ToolReturnPart)]
    assert [(p.tool_call_id, p.content) for p in returned] == [("c1", "[cleared]")]


@pytest.mark.parametrize(
    "parts",
    [
        [UserPromptPart("fix the failing test in src/app.py")],
        [SystemPromptPart("be brief"), UserPromptPart("hi"), UserPromptPart("")],
    ],
)
def test_a_plain_prompt_is_counted_as_its_logged_form_will_be(parts: list[Any]) -> None:
    """The budget check before a run's first request counts a plain prompt without serializing
    it; what it counts (roles, texts, calls) is what the logged messages hold."""
    request = ModelRequest(parts=parts)
    counted = conv.counted_form(request)
    logged = conv.to_messages(request, index=0)
    assert counted is not None
    shape = [(m.role, m.content, m.name, m.tool_call_id, m.tool_calls) for m in logged]
    assert [(m.role, m.content, m.name, m.tool_call_id, m.tool_calls) for m in counted] == shape


def test_anything_but_a_plain_prompt_is_converted_in_full_for_the_count() -> None:
    not_plain: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart(["look", "again"])]),
        ModelRequest(parts=[ToolReturnPart("read", "text", tool_call_id="c1")]),
        ModelRequest(
            parts=[
                UserPromptPart("hi"),
                InstructionBaselinePart(instructions=[InstructionPart("base")]),
            ]
        ),
        ModelRequest(parts=[]),
        ModelResponse(parts=[TextPart("ok")]),
    ]
    assert [conv.counted_form(m) for m in not_plain] == [None] * len(not_plain)


def test_messages_converted_together_are_named_alone_when_one_cannot_be_stored() -> None:
    history: list[Any] = [
        ModelRequest(parts=[UserPromptPart("fine")]),
        ModelResponse(parts=[ToolCallPart("read", {}, tool_call_id="x1")]),
        ModelRequest(parts=[ToolReturnPart("read", Unstorable(), tool_call_id="x1")]),
    ]
    together = conv.to_messages_at(history, [0, 1])
    assert together == [conv.to_messages(history[p], index=p) for p in (0, 1)]
    with pytest.raises(InvalidInputError, match=r"message 2 \(request\) cannot be stored"):
        conv.to_messages_at(history, [0, 1, 2])


class Unstorable:
    """A value no JSON encoder knows."""


@pytest.mark.guarantee("integration-lossless-conversion")
async def test_bad_input_is_refused_by_position_and_nothing_is_written() -> None:
    """A history entry that is not a pydantic-ai message is named, and none of the history is
    logged."""
    script = Script()
    capability = CtxfoldCapability(store=MemoryStore(), compactor=compactor())
    agent = make_agent(script, capability)
    bad: list[Any] = [
        ModelRequest(parts=[UserPromptPart("fine")]),
        ModelResponse(parts=[ToolCallPart("read", {"path": "a.py"}, tool_call_id="x1")]),
        ModelRequest(parts=[ToolReturnPart("read", Unstorable(), tool_call_id="x1")]),
    ]
    with pytest.raises(InvalidInputError, match=r"message 2 \(request\) cannot be stored as JSON"):
        await agent.run("go", message_history=bad, conversation_id="pa-bad")
    assert capability.session("pa-bad").events() == []
    with pytest.raises(InvalidInputError, match="message 4 is a dict"):
        conv.to_messages({"role": "user"}, index=4)


@pytest.mark.parametrize("conversation_id", [12, b"bytes"])
async def test_a_conversation_id_that_is_not_a_string_is_refused(conversation_id: Any) -> None:
    capability = CtxfoldCapability(store=MemoryStore())
    with pytest.raises(InvalidInputError, match="conversation id"):
        capability.session(conversation_id)


@pytest.mark.guarantee("integration-overflow-retry")
async def test_an_overflow_is_recovered_and_retried_once() -> None:
    """After the overflow the capability compacts and makes one more attempt, with less; a
    second overflow in a row reaches the caller."""
    script = Script()
    capability = CtxfoldCapability(store=MemoryStore(), compactor=overflow_compactor())
    agent = make_agent(script, capability)
    history = await run_tasks(agent, 0, 5, [])
    script.overflows = 1
    history = await run_tasks(agent, 5, 1, history)
    failed, retried = script.requests[-5], script.requests[-4]
    assert request_tokens(retried) < request_tokens(failed)
    assert_valid(retried)
    script.overflows = 2
    with pytest.raises(Overflow):
        await run_tasks(agent, 6, 1, history)


@pytest.mark.guarantee("integration-no-duplicates-after-restart")
async def test_a_history_that_does_not_continue_the_log_is_refused() -> None:
    """Messages are matched to the log by position, so a run given an older or different
    history for the same conversation id is refused with an error, and nothing is written."""
    script = Script()
    capability = CtxfoldCapability(store=MemoryStore(), compactor=compactor())
    agent = make_agent(script, capability)
    history = await run_tasks(agent, 0, 1, [])
    before = len(capability.session("pa").events())
    with pytest.raises(InvalidInputError, match="does not continue what ctxfold logged"):
        await run_tasks(agent, 1, 1, [])
    assert len(capability.session("pa").events()) == before
    await run_tasks(agent, 1, 1, history)


class Stopped(Exception):
    """Stands for a process that stops between the model's answer and the end of the run."""


class StopAfterAnswer(AbstractCapability[Any]):
    """A capability that ends the run with an error right after the model answered, once."""

    armed = False

    async def after_model_request(
        self, ctx: Any, *, request_context: Any, response: ModelResponse
    ) -> ModelResponse:
        if self.armed:
            self.armed = False
            raise Stopped("the process stopped here")
        return response


@pytest.mark.guarantee("integration-no-duplicates-after-restart")
async def test_a_run_stopped_after_the_model_answered_leaves_the_log_valid_and_nothing_twice(
    reopen: Callable[[], EventStore],
) -> None:
    """A run's first request goes ahead with its prompt logged only with the run's end: a run
    that stops between the model's answer and its end leaves nothing of itself in the log, so
    a new process given the history as the application kept it (without that run) continues
    with nothing twice and every request valid."""

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(f"answer {len(messages)}")])

    stop = StopAfterAnswer()
    capability = CtxfoldCapability(store=reopen(), compactor=compactor())
    agent = Agent(FunctionModel(answer), capabilities=[capability, stop])
    history: list[ModelMessage] = []
    for prompt in ("one", "two"):
        result = await agent.run(prompt, message_history=history, conversation_id="pa-stop")
        history = result.all_messages()
    logged = len(logged_messages(capability.session("pa-stop")))
    assert logged == len(history) == 4
    stop.armed = True
    with pytest.raises(Stopped):
        await agent.run("lost", message_history=history, conversation_id="pa-stop")
    assert len(logged_messages(capability.session("pa-stop"))) == logged

    restarted = CtxfoldCapability(store=reopen(), compactor=compactor())
    agent = Agent(FunctionModel(answer), capabilities=[restarted])
    for prompt in ("three", "four"):
        result = await agent.run(prompt, message_history=history, conversation_id="pa-stop")
        history = result.all_messages()
    texts = [m.content for m in logged_messages(restarted.session("pa-stop"))]
    assert texts == ["one", "answer 1", "two", "answer 3", "three", "answer 5", "four", "answer 7"]


class Spied(CtxfoldCapability):
    """Records whether each model request was handed back the request context it was given."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.as_given: list[bool] = []

    async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
        out = await super().before_model_request(ctx, request_context)
        self.as_given.append(out is request_context)
        return out


def echo(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Answers with what the last request said, and how many messages the model was sent."""
    said = [p.content for p in messages[-1].parts if isinstance(p, UserPromptPart)]
    return ModelResponse(parts=[TextPart(f"{said[-1] if said else ''} after {len(messages)}")])


async def test_a_continuing_run_with_nothing_to_compact_sends_the_history_as_held() -> None:
    """Until something changes the projection, a run that continues the log has its request
    context handed back untouched: the model sees exactly the history pydantic-ai holds."""
    capability = Spied(store=MemoryStore(), compactor=compactor())
    agent = Agent(FunctionModel(echo), capabilities=[capability])
    history: list[ModelMessage] = []
    for prompt in ("one", "two", "three"):
        result = await agent.run(prompt, message_history=history, conversation_id="pa-as")
        history = result.all_messages()
    # The first run looks at the store; the next ones go ahead with the history as given.
    assert capability.as_given == [False, True, True]
    assert [m.content for m in logged_messages(capability.session("pa-as"))] == [
        "one", "one after 1", "two", "two after 3", "three", "three after 5"
    ]  # fmt: skip


async def test_a_change_to_the_projection_between_runs_reaches_the_next_request() -> None:
    """A retraction or a note the application makes between runs changes what the model is
    sent next, though the history passed is the same as before."""
    capability = Spied(store=MemoryStore(), compactor=compactor())
    agent = Agent(FunctionModel(echo), capabilities=[capability])
    history: list[ModelMessage] = []
    for prompt in ("one", "two"):
        result = await agent.run(prompt, message_history=history, conversation_id="pa-edit")
        history = result.all_messages()
    session = capability.session("pa-edit")
    session.retract()  # the answer to "two" leaves the projection
    result = await agent.run("three", message_history=history, conversation_id="pa-edit")
    # "one", its answer, and "two" with "three" (pydantic-ai joins consecutive requests)
    assert result.output == "three after 3"
    history = result.all_messages()
    session.append(Message("user", "a note from the application"))
    result = await agent.run("four", message_history=history, conversation_id="pa-edit")
    # ... the answer to "three", and the note with "four"
    assert result.output == "four after 5"
    assert capability.as_given == [False, True, False, False]


@pytest.mark.guarantee("integration-no-duplicates-after-restart")
@pytest.mark.parametrize("stop", ["error", "cancel"])
async def test_a_run_stopped_after_a_tool_round_can_be_retried_from_the_kept_history(
    stop: str, reopen: Callable[[], EventStore]
) -> None:
    """A run that raises or is cancelled in its second tool round has logged its first rounds;
    a retry from the history the application kept takes them back out of the projection (the
    log keeps them) and goes on: the model sees nothing of the stopped run, and a new process
    continues with nothing twice."""
    import asyncio

    script = Script()
    capability = CtxfoldCapability(store=reopen())
    agent = Agent(FunctionModel(script), instructions="Fix the bug.", capabilities=[capability])
    reads = {"left": -1}
    started = asyncio.Event()

    @agent.tool_plain
    async def read(path: str) -> str:
        """Read a file."""
        reads["left"] -= 1
        if reads["left"] == 0:
            if stop == "cancel":
                started.set()
                await asyncio.sleep(60)
            raise RuntimeError("disk on fire")
        return tool_output(path)

    kept = await run_tasks(agent, 0, 1, [])
    reads["left"] = 2
    task = asyncio.create_task(agent.run("lost task", message_history=kept, conversation_id="pa"))
    if stop == "cancel":
        await started.wait()
        task.cancel()
    with pytest.raises((RuntimeError, asyncio.CancelledError)):
        await task
    assert len(logged_messages(capability.session("pa"))) > len(kept)

    script.requests.clear()
    history = await run_tasks(agent, 1, 1, kept)
    seen = [str(p) for request in script.requests for m in request for p in m.parts]
    assert not any("lost task" in text for text in seen)
    for request in script.requests:
        assert_valid(request)

    restarted = CtxfoldCapability(store=reopen())
    history = await run_tasks(make_agent(script, restarted), 2, 1, history)
    projected = [item.message for item in restarted.session("pa").items()]
    assert [m.extra for m in projected] == [
        m.extra
        for i, message in enumerate(history)
        for m in conv.to_messages(message, index=i, sourced=True)
    ]  # the projection is the history, each message once


@pytest.mark.parametrize("arguments", ["null", "[1,2]", "5", '"s"'])
async def test_recall_called_with_arguments_that_are_not_an_object_answers_with_an_error_text(
    arguments: str,
) -> None:
    """A recall call whose arguments are not a JSON object is answered with recall's short error
    text, and the run goes on."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("recall", arguments, tool_call_id="r1")])
        return ModelResponse(parts=[TextPart("ok")])

    capability = CtxfoldCapability(store=MemoryStore(), recall=True)
    result = await Agent(FunctionModel(model), capabilities=[capability]).run(
        "q", conversation_id="pa-recall"
    )
    assert result.output == "ok"
    (answer,) = [
        p.content for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)
    ]
    assert answer.startswith("recall error: the arguments must be a JSON object")


async def test_a_lone_surrogate_in_an_answer_is_logged_as_the_replacement_character() -> None:
    """A model answer holding half a surrogate pair is logged with U+FFFD in its place, and a
    whole pair as it is; the run ends normally."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("half \ud83d, whole \U0001f600")])

    capability = CtxfoldCapability(store=MemoryStore())
    result = await Agent(FunctionModel(model), capabilities=[capability]).run(
        "hi", conversation_id="pa-surrogate"
    )
    assert result.output == "half \ud83d, whole \U0001f600"
    logged = logged_messages(capability.session("pa-surrogate"))
    assert logged[-1].content == "half \ufffd, whole \U0001f600"


def image_contents(url: str) -> list[Any]:
    """The same image as a pydantic-ai prompt or tool may carry it: by URL, and (for a data
    URL) as `BinaryContent`."""
    contents: list[Any] = [ImageUrl(url=url)]
    if url == DATA_URL:
        contents.append(BinaryContent(data=PNG, media_type="image/png"))
    return contents


def by_serializer(history: Sequence[ModelMessage]) -> list[ModelMessage]:
    """`history` as pydantic-ai's own message serializer gives it back."""
    return ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(history))


def said(history: Sequence[ModelMessage]) -> list[tuple[str, Any]]:
    """What each part of `history` says, as pydantic-ai serializes it (no timestamps or ids)."""
    dumped = ModelMessagesTypeAdapter.dump_python(history, mode="json")
    return [(p["part_kind"], p.get("content")) for m in dumped for p in m["parts"]]


@pytest.mark.parametrize("url", URLS, ids=URL_IDS)
def test_an_image_costs_what_openai_bills_for_it_not_its_text(url: str) -> None:
    """A prompt with an image (`ImageUrl`, `BinaryContent`) costs what the same message costs
    through `from_openai` (a 1024 x 1024 image: 765 tokens), far more than its question; and it
    comes back from the log as it went in."""
    for image in image_contents(url):
        request = ModelRequest(parts=[UserPromptPart([QUESTION, image], timestamp=WHEN)])
        assert_counted_like(conv.to_messages(request, index=0), openai_user(url))
        assert round_trip([request]) == by_serializer([request])


def test_a_pdf_costs_its_pages() -> None:
    """A PDF as `BinaryContent` costs its pages, as through `from_openai`."""
    pdf = BinaryContent(data=PDF, media_type="application/pdf")
    request = ModelRequest(parts=[UserPromptPart([QUESTION, pdf], timestamp=WHEN)])
    assert_counted_like(conv.to_messages(request, index=0), openai_pdf())


@pytest.mark.parametrize("url", URLS, ids=URL_IDS)
def test_an_image_a_tool_returns_costs_an_image_not_its_base64(url: str) -> None:
    """A tool return carrying an image (alone or in a list) costs what the same tool message
    costs through `from_openai`, not its base64 as text (the defect: 101,300 tokens for one
    image); it comes back from the log as it went in, and cleared by a compaction it costs its
    placeholder alone and sends no image."""
    for image in image_contents(url):
        for content in (image, [image]):
            returned = ToolReturnPart("shot", content, tool_call_id=CALL_ID, timestamp=WHEN)
            request = ModelRequest(parts=[returned])
            (message,) = conv.to_messages(request, index=0)
            assert message.text == ""
            assert_counted_like([message], openai_tool(url))
            assert round_trip([request]) == by_serializer([request])
            cleared = message.replace(content="[cleared]")
            assert count([cleared]) == count([cleared.replace(extra={})])
            back = conv.to_model_message(cleared)
            assert isinstance(back, ModelRequest)
            assert [p.content for p in back.parts] == ["[cleared]"]


def test_an_image_a_model_made_is_counted_as_an_image() -> None:
    """A response's `FilePart` (an image the model made) costs an image, beside its text."""
    image = FilePart(BinaryContent(data=PNG, media_type="image/png"))
    response = ModelResponse(parts=[TextPart("here it is"), image], timestamp=WHEN)
    (message,) = conv.to_messages(response, index=0)
    assert count([message]) - count([message.replace(extra={})]) == openai_image_tokens(1024, 1024)
    assert round_trip([response]) == by_serializer([response])


def test_an_inline_image_is_logged_once() -> None:
    """An inline image, in a prompt, a tool return or a response's `FilePart`, is logged once,
    in the kept parts: what ctxfold records to price it is its size, not its data."""
    image = BinaryContent(data=PNG, media_type="image/png")
    for message in (
        ModelRequest(parts=[UserPromptPart([QUESTION, image], timestamp=WHEN)]),
        ModelRequest(parts=[ToolReturnPart("shot", image, tool_call_id=CALL_ID, timestamp=WHEN)]),
        ModelResponse(parts=[TextPart("here it is"), FilePart(image)], timestamp=WHEN),
    ):
        assert_logged_once(conv.to_messages(message, index=0))


async def test_images_reach_the_model_unchanged_and_are_cleared_with_their_results() -> None:
    """A question with an image and a tool that returns one, four times: the model is sent
    what pydantic-ai sends without ctxfold, and clearing the older results clears their images
    too: a cleared result costs its placeholder alone and sends no image."""

    def agent(capabilities: list[Any], sent: list[list[ModelMessage]]) -> Agent[None, str]:
        def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            sent.append(list(messages))
            if len(sent) <= 4:
                call = ToolCallPart("shot", {}, tool_call_id=f"{CALL_ID}_{len(sent)}")
                return ModelResponse(parts=[call])
            return ModelResponse(parts=[TextPart("grey squares")])

        made = Agent(FunctionModel(model), capabilities=capabilities)

        @made.tool_plain
        def shot() -> BinaryContent:
            """Take a screenshot."""
            return BinaryContent(data=PNG, media_type="image/png")

        return made

    prompt = [QUESTION, BinaryContent(data=PNG, media_type="image/png")]
    plain: list[list[ModelMessage]] = []
    await agent([], plain).run(prompt)
    with_ctxfold: list[list[ModelMessage]] = []
    capability = CtxfoldCapability(store=MemoryStore())
    await agent([capability], with_ctxfold).run(prompt, conversation_id="pa-images")
    assert said(with_ctxfold[-1]) == said(plain[-1])

    messages = capability.session("pa-images").messages()
    image = openai_image_tokens(1024, 1024)
    assert 5 * image < count(messages) < 5 * image + 500  # one prompt, four returns

    clear = ClearToolResults(keep_steps=1, keep_tail=False)
    budget = Budget(window=3_000, max_output=500)
    compacted = compact_messages(messages, budget, pipeline=[clear], counter="auto").messages
    cleared = [m for m in compacted if m.text.startswith(CLEARED_MARK)]
    assert len(cleared) >= 3
    for message in cleared:
        assert not attachments(message)
        assert count([message]) == count([message.replace(extra={})])
        back = conv.to_model_message(message)
        assert isinstance(back, ModelRequest)
        assert all(isinstance(p.content, str) for p in back.parts if isinstance(p, ToolReturnPart))
    assert count(compacted) < count(messages) - 3 * (image - 100)


async def test_a_log_with_images_an_earlier_ctxfold_wrote_is_continued() -> None:
    """An earlier ctxfold logged an image tool return with its JSON as the text, and no media
    record for it or for the image the model answered with: the history it logged still
    continues, and is sent as it came."""
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("take a screenshot", timestamp=WHEN)]),
        ModelResponse(parts=[ToolCallPart("shot", {}, tool_call_id=CALL_ID)], timestamp=WHEN),
        ModelRequest(
            parts=[
                ToolReturnPart(
                    "shot",
                    BinaryContent(data=PNG, media_type="image/png"),
                    tool_call_id=CALL_ID,
                    timestamp=WHEN,
                )
            ]
        ),
        ModelResponse(
            parts=[
                TextPart("a grey square"),
                FilePart(BinaryContent(data=PNG, media_type="image/png")),
            ],
            timestamp=WHEN,
        ),
    ]
    logged = [m for group in conv.to_messages_at(history, range(4), sourced=True) for m in group]
    earlier = []
    for message in logged:
        kept = message.extra[conv.NAMESPACE]
        if message.role == "tool":
            (part,) = kept["parts"]
            text = json.dumps(part["content"], sort_keys=True, separators=(",", ":"))
            message = message.replace(content=text)
        without_record = {k: v for k, v in message.extra.items() if k != "media"}
        earlier.append(message.replace(extra=without_record))
    assert len(earlier[2].text) > len(B64)
    store = MemoryStore()
    store.session("pa-earlier").append(earlier)
    sent: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.append(list(messages))
        return ModelResponse(parts=[TextPart("still grey")])

    capability = CtxfoldCapability(store=store)
    agent = Agent(FunctionModel(model), capabilities=[capability])
    await agent.run("again?", message_history=history, conversation_id="pa-earlier")
    assert said(sent[0][:4]) == said(history)
