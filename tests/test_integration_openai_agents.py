"""CtxfoldSession drives a real OpenAI Agents SDK agent (a scripted `Model`, no network)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests._frameworks import minimum

pytest.importorskip("agents", minversion=minimum("agents"))

from agents import Agent, ModelSettings, RunConfig, Runner, ToolOutputImage, function_tool
from agents.items import ModelResponse
from agents.memory import SessionSettings, SQLiteSession
from agents.models.interface import Model
from agents.retry import ModelRetryAdvice, ModelRetrySettings, retry_policies
from agents.testing import ScriptedModel as SDKScriptedModel
from agents.testing import assistant_message
from agents.testing.model import ModelStep
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from ctxfold import InvalidInputError, MemoryStore, Message, SQLiteStore
from ctxfold.integrations import _agents_items as conv
from ctxfold.integrations.openai_agents import CtxfoldSession
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


class ScriptedModel(Model):
    """Per task: three calls to `read`, then an answer. Records every input it was sent."""

    def __init__(self, overflows: int = 0) -> None:
        self.calls = 0
        self.overflows = overflows
        self.requests: list[tuple[str | None, list[Any]]] = []

    async def get_response(
        self, system_instructions: str | None, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        self.requests.append((system_instructions, list(input)))
        if self.overflows:
            self.overflows -= 1
            raise Overflow("This model's maximum context length is 3000 tokens")
        self.calls += 1
        step = self.calls % (CALLS_PER_TASK + 1)
        output: list[Any]
        if step:
            arguments = json.dumps({"path": f"src/mod_{self.calls}.py"})
            output = [
                ResponseFunctionToolCall(
                    type="function_call",
                    id=f"fc_{self.calls}",
                    call_id=f"call_{self.calls}",
                    name="read",
                    arguments=arguments,
                )
            ]
        else:
            text = ResponseOutputText(type="output_text", text=f"done {self.calls}", annotations=[])
            output = [
                ResponseOutputMessage(
                    type="message",
                    id=f"msg_{self.calls}",
                    role="assistant",
                    status="completed",
                    content=[text],
                )
            ]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("these tests do not stream")


class Overflow(Exception):
    """What a provider says when the prompt is too long (as `is_context_overflow` reads it)."""


@function_tool
def read(path: str) -> str:
    """Read a file."""
    return tool_output(path)


def agent_for(model: Model) -> Agent[Any]:
    return Agent(name="coder", instructions="Fix the bug.", model=model, tools=[read])


async def run_tasks(
    first: int, count: int, *, session: Any, model: Model, config: RunConfig
) -> None:
    agent = agent_for(model)
    for task in range(first, first + count):
        await Runner.run(
            agent, f"task {task}: fix module {task}", session=session, run_config=config
        )


def assert_valid(items: Sequence[Mapping[str, Any]]) -> None:
    """Every function_call is answered right after its batch; every output answers one."""
    open_calls: set[str] = set()
    answering = False
    for index, item in enumerate(items):
        kind = item.get("type")
        if kind == "function_call":
            assert not answering or not open_calls, f"item {index}: call inside unanswered batch"
            answering = False
            open_calls.add(item["call_id"])
        elif kind == "function_call_output":
            assert item["call_id"] in open_calls, f"item {index}: output answers no open call"
            open_calls.discard(item["call_id"])
            answering = True
        else:
            assert not open_calls, f"item {index}: {sorted(open_calls)} left unanswered"
            answering = False


def converted(items: Sequence[Any]) -> list[Any]:
    return conv.items_to_messages(items)


@pytest.mark.guarantee("integration-framework-state-kept")
@pytest.mark.guarantee("integration-no-duplicates-after-restart")
@pytest.mark.guarantee("integration-requests-valid-and-within-window")
async def test_long_tool_calling_run_stays_valid_within_the_window_and_logs_each_item_once(
    reopen: Callable[[], EventStore],
) -> None:
    """A 40-turn tool-calling agent over a 3,000-token window: every request the model got is
    valid and fits, the session hands back every item the SDK's own session would hold, the log
    holds each item once, and a new process over a new connection goes on without duplicates."""
    model, reference_model = ScriptedModel(), ScriptedModel()
    session = CtxfoldSession("agents-long", store=reopen(), compactor=compactor())
    reference = SQLiteSession("reference")
    try:
        config = RunConfig(
            call_model_input_filter=session.model_input_filter, tracing_disabled=True
        )
        plain = RunConfig(tracing_disabled=True)
        await run_tasks(0, TASKS, session=session, model=model, config=config)
        await run_tasks(0, TASKS, session=reference, model=reference_model, config=plain)

        restarted = CtxfoldSession("agents-long", store=reopen(), compactor=compactor())
        config = RunConfig(
            call_model_input_filter=restarted.model_input_filter, tracing_disabled=True
        )
        await run_tasks(TASKS, MORE_TASKS, session=restarted, model=model, config=config)
        await run_tasks(TASKS, MORE_TASKS, session=reference, model=reference_model, config=plain)

        assert model.calls == (TASKS + MORE_TASKS) * (CALLS_PER_TASK + 1) >= 40
        for instructions, items in model.requests:
            assert_valid(items)
            assert tokens(converted(items), instructions) <= WINDOW
        assert max(len(items) for _, items in model.requests) < len(reference_model.requests[-1][1])
        expected = await reference.get_items()
        assert await restarted.get_items() == expected
        logged = [item for m in logged_messages(restarted.session) for item in conv.raw_items(m)]
        assert logged == expected
        call_ids = [i["call_id"] for i in logged if i.get("type") == "function_call"]
        assert len(call_ids) == len(set(call_ids)) == (TASKS + MORE_TASKS) * CALLS_PER_TASK
        assert any(e.type == "compaction" for e in restarted.session.events())
    finally:
        reference.close()  # the SDK's connection: Python 3.13 warns about one left open


async def test_get_items_returns_exactly_the_stored_tail() -> None:
    """`get_items(limit)` gives the newest `limit` stored items, oldest first, as they came."""
    session = CtxfoldSession("tail", store=MemoryStore())
    items = [
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}", "id": "f"},
        {"type": "function_call_output", "call_id": "c1", "output": "text"},
    ]
    await session.add_items(items)
    assert await session.get_items() == items
    assert await session.get_items(limit=2) == items[1:]
    assert await session.get_items(limit=0) == []


ALL_ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "plain user text"},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "parts"}]},
    {"type": "message", "role": "system", "content": "system text"},
    {"type": "message", "role": "developer", "content": "developer text"},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}]},
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "assistant text", "annotations": []}],
    },
    {"type": "function_call", "call_id": "c1", "name": "read", "arguments": '{"p": 1}'},
    {"type": "custom_tool_call", "call_id": "c2", "name": "grep", "input": "needle"},
    {"type": "computer_call", "call_id": "c3", "id": "cc", "action": {"type": "click"}},
    {"type": "local_shell_call", "call_id": "c4", "id": "ls", "action": {"command": ["ls"]}},
    {"type": "shell_call", "call_id": "c5", "action": {"commands": ["pwd"]}},
    {"type": "apply_patch_call", "call_id": "c6", "operation": {"type": "delete_file"}},
    {"type": "function_call_output", "call_id": "c1", "output": "file text"},
    {"type": "custom_tool_call_output", "call_id": "c2", "output": "match"},
    {"type": "computer_call_output", "call_id": "c3", "output": {"type": "computer_screenshot"}},
    {"type": "local_shell_call_output", "call_id": "c4", "output": "a.py"},
    {"type": "shell_call_output", "call_id": "c5", "output": [{"stdout": "/"}]},
    {"type": "apply_patch_call_output", "call_id": "c6", "output": "deleted"},
    {"type": "web_search_call", "id": "ws", "status": "completed", "action": {"type": "search"}},
    {"type": "file_search_call", "id": "fs", "queries": ["q"], "status": "completed"},
    {"type": "image_generation_call", "id": "ig", "status": "completed", "result": None},
    {"type": "code_interpreter_call", "id": "ci", "code": "1+1", "container_id": "x"},
    {"type": "mcp_list_tools", "id": "ml", "server_label": "s", "tools": []},
    {"type": "mcp_approval_request", "id": "ma", "name": "t", "arguments": "{}"},
    {"type": "mcp_approval_response", "approval_request_id": "ma", "approve": True},
    {"type": "mcp_call", "id": "mc", "name": "t", "arguments": "{}", "server_label": "s"},
    {"type": "tool_search_call", "id": "ts", "arguments": {}},
    {"type": "compaction", "id": "cp", "encrypted_content": "opaque"},
    {"type": "item_reference", "id": "ref_1"},
    {"type": "an_item_type_from_the_future", "payload": [1, 2, 3]},
]


@pytest.mark.guarantee("integration-lossless-conversion")
async def test_every_item_type_round_trips_exactly() -> None:
    """Each kind of input item the SDK defines (and one it does not yet) comes back from the
    log as it went in, through `get_items` and through the model's projection."""
    session = CtxfoldSession("round-trip", store=MemoryStore())
    await session.add_items(ALL_ITEMS)
    assert await session.get_items() == ALL_ITEMS
    reopened = CtxfoldSession("round-trip", store=session.session.store)
    assert await reopened.get_items() == ALL_ITEMS
    assert reopened.projected_items() == ALL_ITEMS


