"""`OpenAISummarizer`: summaries from an OpenAI (or OpenAI-compatible) model via Chat Completions.

Needs the `openai` package (``pip install 'ctxfold[openai]'``). Without a client, the SDK builds
one from its usual environment variables (OPENAI_API_KEY, OPENAI_BASE_URL); ctxfold itself reads
none. Each call sends two messages: a system message with ctxfold's sectioned instructions and a
user message holding the stretch as a fenced record to read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ctxfold.errors import SummarizerError
from ctxfold.summarizers._llm import SDKSummarizer, read_answer
from ctxfold.summarizers.request import SummaryRequest, SummaryResult

if TYPE_CHECKING:
    import openai  # noqa: F401 - names the client types in the quoted base class


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
    if not choices:
        # Not a decline (an empty answer is one): the API sent no answer at all, which a proxy
        # or an overloaded server can do; said as a failure, so that it shows.
        raise SummarizerError(f"summarizer {model!r} got a response with no choices to read")
    choice = choices[0]
    text = choice.message.content
    cut_off = choice.finish_reason == "length"
    usage = ("prompt_tokens", "completion_tokens")
    return read_answer(text, request, response, model=model, usage=usage, cut_off=cut_off)


class OpenAISummarizer(SDKSummarizer["openai.OpenAI", "openai.AsyncOpenAI"]):
    """Summarizes with an OpenAI chat model through the official `openai` SDK.

    `model` is a model name such as ``"gpt-4o-mini"``; `client` / `async_client` are an
    `openai.OpenAI` / `openai.AsyncOpenAI` (the SDK reads OPENAI_API_KEY and OPENAI_BASE_URL
    when neither is given). `temperature` is 0 unless given; None leaves it out, which some
    reasoning models require. The other keywords (`window`, `max_output_tokens`, `timeout`,
    `max_retries`, `counter`, `redact`) are `SDKSummarizer`'s; `redact` scrubs secrets from what
    is sent by default.

    >>> summarizer = OpenAISummarizer("gpt-4o-mini")  # doctest: +SKIP
    >>> compactor = Compactor(Budget.for_model("gpt-4o"), summarizer=summarizer)  # doctest: +SKIP
    """

    provider = "OpenAI"
    prefix = "openai"
    sdk = "openai"
    extra = "openai"
    client_classes = ("OpenAI", "AsyncOpenAI")
    twin_settings = ("api_key", "base_url", "organization", "project", "timeout", "max_retries")

    def _create(self, client: Any) -> Callable[..., Any]:
        return client.chat.completions.create  # type: ignore[no-any-return]

    def _params(self, request: SummaryRequest, *, max_tokens: int) -> dict[str, Any]:
        return chat_params(self.model, request, max_tokens=max_tokens, temperature=self.temperature)

    def _read(self, response: Any, request: SummaryRequest) -> SummaryResult:
        return read_chat_completion(response, request, self.model)
