"""Tally: O(1) running totals per item, and the provider-usage anchor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import transcript_params
from ctxfold.errors import InvalidInputError
from ctxfold.messages import Message, ToolCall
from ctxfold.messages.jsonl import read_jsonl
from ctxfold.tokens import REPLY_PRIMING_TOKENS, HeuristicCounter, Tally, count_messages
from ctxfold.tokens.tally import TextCounts

TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]


class _Counting(HeuristicCounter):
    """A heuristic that counts how often it is asked to count a message."""

    def __init__(self) -> None:
        self.calls = 0

    def count_message(self, message: Message) -> int:
        self.calls += 1
        return super().count_message(message)


def _messages(n: int) -> list[Message]:
    out: list[Message] = []
    for i in range(n):
        if i % 3 == 0:
            out.append(Message("user", f"step {i}: look at src/module_{i}.py"))
        elif i % 3 == 1:
            call = ToolCall(f"call_{i}", "read_file", f'{{"path": "src/module_{i}.py"}}')
            out.append(Message("assistant", None, (call,)))
        else:
            out.append(
                Message("tool", "def f():\n    return 1\n" * i, tool_call_id=f"call_{i - 1}")
            )
    return out


def test_total_matches_a_full_recount() -> None:
    """The tally's total equals counting the whole request from scratch, tools included."""
    heuristic = HeuristicCounter()
    messages = _messages(30)
    tally = Tally(heuristic, tools=TOOLS)
    for item_id, message in enumerate(messages, start=1):
        tally.add(item_id, message)
    assert tally.total == count_messages(heuristic, messages, TOOLS)
    assert tally.estimate == tally.total
    # The items alone: what a replay reports as a request's size.
    assert tally.items_total == sum(heuristic.count_message(m) for m in messages)
    assert len(tally) == 30


@pytest.mark.transcripts
@pytest.mark.parametrize("path", transcript_params())
def test_total_matches_a_recount_on_real_transcripts(path: Path) -> None:
    """On a real agent run, appending message by message keeps the total equal to a recount."""
    heuristic = HeuristicCounter()
    messages = read_jsonl(path)
    tally = Tally(heuristic)
    for item_id, message in enumerate(messages, start=1):
        tally.add(item_id, message)
    assert tally.total == count_messages(heuristic, messages)


def test_each_message_is_counted_once() -> None:
    """Appending and re-reading the estimate never recounts earlier messages."""
    counting = _Counting()
    tally = Tally(counting)
    for item_id, message in enumerate(_messages(200), start=1):
        tally.add(item_id, message)
        _ = tally.estimate
        _ = tally.total
    assert counting.calls == 200


def test_remove_and_replace_keep_the_total_right() -> None:
    """Removing an item subtracts its count; replacing one (a masked result) recounts only it."""
    heuristic = HeuristicCounter()
    messages = _messages(9)
    tally = Tally(heuristic)
    for item_id, message in enumerate(messages, start=1):
        tally.add(item_id, message)
    removed = tally.remove(3)
    assert removed == heuristic.count_message(messages[2])
    masked = Message("tool", "[output cleared]", tool_call_id="call_4")
    assert tally.replace(6, masked) == heuristic.count_message(masked)
    assert tally.count(6) == heuristic.count_message(masked)
    remaining = [m for i, m in enumerate(messages, start=1) if i not in (3, 6)] + [masked]
    assert tally.total == count_messages(heuristic, remaining)
    assert tally.items_total == sum(heuristic.count_message(m) for m in remaining)
    assert 3 not in tally


def test_empty_tally_is_zero() -> None:
    """An empty tally costs nothing, not even the reply priming."""
    tally = Tally(HeuristicCounter())
    assert tally.total == tally.estimate == 0
    tally.add(1, Message("user", "hi"))
    tally.remove(1)
    assert tally.total == 0


def test_unknown_and_duplicate_items_are_clear_errors() -> None:
    """Adding an id twice or touching an id the tally lacks names the id."""
    tally = Tally(HeuristicCounter())
    tally.add(7, Message("user", "hi"))
    with pytest.raises(InvalidInputError, match="item 7 is already"):
        tally.add(7, Message("user", "again"))
    for action in (tally.remove, tally.count):
        with pytest.raises(InvalidInputError, match="item 8 is not"):
            action(8)


def test_anchored_estimate_is_reported_tokens_plus_what_came_after() -> None:
    """After a usage report, the estimate is the provider's figure plus the new messages."""
    heuristic = HeuristicCounter()
    tally = Tally(heuristic)
    for item_id, message in enumerate(_messages(6), start=1):
        tally.add(item_id, message)
    tally.anchor(5_000)
    assert tally.anchored
    assert tally.estimate == 5_000
    new = Message("user", "now run the tests")
    tally.add(7, new)
    assert tally.estimate == 5_000 + heuristic.count_message(new)
    tally.remove(7)
    assert tally.estimate == 5_000


@pytest.mark.guarantee("usage-anchor-dropped-after-edit")
def test_dropping_the_anchor_counts_afresh() -> None:
    """after a compaction drops the anchor, the estimate is the counted total again."""
    tally = Tally(HeuristicCounter())
    for item_id, message in enumerate(_messages(6), start=1):
        tally.add(item_id, message)
    tally.anchor(9_999)
    tally.drop_anchor()
    assert not tally.anchored
    assert tally.estimate == tally.total