def test_a_run_of_assistant_items_is_one_message_and_outputs_are_tool_messages() -> None:
    """Reasoning, text and two calls become one assistant message with both calls; each
    output becomes a tool message answering its call."""
    messages = conv.items_to_messages(ALL_ITEMS[4:8] + ALL_ITEMS[12:14])
    assert [m.role for m in messages] == ["assistant", "tool", "tool"]
    assert [c.id for c in messages[0].tool_calls] == ["c1", "c2"]
    assert messages[0].content == "assistant text"
    assert [m.tool_call_id for m in messages[1:]] == ["c1", "c2"]


def _nested(depth: int) -> list[Any]:
    """A list `depth` lists deep: more than JSON encoding can recurse through."""
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.guarantee("integration-lossless-conversion")
@pytest.mark.parametrize(
    ("item", "named"),
    [
        ("just text", "item 1 is a str"),
        ({"content": "no role or type"}, "item 1 has neither"),
        ({"role": "robot", "content": "x"}, "role 'robot'"),
        ({"type": "function_call", "name": "read", "arguments": "{}"}, "without a call_id"),
        ({"type": "function_call_output", "output": "x"}, "without a call_id"),
        ({"role": "user", "content": object()}, "cannot be stored as JSON"),
        ({"role": "user", "content": "x", "deep": _nested(100_000)}, "cannot be stored as JSON"),
        ({"role": "user", "content": "x", "meta": [{1: "one"}]}, "item 1 .* has the key 1"),
    ],
)
async def test_an_item_that_cannot_be_carried_is_refused_and_nothing_is_written(
    item: Any, named: str
) -> None:
    """The error names the item; the batch it came in is not half-written."""
    session = CtxfoldSession("bad", store=MemoryStore())
    with pytest.raises(InvalidInputError, match=named):
        await session.add_items([{"role": "user", "content": "fine"}, item])
    assert await session.get_items() == []
    assert session.session.events() == []


