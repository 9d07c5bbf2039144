"""`OpenAISummarizer` with the real `openai` client talking to a local fake Chat Completions API."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import openai
import pytest

from ctxfold.errors import MissingDependencyError, SummarizerError
from ctxfold.messages import Message, ToolCall
from ctxfold.messages.structure import analyze
from ctxfold.overflow import is_context_overflow
from ctxfold.summarizers.openai import OpenAISummarizer
from ctxfold.summarizers.prompt import SECTIONS, build_request
from ctxfold.summarizers.record import frame_summary
from ctxfold.testing.fake_llm import FakeLLMServer
from ctxfold.testing.transcripts import SYSTEM_PROMPT, generate

CURRENT_REQUEST = "Now also make the CSV export handle unicode payee names, please."


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(slow_seconds=3.0) as fake:
        yield fake


def client_for(server: FakeLLMServer, *, retries: int = 0, timeout: float = 5.0) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=server.openai_base_url, api_key="test", max_retries=retries, timeout=timeout
    )


def history() -> list[Message]:
    """A system prompt, an agent's work on a first task, and a new request from the user."""
    return [*generate(seed=11, steps=8), Message("user", CURRENT_REQUEST)]


def engine_stretch(messages: list[Message]) -> list[Message]:
    """What the engine hands a summarizer first: the oldest turns, without the system block and
    without the current request (`summary-request-scope`)."""
    structure = analyze(messages)
    current = structure.current_request
    assert current is not None
    return messages[structure.system_end : current]


def test_the_prompt_is_the_sectioned_instructions_and_the_record(server: FakeLLMServer) -> None:
    """One call sends a system message with ctxfold's sectioned instructions (identifiers
    copied verbatim) and a user message holding the stretch as a framed record."""
    request = build_request(engine_stretch(history()), max_tokens=600)
    OpenAISummarizer("gpt-4o-mini", client=client_for(server))(request)
    (sent,) = server.requests
    assert sent.path == "/v1/chat/completions"
    assert [m["role"] for m in sent.body["messages"]] == ["system", "user"]
    assert sent.system == request.instructions
    assert all(f"## {section}" in sent.system for section in SECTIONS)
    assert "character for character" in sent.system
    assert sent.user == request.record
    assert "record to read" in sent.user
    assert sent.body["model"] == "gpt-4o-mini"
    assert sent.body["max_completion_tokens"] == 600
    assert sent.body["temperature"] == 0


@pytest.mark.guarantee("summary-request-scope")
def test_system_block_and_current_request_are_not_sent(server: FakeLLMServer) -> None:
    """The summarizer sees the stretch only: neither the system prompt nor the user's current
    request reaches the API."""
    messages = history()
    request = build_request(engine_stretch(messages), max_tokens=600)
    OpenAISummarizer("gpt-4o-mini", client=client_for(server))(request)
    body = str(server.requests[0].body)
    assert SYSTEM_PROMPT not in body
    assert CURRENT_REQUEST not in body
    assert messages[1].text[:60] in body  # the first task itself is in the stretch


def test_an_earlier_summary_is_marked_and_the_model_asked_to_update_it(
    server: FakeLLMServer,
) -> None:
    """When the stretch holds an earlier summary, the record marks it as one and the
    instructions ask the model to bring it up to date rather than start over."""
    earlier = Message("user", frame_summary("## Objective\n- fix rounding in currency.py"))
    stretch = [earlier, *engine_stretch(history())[1:]]
    request = build_request(stretch, synthetic={0}, max_tokens=600)
    OpenAISummarizer("gpt-4o-mini", client=client_for(server))(request)
    sent = server.requests[0]
    assert "earlier summary" in sent.user
    assert "fix rounding in currency.py" in sent.user
    assert "up to date rather than summarizing them again" in sent.system


