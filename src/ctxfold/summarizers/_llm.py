"""What every LLM summarizer shares: the bound on its input, redaction, the sends, the clients.

A provider module supplies only what differs between APIs, as small declarations and pure
functions: the request's shape (`_params`), how a response reads (`_read`) and which SDK
function a call goes to (`_create`, or `_endpoint` for a client-less library). Everything else is
here and in `chunking`, once for sync and async callers: splitting a stretch into pieces and
combining them, redacting what is sent, turning SDK failures into `SummarizerError`, summing
usage, declining on an empty or echoed answer, and making and closing SDK clients.
"""

from __future__ import annotations

import abc
import enum
import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypedDict, TypeVar

from ctxfold.errors import ConfigurationError, MissingDependencyError, SummarizerError
from ctxfold.protocols import TokenCounter
from ctxfold.summarizers.base import is_echo
from ctxfold.summarizers.chunking import Bound, adrive, bounded, drive
from ctxfold.summarizers.redact import Redactor, redact_secrets
from ctxfold.summarizers.request import SummaryRequest, SummaryResult
from ctxfold.tokens.catalog import lookup
from ctxfold.tokens.heuristic import HeuristicCounter

if TYPE_CHECKING:
    from typing_extensions import Unpack

DEFAULT_WINDOW = 32_000
"""Window assumed for a summarizer model the catalog does not know, in tokens (deliberately
modest: a piece too small costs an extra call, a piece too large costs a failed one)."""

DEFAULT_MAX_OUTPUT = 2_048
"""Default cap on each call's answer, in tokens."""


class _Unset(enum.Enum):
    UNSET = "unset"


UNSET = _Unset.UNSET
"""Stands for "the provider's default" where None already means something (no temperature)."""


class LLMOptions(TypedDict, total=False):
    """The keyword arguments every LLM summarizer takes (see `LLMSummarizer`)."""

    window: int | None
    max_output_tokens: int
    temperature: float | _Unset | None
    counter: TokenCounter | None
    redact: Redactor | None


