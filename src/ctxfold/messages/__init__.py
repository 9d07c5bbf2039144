"""Messages, provider adapters, the JSONL transcript format, validity and structure."""

from ctxfold.messages._values import ROLES, Message, Role, ToolCall
from ctxfold.messages.anthropic import from_anthropic, to_anthropic
from ctxfold.messages.jsonl import detect_format, dumps_jsonl, read_jsonl, write_jsonl
from ctxfold.messages.openai import from_openai, to_openai
from ctxfold.messages.transcript import Transcript, read_transcript
from ctxfold.messages.validity import Fix, Problem, Repair, is_valid, plan_repair, repair, validate

__all__ = [
    "ROLES",
    "Fix",
    "Message",
    "Problem",
    "Repair",
    "Role",
    "ToolCall",
    "Transcript",
    "detect_format",
    "dumps_jsonl",
    "from_anthropic",
    "from_openai",
    "is_valid",
    "plan_repair",
    "read_jsonl",
    "read_transcript",
    "repair",
    "to_anthropic",
    "to_openai",
    "validate",
    "write_jsonl",
]
