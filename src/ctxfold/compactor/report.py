"""What a compaction run reports: `CompactionStart` before, `CompactionReport` after
(`run-reported`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from ctxfold.events import Event
from ctxfold.messages import Message
from ctxfold.pipeline.accounting import StrategyEffect
from ctxfold.summarizers.redact import redact_secrets

Reason = Literal["threshold", "overflow", "manual", "callback"]
"""Why a run ran: the automatic trigger, a provider's overflow, a manual call, or an
`on_compact` callback that picked ranges itself."""

Outcome = Literal["landed", "within-target", "declined", "failed", "conflict", "stale"]
"""How a run ended:

- "landed": its edits were appended (`fits` says whether they reached the target);
- "within-target": the history already fit, so nothing was done;
- "declined": no edit worked (the summarizer declined or echoed, nothing smaller was found, or
  nothing more may be given up); nothing was appended;
- "failed": a summarizer or callback raised inside the automatic trigger; `error` says what,
  and nothing was appended (a manual compact raises instead);
- "conflict": other writers kept changing the history, and the run gave up after planning again
  and retrying a bounded number of times; nothing was appended, the next trigger tries again;
- "stale": a background run's plan no longer held when it was to land (a compaction, mask, pin,
  retraction or reset landed after the history it read); it was dropped whole, nothing was
  appended, and the compactor plans again (`background-lands-by-the-same-rules`).
"""


@dataclass(frozen=True)
class CompactionStart:
    """Sent to `on_start` listeners before a run plans anything."""

    session_id: str | None
    reason: Reason
    tokens_before: int
    target: int


@dataclass(frozen=True)
class Trim:
    """What one landed edit took out of the model's view; `on_trim` listeners get one per edit,
    in log order, once the run's edits are stored (`trim-reported`).

    - `seq`: the seq of the compaction or mask event; `kind`: "summary", "note" or "mask";
      `strategy`: what made it ("summarize", "sliding_window", "clear_tool_results",
      "callback", ...); `reason`: why the run ran.
    - `first_seq`, `last_seq`: the first and last original log seqs it stands for; the
      originals stay in the log and can be recalled from there.
    - `removed`: the messages it took out, as the model last saw them (for a mask, the tool
      results as they were before it); `replacement`: what stands in their place (the summary or
      note, or each result's new content, in the same order).
    - `summary`: a summary's text before ctxfold framed it; None for notes and masks.
    - `tokens_before`, `tokens_after`: what `removed` and `replacement` take, in the compactor's
      counter units.
    """

    session_id: str | None
    seq: int
    kind: Literal["summary", "note", "mask"]
    strategy: str
    reason: Reason
    first_seq: int
    last_seq: int
    removed: tuple[Message, ...]
    replacement: tuple[Message, ...]
    summary: str | None
    tokens_before: int
    tokens_after: int


@dataclass(frozen=True)
class CompactionReport:
    """One compaction run, landed or not: `Compactor.compact` returns one every time.

    Token figures are counts in the compactor's counter units. `outcome` says how the run ended
    (see `Outcome`), and `landed` whether anything was appended; `error` holds the message of
    what failed or conflicted. `fits` says whether the result is within `target`; when it is
    not, `pinned_tokens` shows whether what no strategy can give up already exceeds it
    (`fits-or-smallest`): the pinned messages, plus one note (or less) for each gap between them.
    `notes` say why strategies stopped and what the summarizer reported.
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
    """Identifiers of the summarized stretches that the new summaries hold verbatim."""
    identifiers_restored: int = 0
    """Of those, how many a summarizer left out and ctxfold put back (`identifiers-survive`)."""
    identifiers_left_out: int = 0
    """Identifiers of the summarized stretches missing from the view for lack of room; they are
    listed in `left_out`."""
    left_out: tuple[str, ...] = ()
    summaries: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    duration_s: float = 0.0
    """Seconds from the start of the run to its end, landing included."""
    outcome: Outcome = "declined"
    error: str | None = None
    events: tuple[Event, ...] = field(default=(), repr=False)

    @property
    def landed(self) -> bool:
        """True when the run's edits were appended to the log."""
        return self.outcome == "landed"

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
        out["landed"] = self.landed
        out["left_out"] = list(self.left_out)
        out["summaries"] = list(self.summaries)
        out["notes"] = list(self.notes)
        return out

    def with_listener_error(self, listener: str, exc: BaseException) -> CompactionReport:
        """This report with what the `listener` ("on_start", "on_trim", "on_report") raised
        added to `error`, after any error it holds: in the automatic trigger a listener that
        raises is reported, never raised (`run-reported`, `trim-reported`)."""
        said = redact_secrets(f"{listener} raised {type(exc).__name__}: {exc}")
        return replace(self, error=said if self.error is None else f"{self.error}; {said}")

    def describe(self) -> str:
        """One line for logs."""
        steps = ", ".join(f"{s.name} {s.tokens_before}->{s.tokens_after}" for s in self.strategies)
        state = self.outcome
        fit = "fits" if self.fits else "over target"
        error = f"; error: {self.error}" if self.error else ""
        return (
            f"compaction ({self.reason}) {state}: {self.tokens_before} -> {self.tokens_after} "
            f"tokens, target {self.target}, {fit}; {steps or 'no strategy ran'}; "
            f"{self.summarizer_calls} summarizer call(s){error}"
        )
