"""`LiteLLMSummarizer`: an optional extra whose absence is explained, and its overflow error."""

from __future__ import annotations

import importlib.util
import sys
import types
from typing import Any

import openai
import pytest

from ctxfold.errors import CtxfoldError, MissingDependencyError, SummarizerError
from ctxfold.messages import Message
from ctxfold.overflow import is_context_overflow
from ctxfold.summarizers.litellm import LiteLLMSummarizer
from ctxfold.summarizers.prompt import build_request
from ctxfold.testing.fake_llm import FakeLLMServer


def test_the_module_imports_without_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Importing the module never needs litellm; only making a summarizer does."""
    monkeypatch.setitem(sys.modules, "litellm", None)
    module = importlib.reload(sys.modules["ctxfold.summarizers.litellm"])
    assert module.LiteLLMSummarizer.__name__ == "LiteLLMSummarizer"


def test_a_missing_litellm_package_gives_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without litellm, making the summarizer raises MissingDependencyError with the pip command
    for the litellm extra; it is an ImportError and a CtxfoldError both."""
    monkeypatch.setitem(sys.modules, "litellm", None)
    with pytest.raises(MissingDependencyError) as caught:
        LiteLLMSummarizer("gemini/gemini-2.0-flash")
    assert str(caught.value) == "LiteLLMSummarizer needs litellm: pip install 'ctxfold[litellm]'"
    assert isinstance(caught.value, ImportError) and isinstance(caught.value, CtxfoldError)


@pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed")
def test_litellm_context_window_error_is_an_overflow() -> None:
    """LiteLLM's own ContextWindowExceededError is recognised as a context overflow."""
    import litellm

    error = litellm.ContextWindowExceededError(
        message="prompt too long", model="gpt-4o-mini", llm_provider="openai"
    )
    assert is_context_overflow(error)


def openai_backed_litellm(server: FakeLLMServer) -> types.ModuleType:
    """A stand-in for the litellm module: its two calls forwarded to the real openai client at
    the fake server, the way litellm forwards an "openai/..." model."""
    module = types.ModuleType("litellm")
    client = openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
    async_client = openai.AsyncOpenAI(
        base_url=server.openai_base_url, api_key="test", max_retries=0
    )

    def completion(model: str, **params: Any) -> Any:
        return client.chat.completions.create(model=model.removeprefix("openai/"), **params)

    async def acompletion(model: str, **params: Any) -> Any:
        return await async_client.chat.completions.create(
            model=model.removeprefix("openai/"), **params
        )

    module.completion = completion  # type: ignore[attr-defined]
    module.acompletion = acompletion  # type: ignore[attr-defined]
    module.close = async_client.close  # type: ignore[attr-defined]
    return module


async def test_requests_and_failures_go_through_litellms_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each call goes through `litellm.completion` / `acompletion` with the sectioned prompt,
    `max_tokens` and the extra keywords given; a failure there raises SummarizerError."""
    with FakeLLMServer() as server:
        stand_in = openai_backed_litellm(server)
        monkeypatch.setitem(sys.modules, "litellm", stand_in)
        summarizer = LiteLLMSummarizer("openai/gpt-4o-mini", max_output_tokens=300, user="ctx")
        request = build_request([Message("user", "rename src/app.py to src/main.py")])
        result = summarizer(request)
        assert result.text and result.model == "gpt-4o-mini"
        assert (await summarizer.acall(request)) == result
        server.mode = "error"
        with pytest.raises(SummarizerError):
            await summarizer.acall(request)
        await stand_in.close()
    sent = server.requests[0].body
    assert sent["messages"][0] == {"role": "system", "content": request.instructions}
    assert (sent["max_tokens"], sent["user"]) == (300, "ctx")
    assert "max_completion_tokens" not in sent