class LLMSummarizer(abc.ABC):
    """A summarizer that calls a chat model, keeping each call inside the model's window.

    - `model`: the model name; its window (tokens) comes from ctxfold's catalog unless `window`
      is given.
    - `max_output_tokens`: cap on each answer, in tokens (default 2,048).
    - `temperature`: the provider's default unless given (`default_temperature`); None leaves it
      out of the request (some reasoning models refuse it).
    - `counter`: counts the prompt to keep it inside the window (default: the heuristic).
    - `redact`: applied to everything sent that comes from the history (each message's content
      and tool-call arguments, and the record built from them) before it leaves the process;
      `redact_secrets` by default, so API keys, passwords and tokens in the history never reach
      the summarizer's provider (`secrets-not-sent`). None sends the history as it is.

    Call it (sync) or `await summarizer.acall(request)` (async). The result is a `SummaryResult`
    with the model, the tokens read and written (summed over all calls) and the number of
    calls. An empty or echoed answer is a decline (text None, with a note); an API failure left
    after the SDK's own retries raises `SummarizerError` with the SDK error chained.
    """

    provider: ClassVar[str] = "LLM"
    """How error messages name the provider."""
    prefix: ClassVar[str] = "llm"
    """The provider part of `name`, as in the CLI's ``provider:MODEL``."""
    default_temperature: ClassVar[float | None] = 0

    def __init__(
        self,
        model: str,
        *,
        window: int | None = None,
        max_output_tokens: int = DEFAULT_MAX_OUTPUT,
        temperature: float | _Unset | None = UNSET,
        counter: TokenCounter | None = None,
        redact: Redactor | None = redact_secrets,
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
        self.temperature = self.default_temperature if temperature is UNSET else temperature
        self.counter: TokenCounter = counter or HeuristicCounter()
        self.redact = redact

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r}, window={self.window})"

    def answer_tokens(self, request: SummaryRequest) -> int:
        """The `max_tokens` each call sends: the summary's length, capped by `max_output_tokens`."""
        return max(1, min(self.max_output_tokens, request.max_tokens))

    def bound(self, request: SummaryRequest) -> Bound:
        """How large one call for `request` may be."""
        return Bound(self.window, self.answer_tokens(request), self.counter)

    def outgoing(self, request: SummaryRequest) -> SummaryRequest:
        """`request` as this summarizer may send it: with `redact` applied to every message's
        content and tool-call arguments and to the record. Pieces and combining requests are
        built from these messages, so nothing unredacted is sent later either."""
        redact = self.redact
        if redact is None:
            return request
        messages = tuple(
            message.replace(
                content=redact(message.content) if message.content else message.content,
                tool_calls=tuple(
                    replace(call, arguments=redact(call.arguments)) for call in message.tool_calls
                ),
            )
            for message in request.messages
        )
        return replace(request, messages=messages, record=redact(request.record))

    def __call__(self, request: SummaryRequest) -> SummaryResult:
        return drive(bounded(self.outgoing(request), self.bound(request)), self._send)

    async def acall(self, request: SummaryRequest) -> SummaryResult:
        """The async form of calling the summarizer, on the SDK's async client."""
        return await adrive(bounded(self.outgoing(request), self.bound(request)), self._asend)

    def _send(self, request: SummaryRequest) -> SummaryResult:
        """One API call for one request that fits, on the sync side."""
        with self._failures():
            response = self._endpoint(asynchronous=False)(**self._request_params(request))
        return self._read(response, request)

    async def _asend(self, request: SummaryRequest) -> SummaryResult:
        """One API call for one request that fits, on the async side."""
        with self._failures():
            response = await self._endpoint(asynchronous=True)(**self._request_params(request))
        return self._read(response, request)

    def _request_params(self, request: SummaryRequest) -> dict[str, Any]:
        return self._params(request, max_tokens=self.answer_tokens(request))

    @contextmanager
    def _failures(self) -> Iterator[None]:
        try:
            yield
        except self._api_errors() as exc:
            # An API error can quote what was sent, key included (a proxy that echoes the
            # Authorization header): the message that travels on is redacted.
            said = redact_secrets(f"{type(exc).__name__}: {exc}")
            raise SummarizerError(
                f"{self.provider} summarizer {self.model!r} failed: {said}"
            ) from exc

    @abc.abstractmethod
    def _api_errors(self) -> tuple[type[BaseException], ...]:
        """What the library raises for a failed call (after its own retries)."""

    @abc.abstractmethod
    def _endpoint(self, *, asynchronous: bool) -> Callable[..., Any]:
        """The function one call goes to (a coroutine function when `asynchronous`)."""

    @abc.abstractmethod
    def _params(self, request: SummaryRequest, *, max_tokens: int) -> dict[str, Any]:
        """The keyword arguments of one call for `request`."""

    @abc.abstractmethod
    def _read(self, response: Any, request: SummaryRequest) -> SummaryResult:
        """One response as a `SummaryResult` (see `read_answer`)."""


ClientT = TypeVar("ClientT")
AsyncClientT = TypeVar("AsyncClientT")


