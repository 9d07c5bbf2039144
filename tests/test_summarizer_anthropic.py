"""`AnthropicSummarizer` with the real `anthropic` client talking to a local fake Messages API."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping

import anthropic
import pytest

from ctxfold.errors import MissingDependencyError, SummarizerError
from ctxfold.messages import Message
from ctxfold.messages.structure import analyze
from ctxfold.overflow import is_context_overflow
from ctxfold.summarizers.anthropic import AnthropicSummarizer
from ctxfold.summarizers.prompt import SECTIONS, build_request
from ctxfold.summarizers.record import frame_summary
from ctxfold.testing.fake_llm import FakeLLMServer
from ctxfold.testing.transcripts import SYSTEM_PROMPT, generate

MODEL = "claude-haiku-4-5"
CURRENT_REQUEST = "Next, add a --json flag to the report command."


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(slow_seconds=3.0) as fake:
        yield fake


def client_for(server: FakeLLMServer, *, retries: int = 0) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=server.anthropic_base_url, api_key="test", max_retries=retries, timeout=5.0
    )


def api_key_sent(headers: Mapping[str, str]) -> str | None:
    """The key a request carried: SDK versions send it as x-api-key or as a bearer token."""
    bearer = headers.get("authorization", "")
    return headers.get("x-api-key") or (bearer.removeprefix("Bearer ") if bearer else None)


def stretch() -> list[Message]:
    """The oldest turns of a history, without its system block and current request
    (`summary-request-scope`)."""
    messages = [*generate(seed=3, steps=8), Message("user", CURRENT_REQUEST)]
    structure = analyze(messages)
    assert structure.current_request is not None
    return messages[structure.system_end : structure.current_request]


def test_the_instructions_go_in_system_and_the_record_in_one_user_message(
    server: FakeLLMServer,
) -> None:
    """One call sends the sectioned instructions (identifiers kept verbatim) as the system
    prompt and the stretch as a single user message holding the record."""
    request = build_request(stretch(), max_tokens=700)
    AnthropicSummarizer(MODEL, client=client_for(server))(request)
    (sent,) = server.requests
    assert sent.path == "/v1/messages"
    assert sent.body["system"] == request.instructions
    assert all(f"## {section}" in sent.system for section in SECTIONS)
    assert "character for character" in sent.system
    assert sent.body["messages"] == [{"role": "user", "content": request.record}]
    assert sent.body["max_tokens"] == 700
    assert api_key_sent(sent.headers) == "test"


@pytest.mark.guarantee("summary-request-scope")
def test_system_block_and_current_request_are_not_sent(server: FakeLLMServer) -> None:
    """Neither the agent's system prompt nor the user's current request reaches the API."""
    AnthropicSummarizer(MODEL, client=client_for(server))(build_request(stretch()))
    body = str(server.requests[0].body)
    assert SYSTEM_PROMPT not in body and CURRENT_REQUEST not in body


def test_an_earlier_summary_is_sent_to_be_updated(server: FakeLLMServer) -> None:
    """An earlier summary in the stretch is marked as one, and the model is asked to update it."""
    earlier = Message("user", frame_summary("## Objective\n- make ledger totals exact"))
    request = build_request([earlier, *stretch()[1:]], synthetic={0})
    AnthropicSummarizer(MODEL, client=client_for(server))(request)
    sent = server.requests[0]
    assert "earlier summary" in sent.user and "make ledger totals exact" in sent.user
    assert "up to date rather than summarizing them again" in sent.system


def test_the_result_carries_the_model_and_the_api_usage(server: FakeLLMServer) -> None:
    """The result's model and token counts are those the Messages API reported."""
    result = AnthropicSummarizer(MODEL, client=client_for(server))(build_request(stretch()))
    assert result.text and "## Identifiers" in result.text
    assert (result.model, result.calls) == (MODEL, 1)
    assert result.input_tokens == server.requests[0].estimated_tokens
    assert result.output_tokens == (len(result.text) + 3) // 4


def test_a_server_error_raises_summarizer_error(server: FakeLLMServer) -> None:
    """A 500 left after the SDK's retries raises SummarizerError with the SDK error chained."""
    server.mode = "error"
    with pytest.raises(SummarizerError, match=MODEL) as caught:
        AnthropicSummarizer(MODEL, client=client_for(server))(build_request(stretch()))
    assert isinstance(caught.value.__cause__, anthropic.InternalServerError)


