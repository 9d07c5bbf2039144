"""`is_context_overflow` on the errors the real SDK clients raise against the local fake API."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import openai
import pytest

from ctxfold.errors import SummarizerError
from ctxfold.overflow import OverflowFigures, is_context_overflow, overflow_figures
from ctxfold.testing.fake_llm import FakeLLMServer, Mode


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(slow_seconds=2.0) as fake:
        yield fake


def openai_error(server: FakeLLMServer, mode: Mode) -> BaseException:
    client = openai.OpenAI(
        base_url=server.openai_base_url, api_key="test", max_retries=0, timeout=0.5
    )
    server.enqueue(mode)
    with pytest.raises(openai.APIError) as caught:
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hello"}]
        )
    return caught.value


def anthropic_error(server: FakeLLMServer, mode: Mode) -> BaseException:
    client = anthropic.Anthropic(
        base_url=server.anthropic_base_url, api_key="test", max_retries=0, timeout=0.5
    )
    server.enqueue(mode)
    with pytest.raises(anthropic.APIError) as caught:
        client.messages.create(
            model="claude-haiku-4-5",
            max_tokens=100,
            messages=[{"role": "user", "content": "hello"}],
        )
    return caught.value


@pytest.mark.guarantee("overflow-recovery")
def test_openai_context_length_exceeded_is_an_overflow(server: FakeLLMServer) -> None:
    """OpenAI's 400 with code context_length_exceeded, as the real SDK raises it, is an overflow."""
    error = openai_error(server, "overflow")
    assert isinstance(error, openai.BadRequestError)
    assert is_context_overflow(error)


@pytest.mark.guarantee("overflow-recovery")
def test_anthropic_prompt_is_too_long_is_an_overflow(server: FakeLLMServer) -> None:
    """Anthropic's 400 "prompt is too long", as the real SDK raises it, is an overflow."""
    error = anthropic_error(server, "overflow")
    assert isinstance(error, anthropic.BadRequestError)
    assert is_context_overflow(error)


@pytest.mark.parametrize("mode", ["error", "slow"])
def test_server_errors_and_timeouts_are_not_overflows(server: FakeLLMServer, mode: Mode) -> None:
    """A 500 or a timeout from either SDK is not mistaken for an overflow."""
    assert not is_context_overflow(openai_error(server, mode))
    assert not is_context_overflow(anthropic_error(server, mode))


def test_an_overflow_wrapped_by_another_error_is_recognised(server: FakeLLMServer) -> None:
    """An overflow raised as the cause or the context of another error is still recognised."""
    cause = openai_error(server, "overflow")
    try:
        raise SummarizerError("summarizing failed") from cause
    except SummarizerError as wrapped:
        assert is_context_overflow(wrapped)
    try:
        try:
            raise cause
        except openai.BadRequestError:
            raise RuntimeError("while handling") from None
    except RuntimeError as suppressed:
        # `from None` hides the cause on purpose; the context is still kept for debugging.
        assert is_context_overflow(suppressed)


def test_litellm_context_window_error_is_recognised_by_class_name() -> None:
    """LiteLLM's ContextWindowExceededError (and subclasses) is an overflow without litellm."""

    class ContextWindowExceededError(Exception):
        pass

    class ProviderSpecificOverflow(ContextWindowExceededError):
        pass

    assert is_context_overflow(ContextWindowExceededError("too long"))
    assert is_context_overflow(ProviderSpecificOverflow("too long"))


def test_a_compatible_server_saying_maximum_context_length_is_an_overflow() -> None:
    """A 400 from an OpenAI-compatible server that only says "maximum context length" counts."""

    class ProxyError(Exception):
        status_code = 400

    assert is_context_overflow(ProxyError("This model's maximum context length is 8192 tokens"))


def test_unrelated_errors_are_not_overflows() -> None:
    """Errors that say nothing about the context length, and None, are not overflows."""

    class ServerError(Exception):
        status_code = 500

    assert not is_context_overflow(None)
    assert not is_context_overflow(ValueError("bad value"))
    assert not is_context_overflow(ServerError("maximum context length is 8192 tokens"))


def test_a_cyclic_exception_chain_terminates() -> None:
    """An exception chain that loops back on itself gives an answer instead of hanging."""
    first, second = ValueError("a"), ValueError("b")
    first.__cause__, second.__cause__ = second, first
    assert not is_context_overflow(first)


@pytest.mark.guarantee("overflow-recovery")
@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_prompt_that_fits_but_not_with_its_output_is_an_overflow(
    server: FakeLLMServer, api: str
) -> None:
    """A prompt under the window whose requested output pushes it over is refused with a 400;
    compacting makes the room, so both APIs' wording counts, and the figures say the prompt's
    size and the window, not the window minus the output."""
    server.max_context = 1_000
    error = (openai_error if api == "openai" else anthropic_error)(server, "overflow_output")
    assert is_context_overflow(error)
    figures = overflow_figures(error)
    assert figures.limit == 1_000
    assert figures.prompt_tokens is not None and figures.prompt_tokens < 1_000


def test_anthropic_output_overflow_figures_from_its_message() -> None:
    """The numbers of Anthropic's "input length and max_tokens" message, read from the text."""
    message = (
        "input length and `max_tokens` exceed context limit: 199,759 + 8192 > 200000, "
        "decrease input length or `max_tokens` and try again"
    )

    class BadRequest(Exception):
        status_code = 400

    assert is_context_overflow(BadRequest(message))
    assert overflow_figures(BadRequest(message)) == OverflowFigures(199_759, 200_000)
