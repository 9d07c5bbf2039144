"""What a run may give up and how it writes: the configuration every strategy reads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ctxfold.protocols import TokenCounter

SummaryRole = Literal["user", "assistant", "system"]
"""The role summaries and notes are projected with."""

SUMMARY_ROLES: frozenset[str] = frozenset({"user", "assistant", "system"})


@dataclass(frozen=True)
class Rules:
    """The configuration of one run, the same for every strategy in it.

    - `counter`: counts new messages and summary text, in tokens.
    - `keep_steps`: the newest steps no strategy touches (default 1).
    - `keep_recent_tokens`: tokens at the end kept verbatim, widened to a safe cut point
      (default 0).
    - `keep_count`, `min_messages`: the tail also keeps at least this many of the newest
      messages, whenever the target allows (default 0 both).
    - `keep_user_tokens`: the user's own messages kept verbatim, in tokens (see
      `ctxfold.pipeline.user_words`); None (default) is the smaller of 20,000 and half the
      run's target.
    - `summary_role`: the role summaries and notes are written with (default "user").
    - `redact(text) -> text`: applied to every summary before it is stored
      (`summaries-redacted`).
    - `count_text(text) -> tokens`: how the run counts a bare text; None (default) is
      ``counter.count_text``. A compactor passes its `TextCounts`, which remembers counts from
      run to run; it must count as `counter` does.
    """

    counter: TokenCounter
    keep_steps: int = 1
    keep_recent_tokens: int = 0
    keep_count: int = 0
    min_messages: int = 0
    keep_user_tokens: int | None = None
    summary_role: SummaryRole = "user"
    redact: Callable[[str], str] | None = None
    count_text: Callable[[str], int] | None = None
