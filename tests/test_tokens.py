"""The heuristic counter, choosing a counter by name, and counting whole requests."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from conftest import transcript_params
from ctxfold.errors import InvalidInputError
from ctxfold.messages import Message, ToolCall
from ctxfold.messages.jsonl import read_jsonl
from ctxfold.protocols import TokenCounter
from ctxfold.tokens import (
    REPLY_PRIMING_TOKENS,
    HeuristicCounter,
    TiktokenCounter,
    cached,
    count_messages,
    counter,
    encoding_for_model,
)
from ctxfold.tokens.heuristic import CALL_OVERHEAD, MESSAGE_OVERHEAD

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file from the repository and return its text.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]


def test_heuristic_is_characters_over_four_rounded_up() -> None:
    """Bare text costs its length / 4, rounded up."""
    heuristic = HeuristicCounter()
    for text in ["", "a", "abcd", "abcde", "x" * 4001]:
        assert heuristic.count_text(text) == math.ceil(len(text) / 4)


def test_heuristic_says_it_estimates() -> None:
    """The heuristic's name says it is an estimate and `exact` is False."""
    heuristic = HeuristicCounter()
    assert not heuristic.exact
    assert "estimate" in heuristic.name


def test_heuristic_message_adds_a_documented_overhead() -> None:
    """A message costs its characters / 4 plus the per-message overhead."""
    message = Message("user", "x" * 40)
    assert HeuristicCounter().count_message(message) == 10 + MESSAGE_OVERHEAD


@pytest.mark.guarantee("tool-calls-counted")
def test_heuristic_counts_tool_call_names_arguments_and_ids() -> None:
    """a tool call's id, name and arguments are charged, plus a per-call overhead."""
    heuristic = HeuristicCounter()
    call = ToolCall("call_abc", "run_tests", '{"path": "tests/test_io.py", "verbose": true}')
    message = Message("assistant", None, (call,))
    chars = len(call.id) + len(call.name) + len(call.arguments)
    assert heuristic.count_message(message) == (
        MESSAGE_OVERHEAD + CALL_OVERHEAD + math.ceil(chars / 4)
    )
    two_calls = Message("assistant", None, (call, call))
    assert heuristic.count_message(two_calls) > heuristic.count_message(message)


@pytest.mark.guarantee("tool-calls-counted")
def test_tool_result_id_and_name_are_counted() -> None:
    """a tool result pays for its tool_call_id and name, not only its text."""
    heuristic = HeuristicCounter()
    bare = Message("tool", "ok", tool_call_id="c")
    longer_id = Message("tool", "ok", tool_call_id="call_" + "9" * 40, name="bash")
    assert heuristic.count_message(longer_id) > heuristic.count_message(bare)


@pytest.mark.parametrize("make", [HeuristicCounter, lambda: TiktokenCounter("o200k_base")])
@pytest.mark.guarantee("tool-schemas-counted")
def test_tool_schemas_cost_tokens(make: type[HeuristicCounter]) -> None:
    """tool schemas count against the budget; more tools cost more."""
    tokens = make()
    assert tokens.count_tools([]) == 0
    one = tokens.count_tools(TOOLS)
    assert one > tokens.count_text("read_file")
    assert tokens.count_tools(TOOLS * 2) == 2 * one


@pytest.mark.transcripts
@pytest.mark.parametrize("path", transcript_params())
def test_heuristic_stays_near_the_tokenizer_on_real_transcripts(path: Path) -> None:
    """On a real agent run, the heuristic total is within 30% of the o200k count, so a budget
    built on it stays meaningful when the exact extra is missing."""
    messages = read_jsonl(path)
    estimate = count_messages(HeuristicCounter(), messages)
    exact = count_messages(TiktokenCounter("o200k_base"), messages)
    assert 0.7 * exact <= estimate <= 1.3 * exact


@pytest.mark.parametrize(
    ("spec", "name", "exact"),
    [
        ("heuristic", "heuristic (estimate: characters / 4)", False),
        ("auto", "o200k_base", True),
        ("o200k_base", "o200k_base", True),
        ("cl100k_base", "cl100k_base", True),
        ("gpt-4o", "o200k_base", True),
        ("openai/gpt-4.1-mini-2025-04-14", "o200k_base", True),
        ("o3-mini", "o200k_base", True),
        ("gpt-5", "o200k_base", True),
        ("gpt-4", "cl100k_base", True),
        ("gpt-3.5-turbo-0125", "cl100k_base", True),
        ("claude-sonnet-4-5", "o200k_base (approximation for claude-sonnet-4-5)", False),
        ("some-new-model", "o200k_base (approximation for some-new-model)", False),
    ],
)
def test_counter_says_what_it_counts_with(spec: str, name: str, exact: bool) -> None:
    """counter(spec) picks the tokenizer for an encoding or model, and its name and `exact`
    say whether counts are the model's own or a stand-in."""
    chosen = counter(spec)
    assert isinstance(chosen, TokenCounter)
    assert (chosen.name, chosen.exact) == (name, exact)


def test_unreleased_openai_snapshots_map_by_family() -> None:
    """An OpenAI model the catalog does not list yet still gets its family's tokenizer."""
    assert encoding_for_model("gpt-4o-2031-01-01") == ("o200k_base", True)
    assert encoding_for_model("o4-mini-deep-research") == ("o200k_base", True)
    assert encoding_for_model("gpt-3.5-turbo-instruct") == ("cl100k_base", True)


def test_empty_counter_spec_is_an_error() -> None:
    """counter("") is refused with a message listing what it accepts."""
    with pytest.raises(InvalidInputError, match="'auto', 'heuristic'"):
        counter("  ")


def test_count_messages_adds_reply_priming_and_tools_once() -> None:
    """A request costs its messages, the reply priming once, and its tool schemas."""
    heuristic = HeuristicCounter()
    messages = [Message("system", "be brief"), Message("user", "hello there")]
    per_message = sum(heuristic.count_message(m) for m in messages)
    assert count_messages(heuristic, messages) == per_message + REPLY_PRIMING_TOKENS
    assert count_messages(heuristic, messages, TOOLS) == (
        per_message + REPLY_PRIMING_TOKENS + heuristic.count_tools(TOOLS)
    )
    assert count_messages(heuristic, []) == 0


class _Recording(HeuristicCounter):
    """A heuristic that remembers which messages it was asked to count."""

    def __init__(self) -> None:
        self.seen: list[Message] = []

    def count_message(self, message: Message) -> int:
        self.seen.append(message)
        return super().count_message(message)


def test_cached_counter_counts_each_message_object_once() -> None:
    """Recounting a list through `cached` counts each message object only the first time,
    with the same totals."""
    inner = _Recording()
    wrapped = cached(inner)
    messages = [Message("user", f"question {i}") for i in range(50)]
    first = count_messages(wrapped, messages)
    second = count_messages(wrapped, messages)
    assert first == second == count_messages(HeuristicCounter(), messages)
    assert len(inner.seen) == 50
    assert (wrapped.name, wrapped.exact) == (inner.name, inner.exact)


def test_cached_counter_tells_equal_but_distinct_messages_apart_safely() -> None:
    """A new message object gets its own count, even one created after an old one is gone."""
    wrapped = cached(HeuristicCounter(), maxsize=2)
    for i in range(10):
        message = Message("user", "y" * (4 * i))
        assert wrapped.count_message(message) == MESSAGE_OVERHEAD + i
        del message
