"""ctxfold's own frames: how a summary or a note that ctxfold wrote is recognised in any list.

Every summary ctxfold projects opens with `SUMMARY_MARK`, every note about dropped history with
`NOTE_MARK`. The marks are plain text at the start of the content, so they survive every form a
history travels in (the log, OpenAI and Anthropic messages, JSONL files, a caller's own
serialisation), and nothing is added to what a provider is sent: an unknown key in a message
would be refused with a 400.

Recognising them lets a history that left ctxfold come back as what it is: the list API reads a
framed summary as an earlier summary rather than as the user's request, and the Anthropic adapter
and the validator send a framed system or opening assistant message as the user message the
Messages API accepts there.
"""

from __future__ import annotations

from typing import Literal

from ctxfold.messages._values import Message

SUMMARY_MARK = "[ctxfold: summary of earlier work in this conversation"
"""How every summary ctxfold writes begins (see `ctxfold.summarizers.record.frame_summary`)."""

NOTE_MARK = "[ctxfold: earlier history dropped"
"""How every note about dropped history begins (see `ctxfold.pipeline.notes`)."""

FrameKind = Literal["summary", "note"]


def frame_kind(message: Message) -> FrameKind | None:
    """ "summary" or "note" when `message` is one ctxfold wrote, else None.

    A tool result or a message with tool calls is never a frame, whatever its text.

    >>> frame_kind(Message("user", "[ctxfold: earlier history dropped: 3 messages ...]"))
    'note'
    >>> frame_kind(Message("user", "please summarize earlier work")) is None
    True
    """
    if message.role == "tool" or message.tool_calls:
        return None
    text = message.text
    if text.startswith(SUMMARY_MARK):
        return "summary"
    if text.startswith(NOTE_MARK):
        return "note"
    return None
