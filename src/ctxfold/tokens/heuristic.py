"""A tokenizer-free estimate: four characters to a token, plus a fixed cost per message.

It needs no dependency and no data, so it is always available. It is an estimate (`exact` is
False) and says so in its name. On the shared agent transcripts its totals come to between 0.77
and 1.08 times the o200k_base count: it runs low on short, structured messages (ids, numbers,
JSON) and high on long plain-text tool output. Budgets keep a reserve for that.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxfold.messages import Message
from ctxfold.tokens._parts import call_strings, message_strings, not_text, tools_json
from ctxfold.tokens.attachments import attachment_tokens

CHARS_PER_TOKEN = 4
"""Characters per token the heuristic assumes (counts round up)."""

MESSAGE_OVERHEAD = 4
"""Tokens charged per message for the role and the framing a chat format wraps around it."""

CALL_OVERHEAD = 3
"""Tokens charged per tool call for the framing around its id, name and arguments."""

TOOL_OVERHEAD = 3
"""Tokens charged per tool schema sent with a request."""


def _ceil_div(chars: int) -> int:
    return -(-chars // CHARS_PER_TOKEN)


class HeuristicCounter:
    """Estimates tokens as characters / 4 (rounded up) plus per-message and per-call overhead.

    A message costs ``MESSAGE_OVERHEAD`` (4) tokens plus its content, author name and
    tool_call_id; each tool call adds ``CALL_OVERHEAD`` (3) tokens plus its id, name and arguments.
    All characters of a message are summed before dividing, so a message is rounded up once.
    Images, documents and audio cost what their provider bills (`ctxfold.tokens.attachments`).

    >>> HeuristicCounter().count_text("twelve chars")
    3
    """

    name = "heuristic (estimate: characters / 4)"
    exact = False

    def count_text(self, text: str) -> int:
        """Tokens of a bare string: its length divided by 4, rounded up."""
        if not isinstance(text, str):
            raise not_text(text)
        return _ceil_div(len(text))

    def count_message(self, message: Message) -> int:
        """Tokens of one message, tool calls and attachments included."""
        chars = sum(len(s) for s in message_strings(message))
        for call in message.tool_calls:
            chars += sum(len(s) for s in call_strings(call))
        tokens = MESSAGE_OVERHEAD + CALL_OVERHEAD * len(message.tool_calls) + _ceil_div(chars)
        if message.extra:  # only kept provider parts can hold attachments
            tokens += attachment_tokens(message, self.count_text)
        return tokens

    def count_tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of the tool schemas: their compact JSON / 4, plus a few tokens per tool."""
        return sum(TOOL_OVERHEAD + _ceil_div(len(text)) for text in tools_json(tools))

    def __repr__(self) -> str:
        return "HeuristicCounter()"