def test_the_result_carries_the_model_and_the_api_usage(server: FakeLLMServer) -> None:
    """The result's model and token counts are those the API reported, for one call."""
    request = build_request(engine_stretch(history()), max_tokens=600)
    result = OpenAISummarizer("gpt-4o-mini", client=client_for(server))(request)
    assert result.text and result.text.startswith("## Objective")
    assert result.model == "gpt-4o-mini"
    assert result.input_tokens == server.requests[0].estimated_tokens
    assert result.output_tokens == (len(result.text) + 3) // 4
    assert result.calls == 1


def test_a_server_error_left_after_the_sdk_retries_raises_summarizer_error(
    server: FakeLLMServer,
) -> None:
    """A 500 the SDK's own retries do not get past raises SummarizerError, the SDK error chained."""
    server.mode = "error"
    summarizer = OpenAISummarizer("gpt-4o-mini", client=client_for(server, retries=1))
    with pytest.raises(SummarizerError, match="gpt-4o-mini") as caught:
        summarizer(build_request(engine_stretch(history())))
    assert isinstance(caught.value.__cause__, openai.InternalServerError)
    assert len(server.requests) == 2  # the SDK retried once, as configured
    assert not is_context_overflow(caught.value)


def test_the_sdk_retries_a_server_error_before_ctxfold_sees_it(server: FakeLLMServer) -> None:
    """A single 500 followed by an answer is absorbed by the SDK's retry: the summary comes back."""
    server.enqueue("error")
    summarizer = OpenAISummarizer("gpt-4o-mini", client=client_for(server), max_retries=1)
    result = summarizer(build_request(engine_stretch(history())))
    assert result.text
    assert len(server.requests) == 2


def test_a_slow_answer_past_the_timeout_raises_summarizer_error(server: FakeLLMServer) -> None:
    """An answer slower than the timeout raises SummarizerError with the SDK's timeout chained."""
    server.mode = "slow"
    summarizer = OpenAISummarizer("gpt-4o-mini", client=client_for(server), timeout=0.3)
    with pytest.raises(SummarizerError) as caught:
        summarizer(build_request(engine_stretch(history())))
    assert isinstance(caught.value.__cause__, openai.APITimeoutError)


@pytest.mark.parametrize(
    ("mode", "says"),
    [("garbled", "failed: JSONDecodeError"), ("no_choices", "a response with no choices")],
)
def test_an_answer_that_holds_no_completion_raises_summarizer_error(
    server: FakeLLMServer, mode: str, says: str
) -> None:
    """A 200 whose body is not JSON (a proxy's page) or holds no choices is a SummarizerError
    naming the summarizer: the compaction reports it, instead of a bare JSONDecodeError or a
    silent decline."""
    server.mode = mode  # type: ignore[assignment]
    with pytest.raises(SummarizerError, match=says) as caught:
        OpenAISummarizer("gpt-4o-mini", client=client_for(server))(
            build_request(engine_stretch(history()))
        )
    assert "gpt-4o-mini" in str(caught.value)


@pytest.mark.parametrize("mode", ["empty", "echo"])
@pytest.mark.guarantee("echo-rejected")
def test_an_empty_or_echoed_answer_is_a_decline(server: FakeLLMServer, mode: str) -> None:
    """An answer with no text, or one repeating the record, is a decline (text None) with a
    note, and still reports what the call cost."""
    server.mode = mode  # type: ignore[assignment]
    result = OpenAISummarizer("gpt-4o-mini", client=client_for(server))(
        build_request(engine_stretch(history()))
    )
    assert result.text is None
    assert result.notes
    assert result.calls == 1 and result.input_tokens > 0


def test_an_oversized_stretch_arrives_in_pieces_each_under_the_window(
    server: FakeLLMServer,
) -> None:
    """A stretch larger than the summarizer's window is sent as several requests, each within
    the window, and the answer combines them."""
    window = 6_000
    server.max_context = window  # the fake refuses anything larger, as the model would
    stretch = generate(seed=5, steps=60)[1:]
    request = build_request(stretch, max_tokens=600)
    assert len(request.record) // 4 > window
    summarizer = OpenAISummarizer("gpt-4o-mini", client=client_for(server), window=window)
    result = summarizer(request)
    assert len(server.requests) >= 3
    assert all(sent.estimated_tokens <= window for sent in server.requests)
    assert result.text and result.calls == len(server.requests)
    assert result.input_tokens == sum(sent.estimated_tokens for sent in server.requests)
    assert "earlier summary" in server.requests[-1].user  # the combining call