@pytest.mark.parametrize("limit", ["2", 2.5, True, -1])
async def test_a_limit_that_is_no_count_of_items_is_refused(limit: Any) -> None:
    """`get_items(limit=...)` takes None or a count of items; anything else is refused by name."""
    session = CtxfoldSession("limits", store=MemoryStore())
    with pytest.raises(InvalidInputError, match="limit must be None or a number of items"):
        await session.get_items(limit=limit)


@pytest.mark.parametrize("session_id", [None, 7, "", b"bytes"])
def test_a_session_id_that_is_not_a_string_is_refused(session_id: Any) -> None:
    with pytest.raises(InvalidInputError, match="session id"):
        CtxfoldSession(session_id, store=MemoryStore())


@pytest.mark.guarantee("integration-overflow-retry")
async def test_an_overflow_is_recovered_and_retried_once() -> None:
    """The wrapped model compacts after the overflow and is called again with less; the run
    goes on, and no item is stored twice."""
    model = ScriptedModel()
    session = CtxfoldSession("overflow", store=MemoryStore(), compactor=overflow_compactor())
    config = RunConfig(call_model_input_filter=session.model_input_filter, tracing_disabled=True)
    wrapped = session.wrap_model(model)
    await run_tasks(0, 3, session=session, model=wrapped, config=config)
    before = len(await session.get_items())
    model.overflows = 1
    await run_tasks(3, 1, session=session, model=wrapped, config=config)
    failed, retried = model.requests[-5][1], model.requests[-4][1]
    assert tokens(converted(retried)) < tokens(converted(failed))
    assert_valid(retried)
    assert len(await session.get_items()) == before + 2 + 2 * CALLS_PER_TASK


