"""What a message puts on the wire, as strings: the fields both counters measure.

Both the heuristic and the tokenizer count the same fields, so that switching counters changes
how each string is measured, never which strings are measured (behaviour `tool-calls-counted`: tool
call names, arguments and ids count, not only the text).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ctxfold.errors import InvalidInputError
from ctxfold.messages import Message, ToolCall
from ctxfold.messages._show import show


def message_strings(message: Message) -> list[str]:
    """The content, author name and tool_call_id of a message (empty ones left out).

    The role is not listed: counters charge it as part of their per-message overhead.
    """
    # filter() rather than a comprehension: every appended message is counted through here.
    return list(filter(None, (message.content, message.name, message.tool_call_id)))


def call_strings(call: ToolCall) -> tuple[str, str, str]:
    """The id, tool name and argument text of one tool call."""
    return (call.id, call.name, call.arguments)


def tools_json(tools: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each tool schema as compact JSON, the text a provider turns into the tool preamble."""
    # default=str: a schema holding a non-JSON value (an enum, a type) is still measured, not lost.
    return [
        json.dumps(tool, ensure_ascii=False, separators=(",", ":"), default=str) for tool in tools
    ]


def not_text(value: object) -> InvalidInputError:
    """The error for a `count_text` of something that is not a string (None, bytes, a message):
    a TypeError from deep in a tokenizer would not say which argument was wrong."""
    return InvalidInputError(
        f"count_text takes a str, not {type(value).__name__}: {show(value)}"
        + ("; count a Message with count_message" if isinstance(value, Message) else "")
    )
