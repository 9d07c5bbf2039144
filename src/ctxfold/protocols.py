"""The seams of ctxfold, as protocols. Each docstring says what an implementation must guarantee.

The store seam is not here: it is the abstract class `ctxfold.storage.StoreBase`, which every
store subclasses, since it carries the checks all stores share (`EventStore` names it too).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ctxfold.messages import Message
    from ctxfold.summarizers.request import SummaryRequest, SummaryResult


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens the way a model's tokenizer would (or estimates, when `exact` is False).

    Implementations must be deterministic and side-effect free: the same message always has the
    same count, so counts can be cached per message.
    """

    name: str
    """What counts, e.g. ``"o200k_base"`` or ``"heuristic (estimate: characters / 4)"``."""
    exact: bool
    """True when counts equal the tokenizer's; False for estimates."""

    def count_text(self, text: str) -> int: ...

    def count_message(self, message: Message) -> int:
        """Tokens of one message: content, tool call names and arguments, and overhead."""
        ...

    def count_tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """Tokens the tool schemas sent with a request take."""
        ...


class SyncSummarizer(Protocol):
    """Answers a `SummaryRequest` with summary text, a `SummaryResult`, or None to decline.

    Must not return text that merely repeats the request; may raise, which the compactor treats
    as a failed round (isolated inside automatic triggers, raised from a manual compact()).
    """

    def __call__(self, request: SummaryRequest) -> str | SummaryResult | None: ...


class AsyncSummarizer(Protocol):
    """The async form of `SyncSummarizer`, for `Compactor.acompact`."""

    def __call__(self, request: SummaryRequest) -> Awaitable[str | SummaryResult | None]: ...


Summarizer = SyncSummarizer | AsyncSummarizer
