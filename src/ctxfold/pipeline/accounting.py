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
from ctxfold.summarizers.identifiers import error_lines, extract_identifiers
from ctxfold.summarizers.redact import redact_secrets
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
    """Tokens of history summarizers read (each stretch counted once per request): the
    original messages, masks undone, and the earlier summaries in it."""
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
        self.stretch_tokens += request.read_tokens or request.tokens
        if answer is not None:
            self.summarizer_input_tokens += answer.input_tokens
            self.summarizer_output_tokens += answer.output_tokens
            self.summarizer_model = answer.model or self.summarizer_model
            self.notes.extend(answer.notes)

    def raised(self, exc: BaseException) -> None:
        """A summarizer or callback raised `exc`; its text is redacted before it goes into the
        report (and from there into logs and CLI output): an error can quote a secret."""
        self.errors.append(redact_secrets(f"{type(exc).__name__}: {exc}"))
        self.failure = self.failure or exc

    def applied(self, edit: Edit, replaced: Sequence[Item], view: WorkingView) -> None:
        """`edit` was applied to `view`; `replaced` are the items it took out."""
        if not isinstance(edit, Replace):
            self._masked(view)
            return
        if edit.identifiers is not None:
            self.identifiers_kept += edit.identifiers.kept
            self.identifiers_restored += edit.identifiers.added
            self.left_out.extend(edit.identifiers.left_out)
        if edit.summary is not None:
            self.summaries.append(edit.summary)
        dropped = [i for i in replaced if i.kind == "summary"]
        if edit.kind == "note" and dropped:
            # A dropped summary takes the identifiers it was keeping with it
            # (`identifiers-survive`): those no longer anywhere in the view are left out.
            self.left_out.extend(_lost_identifiers(view, dropped))

    def _masked(self, view: WorkingView) -> None:
        """The mask just applied to `view` (its last change): the error strings of each output
        it replaced are kept when the new text holds them (a placeholder quotes the error a
        failed output ended with), left out when nothing in the view does any more
        (`identifiers-survive`); a later summary of the stretch reads the originals again."""
        change = view.changes[-1]
        remaining: str | None = None
        for old, new in zip(change.removed, change.added, strict=True):
            if old.message.role != "tool":
                continue
            for error in dict.fromkeys(error_lines(old.unmasked.text)):
                if error in new.message.text:
                    self.identifiers_kept += 1
                    continue
                if remaining is None:
                    remaining = _view_text(view)
                if error not in remaining:
                    self.left_out.append(error)


def _view_text(view: WorkingView) -> str:
    return "\n".join(
        text for m in view.messages for text in (m.text, *(c.arguments for c in m.tool_calls))
    )


def _lost_identifiers(view: WorkingView, dropped_summaries: list[Item]) -> list[str]:
    remaining = _view_text(view)
    held: list[str] = []
    for item in dropped_summaries:
        # What its compaction recorded it held (quoted identifiers included), and what its text
        # shows, for a summary written before that was recorded.
        held += item.identifiers or ()
        held += extract_identifiers(item.message.text)
    return [i for i in dict.fromkeys(held) if i not in remaining]