@pytest.mark.guarantee("integration-overflow-retry")
async def test_a_second_overflow_reaches_the_caller() -> None:
    model = ScriptedModel()
    session = CtxfoldSession("overflow-twice", store=MemoryStore(), compactor=overflow_compactor())
    config = RunConfig(call_model_input_filter=session.model_input_filter, tracing_disabled=True)
    wrapped = session.wrap_model(model)
    await run_tasks(0, 3, session=session, model=wrapped, config=config)
    model.overflows = 2
    with pytest.raises(Overflow):
        await run_tasks(3, 1, session=session, model=wrapped, config=config)


@pytest.mark.guarantee("integration-pop-and-clear-append")
async def test_pop_item_appends_a_retraction_and_deletes_nothing(
    reopen: Callable[[], EventStore],
) -> None:
    """`pop_item` returns the newest item; `get_items` and the model's view lose it, the log
    keeps it, and a new process sees the same."""
    session = CtxfoldSession("pop", store=reopen())
    first = [{"role": "user", "content": "read a.py"}]
    step = [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"},
    ]
    await session.add_items(first)
    await session.add_items(step)
    assert await session.pop_item() == step[1]
    assert await session.get_items() == [*first, step[0]]
    assert session.projected_items() == [*first, step[0]]
    assert await session.pop_item() == step[0]
    assert await session.pop_item() == first[0]
    assert await session.pop_item() is None
    kinds = [e.type for e in session.session.events()]
    assert kinds == ["message", "message", "retraction", "message", "retraction", "retraction"]
    await session.add_items([{"role": "user", "content": "again"}])
    reopened = CtxfoldSession("pop", store=reopen())
    assert await reopened.get_items() == [{"role": "user", "content": "again"}]


@pytest.mark.guarantee("integration-pop-and-clear-append")
async def test_clear_session_appends_a_reset_and_the_log_keeps_everything(
    reopen: Callable[[], EventStore],
) -> None:
    session = CtxfoldSession("clear", store=reopen())
    await session.add_items([{"role": "user", "content": "old"}])
    await session.clear_session()
    assert await session.get_items() == []
    assert session.projected_items() == []
    await session.add_items([{"role": "user", "content": "new"}])
    reopened = CtxfoldSession("clear", store=reopen())
    assert await reopened.get_items() == [{"role": "user", "content": "new"}]
    assert [e.type for e in reopened.session.events()] == ["message", "reset", "message"]


async def test_the_runner_continues_after_a_cleared_session() -> None:
    """After `clear_session` the next run starts from nothing, and only its items are kept."""
    model = ScriptedModel()
    session = CtxfoldSession("runner-clear", store=MemoryStore(), compactor=compactor())
    config = RunConfig(call_model_input_filter=session.model_input_filter, tracing_disabled=True)
    await run_tasks(0, 1, session=session, model=model, config=config)
    await session.clear_session()
    await run_tasks(1, 1, session=session, model=model, config=config)
    items = await session.get_items()
    assert items[0] == {"content": "task 1: fix module 1", "role": "user"}
    assert len(items) == 2 + 2 * CALLS_PER_TASK
    assert model.requests[CALLS_PER_TASK + 1][1][0]["content"] == "task 1: fix module 1"


