"""The accounts of one run: what the summarizer was asked and answered, what each strategy did,
which identifiers were kept or left out, and why strategies stopped.

The pipeline (and a callback's context) write here as they mediate between strategies, the
summarizer and the view; strategies themselves only propose edits and say why they stopped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxfold.pipeline.proposals import Edit, Replace
from ctxfold.pipeline.view import WorkingView
from ctxfold.session.projection import Item
from ctxfold.summarizers.identifiers import extract_identifiers
from ctxfold.summarizers.request import SummaryRequest, SummaryResult


@dataclass(frozen=True)
class StrategyEffect:
    """What one strategy did in one run: tokens before and after it, and how many edits it made."""

    name: str
    tokens_before: int
    tokens_after: int
    edits: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "edits": self.edits,
        }


@dataclass
class Accounts:
    """What happened during one run, beyond the edits themselves. Token figures are in the
    run's counter units, except the summarizer's own input and output tokens (its model's)."""

    effects: list[StrategyEffect] = field(default_factory=list)
    summarizer_calls: int = 0
    summarizer_input_tokens: int = 0
    summarizer_output_tokens: int = 0
    summarizer_model: str | None = None
    stretch_tokens: int = 0
    """Tokens of history handed to summarizers (each stretch counted once per request)."""
    identifiers_kept: int = 0
    identifiers_restored: int = 0
    """Identifiers a summarizer left out that ctxfold put back into its summary."""
    left_out: list[str] = field(default_factory=list)
    summaries: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failure: BaseException | None = None
    """The first exception a summarizer or callback raised, kept so a manual compact can raise
    it (`auto-trigger-isolates-failures`)."""

    @property
    def identifiers_left_out(self) -> int:
        return len(self.left_out)

    def answered(self, request: SummaryRequest, answer: SummaryResult | None) -> None:
        """A summarizer answered `request` (None text: it declined)."""
        self.summarizer_calls += answer.calls if answer else 1
        self.stretch_tokens += request.tokens
        if answer is not None:
            self.summarizer_input_tokens += answer.input_tokens
            self.summarizer_output_tokens += answer.output_tokens
            self.summarizer_model = answer.model or self.summarizer_model
            self.notes.extend(answer.notes)

    def raised(self, exc: BaseException) -> None:
        """A summarizer or callback raised `exc`."""
        self.errors.append(f"{type(exc).__name__}: {exc}")
        self.failure = self.failure or exc

    def applied(self, edit: Edit, replaced: Sequence[Item], view: WorkingView) -> None:
        """`edit` was applied to `view`; `replaced` are the items it took out."""
        if not isinstance(edit, Replace):
            return
        if edit.identifiers is not None:
            self.identifiers_kept += edit.identifiers.kept
            self.identifiers_restored += edit.identifiers.added
            self.left_out.extend(edit.identifiers.left_out)
        if edit.summary is not None:
            self.summaries.append(edit.summary)
        dropped = [i.message.text for i in replaced if i.kind == "summary"]
        if edit.kind == "note" and dropped:
            # A dropped summary takes the identifiers it was keeping with it
            # (`identifiers-survive`): those no longer anywhere in the view are left out.
            self.left_out.extend(_lost_identifiers(view, dropped))


def _lost_identifiers(view: WorkingView, dropped_summaries: list[str]) -> list[str]:
    remaining = "\n".join(
        text for m in view.messages for text in (m.text, *(c.arguments for c in m.tool_calls))
    )
    return [i for i in extract_identifiers("\n".join(dropped_summaries)) if i not in remaining]
