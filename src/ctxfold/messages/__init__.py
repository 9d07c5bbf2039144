"""Messages, provider adapters, validity and structure."""

from ctxfold.messages._values import ROLES, Message, Role, ToolCall

__all__ = ["ROLES", "Message", "Role", "ToolCall"]
