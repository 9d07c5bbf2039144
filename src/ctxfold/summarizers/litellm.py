"""`LiteLLMSummarizer`: summaries from any of the providers LiteLLM reaches.

Needs the `litellm` package (``pip install 'ctxfold[litellm]'``), imported only when a
`LiteLLMSummarizer` is made. LiteLLM reads each provider's keys from its usual environment
variables; ctxfold reads none. Requests and answers have the Chat Completions shape, so the
prompt and the reading of the answer are the OpenAI summarizer's.
"""

from __future__ import annotations

from typing import Any

from ctxfold.errors import MissingDependencyError
from ctxfold.protocols import TokenCounter
from ctxfold.summarizers._llm import DEFAULT_MAX_OUTPUT, LLMSummarizer
from ctxfold.summarizers.openai import chat_params, read_chat_completion
from ctxfold.summarizers.request import SummaryRequest, SummaryResult


def _import_litellm() -> Any:
    try:
        import litellm
    except ImportError as exc:
        raise MissingDependencyError("LiteLLMSummarizer", "litellm", "litellm") from exc
    return litellm


class LiteLLMSummarizer(LLMSummarizer):
    """Summarizes through `litellm.completion` / `litellm.acompletion`.

    - `model`: a LiteLLM model name, e.g. ``"gemini/gemini-2.0-flash"`` or
      ``"ollama/llama3.1"``; its window comes from ctxfold's catalog unless `window` is given.
    - `max_output_tokens`, `window`, `temperature`, `counter`: as for `OpenAISummarizer`.
    - any other keyword (``api_base``, ``timeout``, ``num_retries``, ...) goes to every
      LiteLLM call unchanged.

    Any exception LiteLLM raises becomes a `SummarizerError` with it chained;
    `is_context_overflow` still recognises its `ContextWindowExceededError` through the chain.
    """

    provider = "LiteLLM"
    prefix = "litellm"

    def __init__(
        self,
        model: str,
        *,
        max_output_tokens: int = DEFAULT_MAX_OUTPUT,
        window: int | None = None,
        temperature: float | None = 0,
        counter: TokenCounter | None = None,
        **kwargs: Any,
    ) -> None:
        self._litellm = _import_litellm()
        super().__init__(model, window=window, max_output_tokens=max_output_tokens, counter=counter)
        self.temperature = temperature
        self.kwargs = kwargs

    def _params(self, request: SummaryRequest) -> dict[str, Any]:
        params = chat_params(
            self.model,
            request,
            max_tokens=self.answer_tokens(request),
            temperature=self.temperature,
        )
        # LiteLLM translates `max_tokens` for every provider; the newer OpenAI name it may not.
        params["max_tokens"] = params.pop("max_completion_tokens")
        return {**params, **self.kwargs}

    def _send(self, request: SummaryRequest) -> SummaryResult:
        try:
            response = self._litellm.completion(**self._params(request))
        except Exception as exc:  # LiteLLM's errors share no base class of their own
            raise self.failure(exc) from exc
        return read_chat_completion(response, request, self.model)

    async def _asend(self, request: SummaryRequest) -> SummaryResult:
        try:
            response = await self._litellm.acompletion(**self._params(request))
        except Exception as exc:  # LiteLLM's errors share no base class of their own
            raise self.failure(exc) from exc
        return read_chat_completion(response, request, self.model)
