"""What a summarizer is asked (`SummaryRequest`) and what it may answer (`SummaryResult`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ctxfold.messages import Message

Tier = Literal["turns", "summaries", "steps", "task-summaries", "range"]

Sections = Mapping[str, Sequence[str]]
"""A summary as data: section name (``"Objective"``, ``"Decisions"``, ``"Work done"``,
``"Identifiers"``, ``"Outstanding"``) to its items, in order."""


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
    - `tokens`: the size of the stretch as it stands in the view, in tokens, as the compactor
      counted it: what the summary replaces.
    - `previous`: the sections of the earlier summaries in the stretch, merged section by
      section (objectives and identifiers united, decisions and work appended), as data; None
      when the stretch holds none or the request was built without them. A summarizer updates
      these rather than summarizing the summaries' text again; the record then shows each
      earlier summary as a pointer to them.
    - `read_tokens`: tokens of what the summarizer reads: the original messages (masks undone)
      and the earlier summaries, as the compactor counted them; 0 when not counted (then
      `tokens` stands for it).

    `messages` are the stretch as it was logged, masks undone (a cleared tool result is read
    with its full output), redacted when a redactor is configured; earlier summaries and notes
    stay themselves.
    """

    messages: tuple[Message, ...]
    instructions: str
    record: str
    identifiers: tuple[str, ...] = ()
    synthetic: frozenset[int] = frozenset()
    max_tokens: int = 1024
    tier: Tier = "turns"
    tokens: int = 0
    previous: Sections | None = None
    read_tokens: int = 0

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
