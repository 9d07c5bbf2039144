"""The verbatim recent tail (`recent-tail-kept`): a token tail (`keep_recent_tokens`), a message
tail (`keep_count`), and a floor of `min_messages` messages whenever the target allows it."""

from __future__ import annotations

import pytest

from ctxfold.compactor import compact_messages
from ctxfold.errors import BudgetError
from ctxfold.messages import Message
from ctxfold.pipeline import Pipeline, Summarize
from ctxfold.testing.counters import FixedCounter
from ctxfold.testing.doubles import FunctionSummarizer
from ctxfold.tokens import Budget
from tests._histories import agent_history

COUNTER = FixedCounter()
SHORT = "## Objective\n- fix the bugs\n## Work done\n- read the modules"


def history(task_steps: int = 6, output: int = 300) -> list[Message]:
    """Two finished turns, then the current request and `task_steps` steps of `output` words."""
    return agent_history(2, steps=2, output_words=output, task_steps=task_steps)


def verbatim_tail(before: list[Message], after: list[Message]) -> int:
    """How many of the newest messages came through unchanged."""
    count = 0
    for old, new in zip(reversed(before), reversed(after), strict=False):
        if old != new:
            break
        count += 1
    return count


def compact(messages: list[Message], budget: Budget, target: int) -> list[Message]:
    out = compact_messages(
        messages,
        budget,
        pipeline=Pipeline([Summarize()]),
        summarizer=FunctionSummarizer.returning(SHORT),
        counter=COUNTER,
        target=target,
    )
    assert out.report.landed
    return out.messages


@pytest.mark.guarantee("recent-tail-kept")
def test_keep_count_keeps_that_many_newest_messages_verbatim() -> None:
    """`keep_count=8` with no token tail: the eight newest messages stay as they were, and the
    step before them is summarized."""
    messages = history()
    out = compact(messages, Budget(window=100_000, keep_recent_tokens=0, keep_count=8), 1800)
    assert verbatim_tail(messages, out) == 8


@pytest.mark.guarantee("recent-tail-kept")
def test_the_longer_of_the_token_tail_and_the_message_tail_is_kept() -> None:
    """Beside `keep_recent_tokens`, `keep_count` widens the tail when it asks for more messages,
    and changes nothing when the token tail is longer already."""
    messages = history()
    by_tokens = Budget(window=100_000, keep_recent_tokens=900, min_messages=0)
    both = Budget(window=100_000, keep_recent_tokens=900, keep_count=8, min_messages=0)
    few = Budget(window=100_000, keep_recent_tokens=900, keep_count=2, min_messages=0)
    assert verbatim_tail(messages, compact(messages, by_tokens, 1800)) == 6
    assert verbatim_tail(messages, compact(messages, both, 1800)) == 8
    assert verbatim_tail(messages, compact(messages, few, 1800)) == 6


@pytest.mark.guarantee("recent-tail-kept")
def test_the_tail_keeps_min_messages_whenever_the_target_allows() -> None:
    """At a small target the token tail is capped at half the target, which here leaves four
    messages; the tail still keeps `min_messages` (6) since the target can take them."""
    messages = history()
    budget = Budget(window=100_000, keep_recent_tokens=8000)
    assert budget.min_messages == 6
    out = compact(messages, budget, 1200)
    assert verbatim_tail(messages, out) >= 6
    few = Budget(window=100_000, keep_recent_tokens=8000, min_messages=0)
    assert verbatim_tail(messages, compact(messages, few, 1200)) == 4


@pytest.mark.guarantee("recent-tail-kept")
@pytest.mark.guarantee("fits-or-smallest")
def test_a_target_too_small_for_the_message_tail_keeps_fewer() -> None:
    """When keeping `keep_count` messages would make the target unreachable, the tail keeps
    fewer and the run still reaches the target."""
    messages = history()
    out = compact_messages(
        messages,
        Budget(window=100_000, keep_recent_tokens=0, keep_count=12),
        summarizer=FunctionSummarizer.returning(SHORT),
        counter=COUNTER,
        target=1000,
    )
    assert out.report.fits
    assert verbatim_tail(messages, out.messages) < 12


def test_keep_count_must_be_a_count() -> None:
    """A negative or fractional keep_count is a `BudgetError`."""
    for bad in (-1, 2.5):
        with pytest.raises(BudgetError, match="keep_count"):
            Budget(window=10_000, keep_count=bad)  # type: ignore[arg-type]
