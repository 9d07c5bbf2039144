"""What every SDK-backed summarizer shares: the bound on its input, the drivers, reading answers.

A subclass supplies only the two sends (`_send`, `_asend`): one API call for one request, with
the request built and the response read by pure functions of its own module. Everything else,
splitting a stretch into pieces, combining them, summing usage, declining on an empty or echoed
answer, is here and in `chunking`, once for both sync and async callers.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any

from ctxfold.errors import ConfigurationError, SummarizerError
from ctxfold.protocols import TokenCounter
from ctxfold.summarizers.base import is_echo
from ctxfold.summarizers.chunking import Bound, adrive, bounded, drive
from ctxfold.summarizers.request import SummaryRequest, SummaryResult
from ctxfold.tokens.catalog import lookup
from ctxfold.tokens.heuristic import HeuristicCounter

DEFAULT_WINDOW = 32_000
"""Window assumed for a summarizer model the catalog does not know, in tokens (deliberately
modest: a piece too small costs an extra call, a piece too large costs a failed one)."""

DEFAULT_MAX_OUTPUT = 2_048
"""Default cap on each call's answer, in tokens."""


class LLMSummarizer(abc.ABC):
    """A summarizer that calls a chat model, keeping each call inside the model's window.

    Call it (sync) or `await summarizer.acall(request)` (async). The result is a
    `SummaryResult` with the model, the tokens read and written (summed over all calls) and the
    number of calls. An empty or echoed answer is a decline (text None, with a note); an API
    failure left after the SDK's own retries raises `SummarizerError` with the SDK error chained.
    """

    provider = "LLM"
    prefix = "llm"

    def __init__(
        self,
        model: str,
        *,
        window: int | None = None,
        max_output_tokens: int = DEFAULT_MAX_OUTPUT,
        counter: TokenCounter | None = None,
    ) -> None:
        if not model:
            raise ConfigurationError("a summarizer needs a model name")
        if max_output_tokens <= 0:
            raise ConfigurationError(f"max_output_tokens must be positive, not {max_output_tokens}")
        if window is not None and window <= max_output_tokens:
            raise ConfigurationError(
                f"window ({window} tokens) must be larger than max_output_tokens "
                f"({max_output_tokens})"
            )
        self.model = model
        self.name = f"{self.prefix}:{model}"
        """How reports name this summarizer, in the CLI's ``provider:MODEL`` form."""
        self.max_output_tokens = max_output_tokens
        self.window = window if window is not None else model_window(model)
        self.counter: TokenCounter = counter or HeuristicCounter()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r}, window={self.window})"

    def answer_tokens(self, request: SummaryRequest) -> int:
        """The `max_tokens` each call sends: the summary's length, capped by `max_output_tokens`."""
        return max(1, min(self.max_output_tokens, request.max_tokens))

    def bound(self, request: SummaryRequest) -> Bound:
        """How large one call for `request` may be."""
        return Bound(self.window, self.answer_tokens(request), self.counter)

    def __call__(self, request: SummaryRequest) -> SummaryResult:
        return drive(bounded(request, self.bound(request)), self._send)

    async def acall(self, request: SummaryRequest) -> SummaryResult:
        """The async form of calling the summarizer, on the SDK's async client."""
        return await adrive(bounded(request, self.bound(request)), self._asend)

    @abc.abstractmethod
    def _send(self, request: SummaryRequest) -> SummaryResult:
        """Send one request on the sync client."""

    @abc.abstractmethod
    async def _asend(self, request: SummaryRequest) -> SummaryResult:
        """Send one request on the async client."""

    def failure(self, exc: BaseException) -> SummarizerError:
        """The error to raise (from `exc`) when the API call failed after the SDK's retries."""
        return SummarizerError(
            f"{self.provider} summarizer {self.model!r} failed: {type(exc).__name__}: {exc}"
        )


class SDKSummarizer(LLMSummarizer):
    """An `LLMSummarizer` on a provider SDK with a sync and an async client.

    Either client may be given; the missing one is made on first use as the twin of the other
    (same key, base URL, timeout and retries), or from the SDK's own environment variables when
    neither is. `timeout` (seconds) and `max_retries`, when not None, apply to every call.
    """

    def __init__(
        self,
        model: str,
        client: Any,
        async_client: Any,
        *,
        timeout: float | None,
        max_retries: int | None,
        window: int | None,
        max_output_tokens: int,
        counter: TokenCounter | None,
    ) -> None:
        super().__init__(model, window=window, max_output_tokens=max_output_tokens, counter=counter)
        self.client = client
        self.async_client = async_client
        self.timeout = timeout
        self.max_retries = max_retries
        self._owned: list[Any] = []

    def _new_client(self, asynchronous: bool, twin: Any) -> Any:
        """A new SDK client (async or not) with the settings of `twin` (None: the defaults)."""

    def _with_options(self, client: Any) -> Any:
        options: dict[str, Any] = {}
        if self.timeout is not None:
            options["timeout"] = self.timeout
        if self.max_retries is not None:
            options["max_retries"] = self.max_retries
        return client.with_options(**options) if options else client

    def sync_client(self) -> Any:
        """The sync client every call goes through, made on first use when none was given."""
        if self.client is None:
            self.client = self._new_client(False, self.async_client)
            self._owned.append(self.client)
        return self._with_options(self.client)

    def async_client_for_call(self) -> Any:
        """The async client every `acall` goes through, made on first use when none was given."""
        if self.async_client is None:
            self.async_client = self._new_client(True, self.client)
            self._owned.append(self.async_client)
        return self._with_options(self.async_client)

    def close(self) -> None:
        """Close the sync client this summarizer made itself (clients passed in are the
        caller's to close)."""
        if self.client is not None and self.client in self._owned:
            self._owned.remove(self.client)
            self.client.close()
            self.client = None

    async def aclose(self) -> None:
        """Close the clients this summarizer made itself, async and sync."""
        if self.async_client is not None and self.async_client in self._owned:
            self._owned.remove(self.async_client)
            await self.async_client.close()
            self.async_client = None
        self.close()


def model_window(model: str) -> int:
    """The catalog's window for `model`, or `DEFAULT_WINDOW` when the catalog does not know it."""
    info = lookup(model)
    return info.window if info is not None else DEFAULT_WINDOW


def read_answer(
    text: str | None,
    request: SummaryRequest,
    *,
    model: str | None,
    input_tokens: int,
    output_tokens: int,
    notes: Sequence[str] = (),
) -> SummaryResult:
    """A model's answer as a `SummaryResult`: a decline (text None) when it is empty or when it
    merely repeats the prompt, with a note saying which."""
    found = list(notes)
    if not (text and text.strip()):
        found.append("the model answered with no text")
        text = None
    elif is_echo(text, request):
        found.append("the model echoed the prompt instead of summarizing; declined")
        text = None
    return SummaryResult(
        text=text,
        model=model,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        calls=1,
        notes=tuple(found),
    )