class SDKSummarizer(LLMSummarizer, Generic[ClientT, AsyncClientT]):
    """An `LLMSummarizer` on a provider SDK with a sync and an async client.

    - `client` / `async_client`: the SDK's sync / async client. Either may be given; the missing
      one is made on first use as the twin of the other (same key, base URL, timeout and
      retries), or from the SDK's own environment variables when neither is.
    - `timeout` (seconds) and `max_retries`: applied to every call when given; None keeps the
      client's own.
    - every keyword of `LLMSummarizer` (`window`, `max_output_tokens`, `temperature`, `counter`,
      `redact`).

    A provider declares its SDK (`sdk`, `extra`), its client classes (`client_classes`), the
    client settings a twin copies (`twin_settings`) and which client method a call goes to
    (`_create`).
    """

    sdk: ClassVar[str]
    """The SDK's module name, imported when a summarizer is made."""
    extra: ClassVar[str]
    """The ctxfold extra that installs the SDK."""
    client_classes: ClassVar[tuple[str, str]]
    """The SDK's sync and async client class names."""
    twin_settings: ClassVar[tuple[str, ...]]
    """The client attributes a twin client is made with."""

    def __init__(
        self,
        model: str,
        client: ClientT | None = None,
        *,
        async_client: AsyncClientT | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        **options: Unpack[LLMOptions],
    ) -> None:
        self._sdk = import_extra(self.sdk, type(self).__name__, self.extra)
        super().__init__(model, **options)
        self.client: ClientT | None = client
        self.async_client: AsyncClientT | None = async_client
        self.timeout = timeout
        self.max_retries = max_retries
        self._owned: list[Any] = []

    @abc.abstractmethod
    def _create(self, client: Any) -> Callable[..., Any]:
        """The client method one call goes to, e.g. ``client.chat.completions.create``."""

    def _api_errors(self) -> tuple[type[BaseException], ...]:
        # ValueError: an answer that is not JSON (a proxy's error page with status 200), which
        # the SDK's parser raises as a bare JSONDecodeError.
        return (self._sdk.APIError, ValueError)

    def _endpoint(self, *, asynchronous: bool) -> Callable[..., Any]:
        client = self.async_client_for_call() if asynchronous else self.sync_client()
        return self._create(client)

    def _new_client(self, asynchronous: bool, twin: Any) -> Any:
        """A new SDK client (async or not) with the settings of `twin` (None: the defaults)."""
        make = getattr(self._sdk, self.client_classes[asynchronous])
        settings = (
            {} if twin is None else {name: getattr(twin, name) for name in self.twin_settings}
        )
        return make(**settings)

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
        client: Any = self.client
        if client is not None and client in self._owned:
            self._owned.remove(client)
            client.close()
            self.client = None

    async def aclose(self) -> None:
        """Close the clients this summarizer made itself, async and sync."""
        client: Any = self.async_client
        if client is not None and client in self._owned:
            self._owned.remove(client)
            await client.close()
            self.async_client = None
        self.close()


def import_extra(module: str, what: str, extra: str) -> Any:
    """Import an optional dependency, or raise `MissingDependencyError` with the pip command."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(what, module, extra) from exc


def model_window(model: str) -> int:
    """The catalog's window for `model`, or `DEFAULT_WINDOW` when the catalog does not know it."""
    info = lookup(model)
    return info.window if info is not None else DEFAULT_WINDOW


def read_answer(
    text: str | None,
    request: SummaryRequest,
    response: Any,
    *,
    model: str,
    usage: tuple[str, str],
    cut_off: bool,
) -> SummaryResult:
    """A model's answer as a `SummaryResult`: a decline (text None) when it is empty or when it
    merely repeats the prompt, with a note saying which.

    `response` gives the model that answered and the usage, read from its ``usage`` attribute
    under the provider's names for input and output tokens (`usage`); `cut_off` says the
    answer stopped at the output limit. `model` is the one asked, used when the response does
    not say.
    """
    notes = ["the answer was cut off at the output token limit"] if cut_off else []
    if not (text and text.strip()):
        notes.append("the model answered with no text")
        text = None
    elif is_echo(text, request):
        notes.append("the model echoed the prompt instead of summarizing; declined")
        text = None
    counts = getattr(response, "usage", None)
    return SummaryResult(
        text=text,
        model=getattr(response, "model", None) or model,
        input_tokens=int(getattr(counts, usage[0], 0) or 0),
        output_tokens=int(getattr(counts, usage[1], 0) or 0),
        calls=1,
        notes=tuple(notes),
    )
