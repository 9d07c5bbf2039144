"""`LiteLLMSummarizer`: summaries from any of the providers LiteLLM reaches.

Needs the `litellm` package (``pip install 'ctxfold[litellm]'``), imported only when a
`LiteLLMSummarizer` is made. LiteLLM reads each provider's keys from its usual environment
variables; ctxfold reads none. Requests and answers have the Chat Completions shape, so the
prompt and the reading of the answer are the OpenAI summarizer's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ctxfold.summarizers._llm import LLMOptions, LLMSummarizer, import_extra
from ctxfold.summarizers.openai import chat_params, read_chat_completion
from ctxfold.summarizers.request import SummaryRequest, SummaryResult


class LiteLLMSummarizer(LLMSummarizer):
    """Summarizes through `litellm.completion` / `litellm.acompletion`.

    - `model`: a LiteLLM model name, e.g. ``"gemini/gemini-2.0-flash"`` or
      ``"ollama/llama3.1"``; its window comes from ctxfold's catalog unless `window` is given.
    - `max_output_tokens`, `window`, `temperature`, `counter`, `redact`: as for
      `OpenAISummarizer` (redaction is on by default).
    - any other keyword (``api_base``, ``timeout``, ``num_retries``, ...) goes to every
      LiteLLM call unchanged.

    Any exception LiteLLM raises becomes a `SummarizerError` with it chained;
    `is_context_overflow` still recognises its `ContextWindowExceededError` through the chain.
    """

    provider = "LiteLLM"
    prefix = "litellm"

    def __init__(self, model: str, **kwargs: Any) -> None:
        self._litellm = import_extra("litellm", "LiteLLMSummarizer", "litellm")
        options = {key: kwargs.pop(key) for key in LLMOptions.__optional_keys__ if key in kwargs}
        super().__init__(model, **options)
        self.kwargs = kwargs

    def _api_errors(self) -> tuple[type[BaseException], ...]:
        return (Exception,)  # LiteLLM's errors share no base class of their own

    def _endpoint(self, *, asynchronous: bool) -> Callable[..., Any]:
        return self._litellm.acompletion if asynchronous else self._litellm.completion  # type: ignore[no-any-return]

    def _params(self, request: SummaryRequest, *, max_tokens: int) -> dict[str, Any]:
        params = chat_params(
            self.model, request, max_tokens=max_tokens, temperature=self.temperature
        )
        # LiteLLM translates `max_tokens` for every provider; the newer OpenAI name it may not.
        params["max_tokens"] = params.pop("max_completion_tokens")
        return {**params, **self.kwargs}

    def _read(self, response: Any, request: SummaryRequest) -> SummaryResult:
        return read_chat_completion(response, request, self.model)
