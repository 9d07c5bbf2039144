"""`AnthropicSummarizer`: summaries from a Claude model via the Messages API.

Needs the `anthropic` package (``pip install 'ctxfold[anthropic]'``). Without a client, the SDK
builds one from its usual environment variables (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL); ctxfold
itself reads none. Each call sends ctxfold's sectioned instructions as the system prompt and one
user message holding the stretch as a fenced record to read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxfold.errors import MissingDependencyError
from ctxfold.protocols import TokenCounter
from ctxfold.summarizers._llm import DEFAULT_MAX_OUTPUT, SDKSummarizer, read_answer
from ctxfold.summarizers.request import SummaryRequest, SummaryResult

if TYPE_CHECKING:
    import anthropic


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
    notes = []
    if getattr(response, "stop_reason", None) == "max_tokens":
        notes.append("the answer was cut off at the output token limit")
    usage = getattr(response, "usage", None)
    return read_answer(
        text,
        request,
        model=getattr(response, "model", None) or model,
        input_tokens=int(getattr(usage, "input_tokens", 0) or 0),
        output_tokens=int(getattr(usage, "output_tokens", 0) or 0),
        notes=notes,
    )


def _import_anthropic() -> Any:
    try:
        import anthropic
    except ImportError as exc:
        raise MissingDependencyError("AnthropicSummarizer", "anthropic", "anthropic") from exc
    return anthropic


class AnthropicSummarizer(SDKSummarizer):
    """Summarizes with a Claude model through the official `anthropic` SDK.

    - `model`: the model name, e.g. ``"claude-haiku-4-5"``; its window comes from the catalog
      unless `window` (tokens) is given.
    - `client` / `async_client`: an `anthropic.Anthropic` / `anthropic.AsyncAnthropic`. When
      only one is given, the other is made with the same key, base URL, timeout and retries;
      when neither is, the SDK reads its environment variables.
    - `max_output_tokens`: cap on each answer, in tokens (default 2,048); the Messages API
      requires one.
    - `timeout` (seconds) and `max_retries`: applied to every call when given; None keeps the
      client's own.
    - `temperature`: None (the API's default) unless given.
    - `counter`: counts the prompt to keep it inside the window (default: the heuristic).
    """

    provider = "Anthropic"
    prefix = "anthropic"

    def __init__(
        self,
        model: str,
        client: anthropic.Anthropic | None = None,
        *,
        async_client: anthropic.AsyncAnthropic | None = None,
        max_output_tokens: int = DEFAULT_MAX_OUTPUT,
        timeout: float | None = None,
        max_retries: int | None = None,
        window: int | None = None,
        temperature: float | None = None,
        counter: TokenCounter | None = None,
    ) -> None:
        self._sdk = _import_anthropic()
        super().__init__(
            model,
            client,
            async_client,
            timeout=timeout,
            max_retries=max_retries,
            window=window,
            max_output_tokens=max_output_tokens,
            counter=counter,
        )
        self.temperature = temperature

    def _new_client(self, asynchronous: bool, twin: Any) -> Any:
        make = self._sdk.AsyncAnthropic if asynchronous else self._sdk.Anthropic
        return make(**_settings_of(twin))

    def _params(self, request: SummaryRequest) -> dict[str, Any]:
        return messages_params(
            self.model,
            request,
            max_tokens=self.answer_tokens(request),
            temperature=self.temperature,
        )

    def _send(self, request: SummaryRequest) -> SummaryResult:
        client = self.sync_client()
        try:
            response = client.messages.create(**self._params(request))
        except self._sdk.APIError as exc:
            raise self.failure(exc) from exc
        return read_message(response, request, self.model)

    async def _asend(self, request: SummaryRequest) -> SummaryResult:
        client = self.async_client_for_call()
        try:
            response = await client.messages.create(**self._params(request))
        except self._sdk.APIError as exc:
            raise self.failure(exc) from exc
        return read_message(response, request, self.model)


def _settings_of(client: Any) -> dict[str, Any]:
    """The connection settings of one client, to build its sync or async twin (none: the SDK's
    defaults and environment variables apply)."""
    if client is None:
        return {}
    return {
        "api_key": client.api_key,
        "auth_token": client.auth_token,
        "base_url": client.base_url,
        "timeout": client.timeout,
        "max_retries": client.max_retries,
    }
