"""A token counter for tests whose figures can be worked out by hand.

Real counters (a tokenizer, the heuristic) make a test's numbers depend on how text happens to
split. `FixedCounter` charges one token per whitespace-separated word, so a test can build a
message of exactly the size it needs and state its budget in round numbers::

    counter = FixedCounter()
    counter.count_message(Message("user", "word " * 100))   # 100 words + 2 = 102
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxfold.errors import ConfigurationError
from ctxfold.messages import Message


class FixedCounter:
    """Counts one token per word, plus fixed charges per message, call and tool schema.

    - `per_message`: tokens every message costs on top of its words (default 2).
    - `per_call`: tokens every tool call costs on top of the words of its name and arguments
      (default 1).
    - `per_tool`: tokens each tool schema passed as ``tools=`` costs, whatever its size
      (default 10).

    Words are whitespace-separated runs in the content, the author name, the tool_call_id, and
    each call's id, name and arguments. Deterministic and free of side effects, as the
    `TokenCounter` protocol requires.

    >>> FixedCounter().count_message(Message("user", "three short words"))
    5
    """

    name = "fixed (one token per word)"
    exact = False

    def __init__(self, per_message: int = 2, per_call: int = 1, per_tool: int = 10) -> None:
        for label, value in (
            ("per_message", per_message),
            ("per_call", per_call),
            ("per_tool", per_tool),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigurationError(f"{label} must be a whole number >= 0, not {value!r}")
        self.per_message = per_message
        self.per_call = per_call
        self.per_tool = per_tool

    def count_text(self, text: str) -> int:
        """One token per whitespace-separated word."""
        return len(text.split())

    def count_message(self, message: Message) -> int:
        """`per_message`, plus the words of the message, plus each call's charge and words."""
        tokens = self.per_message
        for text in (message.content, message.name, message.tool_call_id):
            if text:
                tokens += self.count_text(text)
        for call in message.tool_calls:
            tokens += self.per_call
            tokens += sum(self.count_text(s) for s in (call.id, call.name, call.arguments))
        return tokens

    def count_tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """`per_tool` tokens per schema."""
        return self.per_tool * len(tools)

    def __repr__(self) -> str:
        return (
            f"FixedCounter(per_message={self.per_message}, per_call={self.per_call}, "
            f"per_tool={self.per_tool})"
        )


__all__ = ["FixedCounter"]
