"""What a compaction run reports: `CompactionStart` before, `CompactionReport` after
(`run-reported`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ctxfold.events import Event
from ctxfold.pipeline.base import StrategyEffect

Reason = Literal["threshold", "overflow", "manual", "callback"]


@dataclass(frozen=True)
class CompactionStart:
    """Sent to `on_start` listeners before a run plans anything."""

    session_id: str | None
    reason: Reason
    tokens_before: int
    target: int


@dataclass(frozen=True)
class CompactionReport:
    """One compaction run, landed or not.

    Token figures are counts in the compactor's counter units. `fits` says whether the result
    is within `target`; when it is not, `pinned_tokens` shows whether what no strategy can give
    up already exceeds it (`fits-or-smallest`): the pinned messages, plus one note (or less) for
    each gap between them. `landed` is False when nothing was appended (declined, nothing to do, or
    a conflict that re-planning could not resolve).
    """

    session_id: str | None
    reason: Reason
    tokens_before: int
    tokens_after: int
    target: int
    fits: bool
    pinned_tokens: int
    strategies: tuple[StrategyEffect, ...] = ()
    summarizer_calls: int = 0
    summarizer_input_tokens: int = 0
    summarizer_output_tokens: int = 0
    summarizer_model: str | None = None
    stretch_tokens: int = 0
    """History tokens handed to summarizers in this run."""
    identifiers_kept: int = 0
    identifiers_left_out: int = 0
    left_out: tuple[str, ...] = ()
    summaries: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    duration_s: float = 0.0
    landed: bool = False
    error: str | None = None
    events: tuple[Event, ...] = field(default=(), repr=False)

    @property
    def first_seq(self) -> int | None:
        return self.events[0].seq if self.events else None

    @property
    def last_seq(self) -> int | None:
        return self.events[-1].seq if self.events else None

    @property
    def tokens_saved(self) -> int:
        return self.tokens_before - self.tokens_after

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (events as their seqs)."""
        out = asdict(self)
        out["strategies"] = [s.to_dict() for s in self.strategies]
        out["events"] = [e.seq for e in self.events]
        out["first_seq"], out["last_seq"] = self.first_seq, self.last_seq
        out["left_out"] = list(self.left_out)
        out["summaries"] = list(self.summaries)
        out["notes"] = list(self.notes)
        return out

    def describe(self) -> str:
        """One line for logs."""
        steps = ", ".join(f"{s.name} {s.tokens_before}->{s.tokens_after}" for s in self.strategies)
        state = "landed" if self.landed else "not landed"
        fit = "fits" if self.fits else "over target"
        error = f"; error: {self.error}" if self.error else ""
        return (
            f"compaction ({self.reason}) {state}: {self.tokens_before} -> {self.tokens_after} "
            f"tokens, target {self.target}, {fit}; {steps or 'no strategy ran'}; "
            f"{self.summarizer_calls} summarizer call(s){error}"
        )