@pytest.mark.guarantee("usage-anchor-dropped-after-edit")
def test_removing_an_anchored_item_drops_the_anchor() -> None:
    """Editing what the provider measured makes its figure stale, so it is no longer used."""
    tally = Tally(HeuristicCounter())
    for item_id, message in enumerate(_messages(6), start=1):
        tally.add(item_id, message)
    tally.anchor(9_999)
    tally.replace(2, Message("assistant", "summary of the earlier work"))
    assert not tally.anchored
    assert tally.estimate == tally.total


@pytest.mark.guarantee("tool-schemas-counted")
def test_changing_tools_changes_the_total_and_drops_the_anchor() -> None:
    """tool schemas count; changing them invalidates the provider's last figure."""
    heuristic = HeuristicCounter()
    tally = Tally(heuristic)
    tally.add(1, Message("user", "hi"))
    before = tally.total
    tally.anchor(100)
    tally.set_tools(TOOLS)
    assert not tally.anchored
    assert tally.total == before + heuristic.count_tools(TOOLS)


def test_negative_usage_is_refused() -> None:
    """A negative prompt token figure is an error naming the value."""
    with pytest.raises(InvalidInputError, match="-1"):
        Tally(HeuristicCounter()).anchor(-1)


_ops = st.lists(
    st.tuples(st.sampled_from(["add", "remove", "replace", "anchor"]), st.integers(0, 15)),
    max_size=60,
)


@given(_ops)
def test_any_sequence_of_edits_keeps_the_total_equal_to_a_recount(
    ops: list[tuple[str, int]],
) -> None:
    """Whatever adds, removes, replacements and anchors happen, the unanchored total equals a
    recount of the items present, and an anchored estimate is the figure plus later additions."""
    heuristic = HeuristicCounter()
    tally = Tally(heuristic)
    present: dict[int, Message] = {}
    anchor: int | None = None
    added_since: dict[int, Message] = {}
    for op, item_id in ops:
        message = Message("user", "z" * (item_id * 7 + len(present)))
        if op == "add" and item_id not in present:
            tally.add(item_id, message)
            present[item_id] = message
            if anchor is not None:
                added_since[item_id] = message
        elif op == "remove" and item_id in present:
            tally.remove(item_id)
            del present[item_id]
            if item_id in added_since:
                del added_since[item_id]
            else:
                anchor, added_since = None, {}
        elif op == "replace" and item_id in present:
            tally.replace(item_id, message)
            present[item_id] = message
            if item_id not in added_since:
                anchor, added_since = None, {}
            if anchor is not None:
                added_since[item_id] = message
        elif op == "anchor":
            anchor, added_since = item_id * 100, {}
            tally.anchor(anchor)
    expected_total = count_messages(heuristic, present.values())
    assert tally.total == expected_total
    if anchor is None:
        assert tally.estimate == expected_total
    else:
        since = sum(heuristic.count_message(m) for m in added_since.values())
        assert tally.estimate == anchor + since
    assert tally.total in (0, sum(tally.count(i) for i in present) + REPLY_PRIMING_TOKENS)


class _TextCounting:
    """HeuristicCounter's counts, and how many texts it was asked to count."""

    name = "counting"
    exact = False

    def __init__(self) -> None:
        self.inner = HeuristicCounter()
        self.texts = 0

    def count_text(self, text: str) -> int:
        self.texts += 1
        return self.inner.count_text(text)

    def count_message(self, message: Message) -> int:
        return self.inner.count_message(message)

    def count_tools(self, tools: Any) -> int:
        return self.inner.count_tools(tools)


def test_text_counts_give_the_counters_count_and_count_each_remembered_text_once() -> None:
    """TextCounts answers what its counter answers; a text it still remembers is not counted
    again, and what it remembers stays within `max_chars` characters, the oldest going first
    (then counted again when asked)."""
    counter = _TextCounting()
    count = TextCounts(counter, max_chars=30)
    texts = ["alpha beta gamma", "delta epsilon", "zeta eta theta iota"]
    assert [count(t) for t in texts] == [counter.inner.count_text(t) for t in texts]
    assert counter.texts == 3
    assert count(texts[2]) == counter.inner.count_text(texts[2]) and counter.texts == 3
    assert count(texts[0]) == counter.inner.count_text(texts[0]) and counter.texts == 4
    long = "x" * 40  # longer than max_chars: counted, never kept
    assert count(long) == count(long) == counter.inner.count_text(long)
    assert counter.texts == 6


def test_counts_added_by_id_are_taken_as_given() -> None:
    """`add_counts` adds items with counts made earlier, as `add` with `tokens` does one at a
    time: into the total, and into what came after an anchor; an id already there is refused
    and nothing of that call is added."""
    heuristic = HeuristicCounter()
    one, many = Tally(heuristic), Tally(heuristic)
    counts = {1: 12, 2: 7, 5: 30}
    for item_id, tokens in counts.items():
        one.add(item_id, Message("user", "never counted"), tokens=tokens)
    many.add_counts(counts)
    assert many.total == one.total == 49 + REPLY_PRIMING_TOKENS
    assert [many.count(i) for i in counts] == [12, 7, 30]
    many.anchor(100)
    many.add_counts({6: 4, 7: 5})
    assert many.estimate == 109
    with pytest.raises(InvalidInputError, match="item 2 is already"):
        many.add_counts({8: 1, 2: 3})
    assert 8 not in many and many.estimate == 109