@pytest.mark.guarantee("integration-pop-and-clear-append")
async def test_the_cli_log_shows_the_retraction_and_the_reset(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ctxfold.cli import cli

    path = tmp_path / "agent.db"
    store = SQLiteStore(str(path))
    session = CtxfoldSession("shown", store=store)
    await session.add_items([{"role": "user", "content": "hi"}, {"role": "user", "content": "yo"}])
    await session.pop_item()
    await session.clear_session()
    store.close()
    result = CliRunner().invoke(cli, ["sessions", "log", "shown", "-d", f"sqlite:///{path}"])
    assert result.exit_code == 0, result.output
    kinds = [line.split()[1] for line in result.output.splitlines() if line.strip()]
    assert kinds == ["message", "message", "retraction", "reset"]


class TaggedModel(ScriptedModel):
    """A `ScriptedModel` whose call ids carry a tag, and that yields to other runs first."""

    def __init__(self, tag: str) -> None:
        super().__init__()
        self.tag = tag

    async def get_response(
        self, system_instructions: str | None, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        # Uneven pauses: one run gets several turns ahead of the other, then falls behind.
        await asyncio.sleep(0.002 * ((self.calls * (3 if self.tag == "a" else 5)) % 7))
        response = await super().get_response(system_instructions, input, *args, **kwargs)
        for item in response.output:
            if isinstance(item, ResponseFunctionToolCall):
                item.call_id = f"{self.tag}{item.call_id}"
        return response


async def test_two_runs_at_once_on_one_session_each_send_valid_requests() -> None:
    """Two agents running at the same time on one session each send only valid requests (every
    call answered), as with the SDK's own session, and every item is stored once."""
    session = CtxfoldSession("concurrent", store=MemoryStore(), compactor=compactor())
    config = RunConfig(call_model_input_filter=session.model_input_filter, tracing_disabled=True)
    first, second = TaggedModel("a"), TaggedModel("b")
    await asyncio.gather(
        run_tasks(0, 6, session=session, model=first, config=config),
        run_tasks(10, 6, session=session, model=second, config=config),
    )
    for model in (first, second):
        assert model.calls == 6 * (CALLS_PER_TASK + 1)
        for _, items in model.requests:
            assert_valid(items)
    assert len(await session.get_items()) == 2 * 6 * (2 + 2 * CALLS_PER_TASK)


def redact(history: list[Any], new_input: list[Any]) -> list[Any]:
    """A `session_input_callback` that rewrites a stored user message."""
    redacted = [
        {**item, "content": item["content"].replace("secret", "[redacted]")}
        if isinstance(item.get("content"), str)
        else item
        for item in history
    ]
    return redacted + new_input


async def test_a_session_input_callback_is_honoured_and_nothing_is_sent_twice(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """When a `session_input_callback` rewrites the history, the model is sent the Runner's
    input unchanged, as with the SDK's own session: the redacted text only, no item twice, and
    the warning says so."""
    model, reference_model = ScriptedModel(), ScriptedModel()
    session = CtxfoldSession("callback", store=MemoryStore(), compactor=compactor())
    reference = SQLiteSession("callback-reference")
    try:
        config = RunConfig(
            call_model_input_filter=session.model_input_filter,
            session_input_callback=redact,
            tracing_disabled=True,
        )
        plain = RunConfig(session_input_callback=redact, tracing_disabled=True)
        for session_, model_, config_ in (
            (session, model, config),
            (reference, reference_model, plain),
        ):
            agent = agent_for(model_)
            for text in ("my secret is 42", "second question"):
                await Runner.run(agent, text, session=session_, run_config=config_)
        assert model.requests == reference_model.requests
        sent = model.requests[CALLS_PER_TASK + 1][1]
        assert [i.get("content") for i in sent if i.get("role") == "user"] == [
            "my [redacted] is 42",
            "second question",
        ]
        assert "sending the Runner's input unchanged" in caplog.text
    finally:
        reference.close()


async def test_the_sdk_session_limit_is_honoured() -> None:
    """`SessionSettings(limit=...)`, on the session or the run, bounds what `get_items()` gives
    and what the model is sent, as with the SDK's own session."""
    session = CtxfoldSession(
        "limited", store=MemoryStore(), session_settings=SessionSettings(limit=3)
    )
    items = [{"role": "user", "content": f"message {n}"} for n in range(5)]
    await session.add_items(items)
    assert await session.get_items() == items[-3:]
    assert await session.get_items(limit=1) == items[-1:]

    model, reference_model = ScriptedModel(), ScriptedModel()
    unlimited = CtxfoldSession("run-limited", store=MemoryStore(), compactor=compactor())
    reference = SQLiteSession("run-limited-reference")
    try:
        limit = SessionSettings(limit=3)
        config = RunConfig(
            call_model_input_filter=unlimited.model_input_filter,
            session_settings=limit,
            tracing_disabled=True,
        )
        plain = RunConfig(session_settings=limit, tracing_disabled=True)
        await run_tasks(0, 3, session=unlimited, model=model, config=config)
        await run_tasks(0, 3, session=reference, model=reference_model, config=plain)
        assert model.requests == reference_model.requests
        assert len(model.requests[-CALLS_PER_TASK - 1][1]) == 3 + 1
    finally:
        reference.close()


class Busy(Exception):
    """A transient provider error the SDK's retry policy may retry."""


@pytest.mark.guarantee("integration-overflow-retry")
async def test_the_wrapped_model_keeps_the_sdk_retry_advice() -> None:
    """`wrap_model` passes the wrapped model's retry advice through, so the SDK's
    `ModelRetrySettings` retry a transient error as they do without the wrapper."""
    advice = ModelRetryAdvice(suggested=True, retry_after=0.01)
    model = SDKScriptedModel(
        [ModelStep.raise_error(Busy("server busy"), retry_advice=advice), [assistant_message("ok")]]
    )
    session = CtxfoldSession("retry", store=MemoryStore(), compactor=compactor())
    retry = ModelRetrySettings(max_retries=2, policy=retry_policies.provider_suggested())
    agent = Agent(
        name="a", model=session.wrap_model(model), model_settings=ModelSettings(retry=retry)
    )
    config = RunConfig(call_model_input_filter=session.model_input_filter, tracing_disabled=True)
    result = await Runner.run(agent, "hi", session=session, run_config=config)
    assert result.final_output == "ok"
    assert len(model.calls) == 2


async def test_recall_arguments_that_are_not_json_come_back_as_an_error_text() -> None:
    """A recall call whose arguments are not JSON is answered with an error the model can act
    on; the run goes on."""
    session = CtxfoldSession("recall-bad", store=MemoryStore(), recall=True)
    tool = session.recall_tool()
    assert tool is not None
    call = ResponseFunctionToolCall(
        type="function_call", call_id="r1", name="recall", arguments="{not json", id="fc1"
    )
    model = SDKScriptedModel([[call], [assistant_message("ok")]])
    config = RunConfig(call_model_input_filter=session.model_input_filter, tracing_disabled=True)
    result = await Runner.run(
        Agent(name="a", model=model, tools=[tool]), "q", session=session, run_config=config
    )
    assert result.final_output == "ok"
    outputs = [i for i in await session.get_items() if i.get("type") == "function_call_output"]
    assert outputs[0]["output"].startswith("recall error: the arguments must be a JSON object")


@pytest.mark.guarantee("integration-lossless-conversion")
async def test_a_lone_surrogate_in_an_answer_is_stored_as_a_replacement_character() -> None:
    """Half an emoji in a model's answer does not lose the answer: it is stored with U+FFFD in
    its place, and a whole emoji (a surrogate pair) is kept."""
    session = CtxfoldSession("surrogate", store=MemoryStore())
    answer = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "half \ud83d, whole \ud83d\ude00"}],
    }
    await session.add_items([{"role": "user", "content": "hi"}, answer])
    stored = await session.get_items()
    assert stored[1]["content"][0]["text"] == "half \ufffd, whole \U0001f600"
    assert session.projected_items() == stored


