"""What a strategy yields: a summary call for the driver to answer, or an edit for the pipeline
to apply (or refuse).

Edits name view positions, valid at the moment they are yielded; the pipeline applies each one
at once and sends back whether it was applied.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass, field

from ctxfold.events import CompactionKind, IdentifierCounts, RecordedLedger
from ctxfold.messages import Message
from ctxfold.protocols import Summarizer
from ctxfold.summarizers.request import SummaryRequest


@dataclass(frozen=True)
class SummaryCall:
    """A request for a summary. `summarizer` None means the compactor's default summarizer.

    The answer sent back is a `SummaryResult` (None text for a decline); an exception the
    summarizer raised is thrown in at the yield instead."""

    request: SummaryRequest
    summarizer: Summarizer | None = None


@dataclass(frozen=True)
class Replace:
    """Put `message` in place of view positions `[start, end)`.

    Refused (the answer is False) when the message is no smaller than what it replaces. A range
    that is not bounded by safe cut points, or that covers a position in `protected` (default:
    the view's hard-pinned positions) or an item the application pinned, is a strategy's bug and
    raises `InvalidHistoryError`.

    The remaining fields go into the compaction event (see `ctxfold.events.Compaction`);
    `summary` is the summary's text before framing, for the report; `ledger` is the work
    ledger of what the message stands for, as its compaction records it (data, or the parts it
    is the merge of: `ctxfold.events.LedgerParts`).
    """

    start: int
    end: int
    message: Message
    kind: CompactionKind
    protected: Container[int] | None = None
    tier: str | None = None
    identifiers: IdentifierCounts | None = None
    summarizer: str | None = None
    dropped: int | None = None
    turns: int | None = None
    range: tuple[int, int] | None = None
    summary: str | None = None
    ledger: RecordedLedger | None = field(default=None, compare=False)


@dataclass(frozen=True)
class MaskResults:
    """New content for the tool results at these view positions (position → placeholder).

    Refused (False) unless the view gets smaller."""

    placeholders: Mapping[int, str]


Edit = Replace | MaskResults
Proposal = SummaryCall | Edit
