"""Compacting a whole transcript once, for a given window: what ``ctxfold compact`` does.

`compact_messages` compacts as far as it can and reports; the result may still exceed the window
when what must stay (the system prompt, the current request, the newest step) is larger. A
transcript compacted to be sent must fit the window and be a history the provider accepts, so
`compact_transcript` holds the result to both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ctxfold.errors import BudgetError, InvalidHistoryError
from ctxfold.messages import Message, validate

if TYPE_CHECKING:
    from ctxfold.compactor import Compacted
    from ctxfold.messages.validity import Provider
    from ctxfold.protocols import TokenCounter
    from ctxfold.tokens import Budget


def compact_transcript(
    messages: Sequence[Message],
    budget: Budget,
    *,
    provider: Provider = "openai",
    summarizer: Any = None,
    counter: TokenCounter | None = None,
    redact: Callable[[str], str] | None = None,
) -> Compacted:
    """Compact `messages` toward `budget`'s target, for sending to `budget`'s window.

    Raises `BudgetError` when the messages that must stay take more than the window (no
    compaction can make the history sendable; a larger window can), and `InvalidHistoryError`
    when the result is not a valid history for `provider`, which would be a bug in ctxfold
    (`history-always-valid`). The input must itself be valid: read it with `read_transcript`.

    >>> from ctxfold.testing.transcripts import generate
    >>> from ctxfold.tokens import Budget
    >>> done = compact_transcript(generate(steps=40), Budget(window=16_000))
    >>> done.report.tokens_after <= done.report.target
    True
    """
    from ctxfold.compactor import compact_messages

    result = compact_messages(
        messages, budget, summarizer=summarizer, counter=counter, redact=redact
    )
    report = result.report
    needed = max(report.pinned_tokens, report.tokens_after)
    if needed > budget.window:
        raise BudgetError(
            f"the messages that must stay (system prompt, current request, newest step) take "
            f"{needed:,} tokens, more than the {budget.window:,}-token window; "
            "give a larger window"
        )
    errors = [p for p in validate(result.messages, provider) if p.severity == "error"]
    if errors:
        raise InvalidHistoryError(
            f"the compacted history is not valid for {provider} ({errors[0]}; "
            f"{len(errors)} problem(s) in all); this is a bug in ctxfold, please report it"
        )
    return result