def test_a_window_the_catalog_gets_wrong_is_recovered_from_the_overflow(
    server: FakeLLMServer,
) -> None:
    """When the API answers context_length_exceeded (a deployment with a smaller window than
    the catalog says), the stretch is read again in smaller pieces instead of failing."""
    server.max_context = 5_000
    request = build_request(generate(seed=5, steps=40)[1:], max_tokens=600)
    result = OpenAISummarizer("gpt-4o-mini", client=client_for(server))(request)
    assert result.text
    assert server.requests[0].estimated_tokens > 5_000
    assert any("re-planned" in note for note in result.notes)


async def test_the_async_path_sends_the_same_prompt(server: FakeLLMServer) -> None:
    """`acall` on an AsyncOpenAI client sends the same request and reads the same answer."""
    request = build_request(engine_stretch(history()), max_tokens=600)
    async_client = openai.AsyncOpenAI(
        base_url=server.openai_base_url, api_key="test", max_retries=0
    )
    summarizer = OpenAISummarizer("gpt-4o-mini", async_client=async_client)
    result = await summarizer.acall(request)
    await async_client.close()
    expected = OpenAISummarizer("gpt-4o-mini", client=client_for(server))(request)
    first, second = server.requests
    assert first.body == second.body
    assert result == expected


async def test_the_async_path_fails_and_declines_like_the_sync_one(server: FakeLLMServer) -> None:
    """Through `acall`, a 500 raises SummarizerError and an empty answer declines."""
    summarizer = OpenAISummarizer("gpt-4o-mini", client=client_for(server))
    request = build_request(engine_stretch(history()))
    server.enqueue("error", "empty")
    with pytest.raises(SummarizerError) as caught:
        await summarizer.acall(request)
    assert isinstance(caught.value.__cause__, openai.InternalServerError)
    assert (await summarizer.acall(request)).text is None
    await summarizer.aclose()  # closes the async twin it made of the sync client


async def test_closing_releases_only_the_clients_the_summarizer_made(
    server: FakeLLMServer,
) -> None:
    """`aclose` closes the async client the summarizer made for itself and leaves the client
    the caller passed in open."""
    given = client_for(server)
    summarizer = OpenAISummarizer("gpt-4o-mini", client=given)
    await summarizer.acall(build_request(engine_stretch(history())))
    made = summarizer.async_client
    assert made is not None
    await summarizer.aclose()
    assert made.is_closed() and not given.is_closed()
    given.close()


def test_without_a_client_the_sdk_reads_its_own_environment(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no client given, the SDK's usual OPENAI_API_KEY and OPENAI_BASE_URL apply."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
    OpenAISummarizer("gpt-4o-mini", max_retries=0)(build_request(engine_stretch(history())))
    assert server.requests[0].headers["authorization"] == "Bearer sk-from-env"


def test_a_missing_openai_package_gives_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the openai package, making the summarizer says which extra to install."""
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'ctxfold\[openai\]'"):
        OpenAISummarizer("gpt-4o-mini")


def test_a_tool_call_in_the_stretch_is_read_with_its_arguments(server: FakeLLMServer) -> None:
    """Tool calls reach the model as part of the record, arguments included, so the summary can
    keep the commands and paths they name."""
    stretch = [
        Message("user", "find the failing test"),
        Message("assistant", None, (ToolCall("call_7", "shell", '{"cmd": "pytest -x tests/"}'),)),
        Message("tool", "FAILED tests/test_io.py::test_read - KeyError", tool_call_id="call_7"),
    ]
    OpenAISummarizer("gpt-4o-mini", client=client_for(server))(build_request(stretch))
    assert "pytest -x tests/" in server.requests[0].user
    assert "tests/test_io.py::test_read" in server.requests[0].user
