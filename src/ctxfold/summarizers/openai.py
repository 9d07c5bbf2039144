"""`OpenAISummarizer`: summaries from an OpenAI (or OpenAI-compatible) model via Chat Completions.

Needs the `openai` package (``pip install 'ctxfold[openai]'``). Without a client, the SDK builds
one from its usual environment variables (OPENAI_API_KEY, OPENAI_BASE_URL); ctxfold itself reads
none. Each call sends two messages: a system message with ctxfold's sectioned instructions and a
user message holding the stretch as a fenced record to read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxfold.errors import MissingDependencyError
from ctxfold.protocols import TokenCounter
from ctxfold.summarizers._llm import DEFAULT_MAX_OUTPUT, SDKSummarizer, read_answer
from ctxfold.summarizers.request import SummaryRequest, SummaryResult

if TYPE_CHECKING:
    import openai


def chat_params(
    model: str, request: SummaryRequest, *, max_tokens: int, temperature: float | None
) -> dict[str, Any]:
    """The keyword arguments of `chat.completions.create` for one summary request.

    >>> from ctxfold.summarizers.prompt import build_request
    >>> from ctxfold.messages import Message
    >>> params = chat_params("gpt-4o-mini", build_request([Message("user", "hi")]),
    ...                      max_tokens=500, temperature=0)
    >>> [m["role"] for m in params["messages"]]
    ['system', 'user']
    """
    params: dict[str, Any] = {
        "model": model,
        "messages": [
            {"role": "system", "content": request.instructions},
            {"role": "user", "content": request.record},
        ],
        "max_completion_tokens": max_tokens,
    }
    if temperature is not None:
        params["temperature"] = temperature
    return params


def read_chat_completion(response: Any, request: SummaryRequest, model: str) -> SummaryResult:
    """A Chat Completions response (or anything shaped like one) as a `SummaryResult`."""
    choices = getattr(response, "choices", None) or []
    choice = choices[0] if choices else None
    text = choice.message.content if choice is not None else None
    notes = []
    if choice is not None and choice.finish_reason == "length":
        notes.append("the answer was cut off at the output token limit")
    usage = getattr(response, "usage", None)
    return read_answer(
        text,
        request,
        model=getattr(response, "model", None) or model,
        input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        notes=notes,
    )


def _import_openai() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise MissingDependencyError("OpenAISummarizer", "openai", "openai") from exc
    return openai


class OpenAISummarizer(SDKSummarizer):
    """Summarizes with an OpenAI chat model through the official `openai` SDK.

    - `model`: the model name, e.g. ``"gpt-4o-mini"``; its window comes from the catalog
      unless `window` (tokens) is given.
    - `client` / `async_client`: an `openai.OpenAI` / `openai.AsyncOpenAI`. When only one is
      given, the other is made with the same key, base URL, timeout and retries; when neither
      is, the SDK reads its environment variables.
    - `max_output_tokens`: cap on each answer, in tokens (default 2,048).
    - `timeout` (seconds) and `max_retries`: applied to every call when given; None keeps the
      client's own.
    - `temperature`: 0 by default; None leaves it out (some reasoning models refuse it).
    - `counter`: counts the prompt to keep it inside the window (default: the heuristic).

    >>> summarizer = OpenAISummarizer("gpt-4o-mini")  # doctest: +SKIP
    >>> compactor = Compactor(Budget.for_model("gpt-4o"), summarizer=summarizer)  # doctest: +SKIP
    """

    provider = "OpenAI"
    prefix = "openai"

    def __init__(
        self,
        model: str,
        client: openai.OpenAI | None = None,
        *,
        async_client: openai.AsyncOpenAI | None = None,
        max_output_tokens: int = DEFAULT_MAX_OUTPUT,
        timeout: float | None = None,
        max_retries: int | None = None,
        window: int | None = None,
        temperature: float | None = 0,
        counter: TokenCounter | None = None,
    ) -> None:
        self._sdk = _import_openai()
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
        make = self._sdk.AsyncOpenAI if asynchronous else self._sdk.OpenAI
        return make(**_settings_of(twin))

    def _params(self, request: SummaryRequest) -> dict[str, Any]:
        return chat_params(
            self.model,
            request,
            max_tokens=self.answer_tokens(request),
            temperature=self.temperature,
        )

    def _send(self, request: SummaryRequest) -> SummaryResult:
        client = self.sync_client()
        try:
            response = client.chat.completions.create(**self._params(request))
        except self._sdk.APIError as exc:
            raise self.failure(exc) from exc
        return read_chat_completion(response, request, self.model)

    async def _asend(self, request: SummaryRequest) -> SummaryResult:
        client = self.async_client_for_call()
        try:
            response = await client.chat.completions.create(**self._params(request))
        except self._sdk.APIError as exc:
            raise self.failure(exc) from exc
        return read_chat_completion(response, request, self.model)


def _settings_of(client: Any) -> dict[str, Any]:
    """The connection settings of one client, to build its sync or async twin (none: the SDK's
    defaults and environment variables apply)."""
    if client is None:
        return {}
    return {
        "api_key": client.api_key,
        "base_url": client.base_url,
        "organization": client.organization,
        "project": client.project,
        "timeout": client.timeout,
        "max_retries": client.max_retries,
    }