def test_a_slow_answer_past_the_timeout_raises_summarizer_error(server: FakeLLMServer) -> None:
    """An answer slower than `timeout` raises SummarizerError with the SDK's timeout chained."""
    server.mode = "slow"
    summarizer = AnthropicSummarizer(MODEL, client=client_for(server), timeout=0.3)
    with pytest.raises(SummarizerError) as caught:
        summarizer(build_request(stretch()))
    assert isinstance(caught.value.__cause__, anthropic.APITimeoutError)


@pytest.mark.parametrize("mode", ["empty", "echo"])
@pytest.mark.guarantee("echo-rejected")
def test_an_empty_or_echoed_answer_is_a_decline(server: FakeLLMServer, mode: str) -> None:
    """An answer with no text blocks, or one that repeats the record, is a decline with a note."""
    server.mode = mode  # type: ignore[assignment]
    result = AnthropicSummarizer(MODEL, client=client_for(server))(build_request(stretch()))
    assert result.text is None and result.notes


def test_an_oversized_stretch_arrives_in_pieces_each_under_the_window(
    server: FakeLLMServer,
) -> None:
    """A stretch larger than the window is sent as several requests, each within it."""
    window = 6_000
    server.max_context = window
    request = build_request(generate(seed=9, steps=60)[1:], max_tokens=600)
    result = AnthropicSummarizer(MODEL, client=client_for(server), window=window)(request)
    assert result.text
    assert len(server.requests) >= 3
    assert all(sent.estimated_tokens <= window for sent in server.requests)


def test_prompt_is_too_long_is_recovered_by_reading_in_pieces(server: FakeLLMServer) -> None:
    """When the API answers "prompt is too long", the stretch is read again in pieces under the
    maximum the error stated; the first refusal is a real overflow error."""
    server.max_context = 5_000
    summarizer = AnthropicSummarizer(MODEL, client=client_for(server), window=200_000)
    result = summarizer(build_request(generate(seed=9, steps=40)[1:], max_tokens=600))
    assert result.text
    assert server.requests[0].estimated_tokens > 5_000
    assert all(sent.estimated_tokens <= 5_000 for sent in server.requests[1:])


def test_an_overflow_that_cannot_be_avoided_raises_a_recognisable_error(
    server: FakeLLMServer,
) -> None:
    """When every request overflows, the summarizer gives up with a SummarizerError that
    `is_context_overflow` still recognises."""
    server.mode = "overflow"
    with pytest.raises(SummarizerError) as caught:
        AnthropicSummarizer(MODEL, client=client_for(server))(build_request(stretch()))
    assert is_context_overflow(caught.value)


async def test_the_async_path_sends_the_same_request(server: FakeLLMServer) -> None:
    """`acall` goes through an AsyncAnthropic twin of the given client and sends the same body."""
    request = build_request(stretch())
    summarizer = AnthropicSummarizer(MODEL, client=client_for(server))
    expected = summarizer(request)
    result = await summarizer.acall(request)
    await summarizer.aclose()
    first, second = server.requests
    assert first.body == second.body
    assert result == expected


async def test_the_async_path_raises_on_a_server_error(server: FakeLLMServer) -> None:
    """Through `acall`, a 500 raises SummarizerError with the SDK error chained."""
    async_client = anthropic.AsyncAnthropic(
        base_url=server.anthropic_base_url, api_key="test", max_retries=0
    )
    server.mode = "error"
    summarizer = AnthropicSummarizer(MODEL, async_client=async_client)
    with pytest.raises(SummarizerError) as caught:
        await summarizer.acall(build_request(stretch()))
    await async_client.close()
    assert isinstance(caught.value.__cause__, anthropic.InternalServerError)


def test_without_a_client_the_sdk_reads_its_own_environment(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no client given, the SDK's ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL apply."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "key-from-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
    summarizer = AnthropicSummarizer(MODEL, max_retries=0)
    summarizer(build_request(stretch()))
    summarizer.close()
    assert api_key_sent(server.requests[0].headers) == "key-from-env"


def test_a_missing_anthropic_package_gives_the_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without the anthropic package, making the summarizer says which extra to install."""
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'ctxfold\[anthropic\]'"):
        AnthropicSummarizer(MODEL)
