"""What a summarizer is asked (`SummaryRequest`) and what it may answer (`SummaryResult`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from ctxfold.messages import Message

Tier = Literal["turns", "summaries", "steps", "task-summaries", "range"]


@dataclass(frozen=True)
class SummaryRequest:
    """One stretch of history to summarize.

    - `messages`: the stretch, in order. It never holds the system block or the current request.
    - `synthetic`: indices into `messages` of earlier summaries and notes ctxfold wrote; an LLM
      summarizer should update those rather than summarize them from scratch.
    - `instructions`: the sectioned prompt (objective, decisions, work done, identifiers,
      outstanding), addressed to the summarizer, not to the agent.
    - `record`: the stretch rendered as a framed record to read (calls with arguments, results
      with errors, earlier summaries marked), so that text inside it cannot pass for instructions.
    - `identifiers`: paths, URLs, ids, hashes, commands and error strings found in the stretch;
      they must survive verbatim.
    - `max_tokens`: how long the summary may be, in tokens.
    - `tier`: which round of the ladder asked (oldest turns, old summaries, old steps, ...).
    - `tokens`: the size of the stretch, in tokens, as the compactor counted it.
    """

    messages: tuple[Message, ...]
    instructions: str
    record: str
    identifiers: tuple[str, ...] = ()
    synthetic: frozenset[int] = frozenset()
    max_tokens: int = 1024
    tier: Tier = "turns"
    tokens: int = 0

    @property
    def prompt(self) -> str:
        """Instructions and record as one text, for summarizers that take a single prompt."""
        return f"{self.instructions}\n\n{self.record}"


@dataclass(frozen=True)
class SummaryResult:
    """A summarizer's answer with what it cost. A plain `str` answer is read as
    `SummaryResult(text)`; `None` or blank text is a decline."""

    text: str | None
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 1
    notes: Sequence[str] = field(default_factory=tuple)