def image_question(url: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [
            {"type": "input_text", "text": QUESTION},
            {"type": "input_image", "image_url": url, "detail": "auto"},
        ],
    }


@pytest.mark.parametrize("url", URLS, ids=URL_IDS)
def test_an_input_image_costs_what_openai_bills_for_it_not_its_text(url: str) -> None:
    """A user message with an image costs what the same message costs through `from_openai`
    (a 1024 x 1024 image: 765 tokens), far more than its question alone."""
    assert_counted_like(conv.items_to_messages([image_question(url)]), openai_user(url))


def test_an_input_file_costs_its_pages() -> None:
    """A PDF sent as an ``input_file`` costs its pages, as through `from_openai`."""
    item = {
        "role": "user",
        "content": [
            {"type": "input_text", "text": QUESTION},
            {"type": "input_file", "file_data": PDF_URL, "filename": "a.pdf"},
        ],
    }
    assert_counted_like(conv.items_to_messages([item]), openai_pdf())


IMAGE_OUTPUTS = [
    {
        "type": "function_call_output",
        "call_id": CALL_ID,
        "output": [{"type": "input_image", "image_url": DATA_URL, "detail": "auto"}],
    },
    {
        "type": "computer_call_output",
        "call_id": CALL_ID,
        "output": {"type": "computer_screenshot", "image_url": DATA_URL},
    },
]


@pytest.mark.parametrize("item", IMAGE_OUTPUTS, ids=["function-output", "screenshot"])
def test_an_image_a_tool_returns_costs_an_image_not_its_base64(item: dict[str, Any]) -> None:
    """A tool output that is an image (a function tool's `ToolOutputImage`, a computer call's
    screenshot) costs what the same tool message costs through `from_openai`; its base64 is not
    its text. Cleared by a compaction, it costs its placeholder alone and sends no image."""
    (message,) = conv.items_to_messages([item])
    assert message.text == ""
    assert_counted_like([message], openai_tool(DATA_URL))
    cleared = message.replace(content="[cleared]")
    assert count([cleared]) == count([cleared.replace(extra={})])
    assert DATA_URL not in json.dumps(conv.message_to_items(cleared))


