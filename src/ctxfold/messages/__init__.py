"""Messages, provider adapters, validity and structure."""

from ctxfold.messages._values import ROLES, Message, Role, ToolCall
from ctxfold.messages.anthropic import from_anthropic, to_anthropic
from ctxfold.messages.jsonl import detect_format, read_jsonl, write_jsonl
from ctxfold.messages.openai import from_openai, to_openai
from ctxfold.messages.validity import Problem, is_valid, repair, validate

__all__ = [
    "ROLES",
    "Message",
    "Problem",
    "Role",
    "ToolCall",
    "detect_format",
    "from_anthropic",
    "from_openai",
    "is_valid",
    "read_jsonl",
    "repair",
    "to_anthropic",
    "to_openai",
    "validate",
    "write_jsonl",
]
