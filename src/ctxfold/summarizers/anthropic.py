"""`AnthropicSummarizer`: summaries from a Claude model via the Messages API.

Needs the `anthropic` package (``pip install 'ctxfold[anthropic]'``). Without a client, the SDK
builds one from its usual environment variables (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL); ctxfold
itself reads none. Each call sends ctxfold's sectioned instructions as the system prompt and one
user message holding the stretch as a fenced record to read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ctxfold.summarizers._llm import SDKSummarizer, read_answer
from ctxfold.summarizers.request import SummaryRequest, SummaryResult

if TYPE_CHECKING:
    import anthropic  # noqa: F401 - names the client types in the quoted base class


def messages_params(
    model: str, request: SummaryRequest, *, max_tokens: int, temperature: float | None
) -> dict[str, Any]:
    """The keyword arguments of `messages.create` for one summary request."""
    params: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "system": request.instructions,
        "messages": [{"role": "user", "content": request.record}],
    }
    if temperature is not None:
        params["temperature"] = temperature
    return params


def read_message(response: Any, request: SummaryRequest, model: str) -> SummaryResult:
    """A Messages API response as a `SummaryResult`: its text blocks joined (thinking and tool
    blocks are not part of the summary)."""
    blocks = getattr(response, "content", None) or []
    text = "".join(block.text for block in blocks if getattr(block, "type", None) == "text")
    cut_off = getattr(response, "stop_reason", None) == "max_tokens"
    usage = ("input_tokens", "output_tokens")
    return read_answer(text, request, response, model=model, usage=usage, cut_off=cut_off)


class AnthropicSummarizer(SDKSummarizer["anthropic.Anthropic", "anthropic.AsyncAnthropic"]):
    """Summarizes with a Claude model through the official `anthropic` SDK.

    `model` is a model name such as ``"claude-haiku-4-5"``; `client` / `async_client` are an
    `anthropic.Anthropic` / `anthropic.AsyncAnthropic` (the SDK reads ANTHROPIC_API_KEY and
    ANTHROPIC_BASE_URL when neither is given). `temperature` is left to the API unless given.
    The Messages API requires an answer limit: `max_output_tokens`, 2,048 by default. The other
    keywords (`window`, `timeout`, `max_retries`, `counter`, `redact`) are `SDKSummarizer`'s;
    `redact` scrubs secrets from what is sent by default.
    """

    provider = "Anthropic"
    prefix = "anthropic"
    default_temperature = None
    sdk = "anthropic"
    extra = "anthropic"
    client_classes = ("Anthropic", "AsyncAnthropic")
    twin_settings = ("api_key", "auth_token", "base_url", "timeout", "max_retries")

    def _create(self, client: Any) -> Callable[..., Any]:
        return client.messages.create  # type: ignore[no-any-return]

    def _params(self, request: SummaryRequest, *, max_tokens: int) -> dict[str, Any]:
        return messages_params(
            self.model, request, max_tokens=max_tokens, temperature=self.temperature
        )

    def _read(self, response: Any, request: SummaryRequest) -> SummaryResult:
        return read_message(response, request, self.model)