def test_an_image_an_image_generation_call_made_is_counted_as_an_image() -> None:
    """The image a hosted image generation call made rides back to the model as an image: it
    costs an image, not its base64 as text, and comes back from the log as it went in."""
    item = {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": B64}
    (message,) = conv.items_to_messages([item])
    assert B64[:1000] not in message.text
    assert count([message]) - count([message.replace(extra={})]) == openai_image_tokens(1024, 1024)
    assert conv.message_to_items(message) == [item]


@pytest.mark.parametrize(
    "item",
    [
        image_question(DATA_URL),
        *IMAGE_OUTPUTS,
        {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": B64},
    ],
    ids=["input-image", "function-output", "screenshot", "generated"],
)
def test_an_inline_image_is_logged_once(item: dict[str, Any]) -> None:
    """A computer-use agent's screenshot, like any inline image, is logged once, in its item:
    what ctxfold records to price it is its size, not its data, so the log does not double."""
    assert_logged_once(conv.items_to_messages([item]))


async def test_images_reach_the_model_unchanged_and_round_trip_through_the_log() -> None:
    """A question with an image and a tool that returns one: the model is sent both as the SDK
    made them, the session gives them back as they went in, also from a reopened store, and the
    log prices them as images."""

    @function_tool
    def shot() -> ToolOutputImage:
        """Take a screenshot."""
        return ToolOutputImage(image_url=DATA_URL)

    call = ResponseFunctionToolCall(
        type="function_call", call_id=CALL_ID, name="shot", arguments="{}", id="fc1"
    )
    model = SDKScriptedModel([[call], [assistant_message("a grey square")]])
    session = CtxfoldSession("images", store=MemoryStore(), compactor=compactor())
    config = RunConfig(call_model_input_filter=session.model_input_filter, tracing_disabled=True)
    agent = Agent(name="a", model=model, tools=[shot])
    await Runner.run(agent, [image_question(DATA_URL)], session=session, run_config=config)

    first, second = (call.input for call in model.calls)
    assert first[0]["content"] == image_question(DATA_URL)["content"]
    (output,) = [i for i in second if i.get("type") == "function_call_output"]
    assert output["output"][0]["image_url"] == DATA_URL
    items = await session.get_items()
    assert items[0]["content"] == image_question(DATA_URL)["content"]
    reopened = CtxfoldSession("images", store=session.session.store)
    assert await reopened.get_items() == items
    assert reopened.projected_items() == items
    user, _, tool, _ = reopened.session.messages()
    assert_counted_like([user], openai_user(DATA_URL))
    assert_counted_like([tool], openai_tool(DATA_URL))


def test_an_image_output_an_earlier_ctxfold_logged_still_goes_back_as_it_came() -> None:
    """An earlier ctxfold put an image output's JSON in the message text; such a logged message
    still gives back its item, image and all, rather than that JSON as text."""
    item = IMAGE_OUTPUTS[0]
    earlier = Message(
        "tool",
        json.dumps(item["output"], sort_keys=True, separators=(",", ":")),
        tool_call_id=CALL_ID,
        extra={conv.NAMESPACE: {"items": [item]}},
    )
    assert conv.message_to_items(earlier) == [item]


def test_a_logged_image_is_priced_in_a_new_process(tmp_path: Path) -> None:
    """What the log holds is enough to price an image: a new process that reads the session
    and imports no integration counts the image as the process that logged it did."""
    path = tmp_path / "log.db"
    with SQLiteStore(path) as store:
        session = store.session("fresh")
        session.append(conv.items_to_messages([image_question(DATA_URL), IMAGE_OUTPUTS[0]]))
        here = count(session.messages())
    script = (
        "import sys\n"
        "from ctxfold import SQLiteStore\n"
        "from ctxfold.tokens import counter\n"
        f"with SQLiteStore({str(path)!r}) as store:\n"
        "    messages = store.session('fresh').messages()\n"
        "    print(sum(counter('auto').count_message(m) for m in messages))\n"
        "assert not any(name.startswith('ctxfold.integrations') for name in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert int(done.stdout) == here
    assert here < 2 * count([openai_user(DATA_URL)])
