"""Recall as a tool the model calls: its schema for each provider, and one call's answer.

An agent wires it in two lines:

>>> import ctxfold
>>> tools = [ctxfold.recall_tool("openai")]          # sent with every request
>>> session = ctxfold.MemoryStore().session("agent-1")
>>> answer = session.call_recall('{"query": "TypeError"}')  # when the model calls "recall"

A call's arguments are read here; a bad one (not JSON, an unknown key, both or neither of query
and ref, a ref that names nothing) becomes a short error text the model can act on, logged on the
``ctxfold.recall`` logger, never an exception in the agent loop.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from ctxfold.errors import ConfigurationError, InvalidInputError
from ctxfold.session.recall.core import DEFAULT_MAX_TOKENS

if TYPE_CHECKING:
    from ctxfold.session import Session

log = logging.getLogger("ctxfold.recall")

NAME = "recall"
TOOL_MAX_TOKENS = 8000
"""The most tokens the model may ask one recall call for."""

DESCRIPTION = (
    "Recall original messages of this conversation that the context no longer shows: messages "
    "that ctxfold summarized, dropped or cleared to save room. Call it when a note, a summary or "
    "a cleared tool output says the originals are kept in the session log and you need their "
    "exact text (a file's content, an error message, a command's output, what the user wrote). "
    "Pass exactly one of: ref, the reference the note, summary or placeholder prints (a log "
    "item range such as '41-57' or 'log items 41–57', one item such as 'event 12', or a "
    "cleared result's call id); or query, words or an exact identifier to search for (a path, "
    "an error name, a command, an id). The answer quotes the originals as data, best matches "
    "first, within max_tokens tokens. Messages still in the context are not returned."
)

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": (
                "Words or an exact identifier to search for in the messages that are no longer "
                "shown, e.g. 'src/app/models.py' or 'KeyError: user_id'."
            ),
        },
        "ref": {
            "type": "string",
            "description": (
                "The reference a ctxfold note, summary or placeholder prints: '41-57' "
                "('log items 41–57'), 'event 12', 'log 12', or a cleared result's call id."
            ),
        },
        "max_tokens": {
            "type": "integer",
            "minimum": 1,
            "maximum": TOOL_MAX_TOKENS,
            "description": f"The most tokens to return (default {DEFAULT_MAX_TOKENS}).",
        },
    },
    "additionalProperties": False,
}

Provider = Literal["openai", "anthropic"]


def recall_tool(provider: Provider = "openai") -> dict[str, Any]:
    """The recall tool's schema, ready to send with a request to `provider`:

    - ``"openai"``: a Chat Completions tool, ``{"type": "function", "function": {...}}``;
    - ``"anthropic"``: a Messages API tool, ``{"name", "description", "input_schema"}``.

    Answer the model's calls with `Session.call_recall`.

    >>> recall_tool("anthropic")["name"]
    'recall'
    """
    parameters = json.loads(json.dumps(PARAMETERS))  # a fresh copy the caller may change
    if provider == "openai":
        return {
            "type": "function",
            "function": {"name": NAME, "description": DESCRIPTION, "parameters": parameters},
        }
    if provider == "anthropic":
        return {"name": NAME, "description": DESCRIPTION, "input_schema": parameters}
    raise ConfigurationError(f"provider must be 'openai' or 'anthropic', not {provider!r}")


def call_recall(session: Session, arguments: object) -> str:
    """The text answering one call of the recall tool in `session`; see `Session.call_recall`."""
    try:
        query, ref, max_tokens = read_arguments(arguments)
        return session.recall(query, ref=ref, max_tokens=max_tokens).text
    except InvalidInputError as exc:
        log.warning("session %r: recall call refused: %s", session.id, exc)
        return f"recall error: {exc}"


def read_arguments(arguments: object) -> tuple[str | None, str | None, int]:
    """A call's arguments (JSON text or a mapping) as ``(query, ref, max_tokens)``; an
    `InvalidInputError` names what is wrong."""
    if isinstance(arguments, (str, bytes)):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError as exc:
            raise InvalidInputError(
                f"the arguments must be a JSON object, not {arguments!r:.200} ({exc})"
            ) from None
    if not isinstance(arguments, Mapping):
        raise InvalidInputError(f"the arguments must be a JSON object, not {arguments!r:.200}")
    unknown = sorted(str(key) for key in arguments if key not in PARAMETERS["properties"])
    if unknown:
        raise InvalidInputError(
            f"unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; recall "
            "takes query or ref, and max_tokens"
        )
    # A model that fills every field sends the unused one empty: that means "not given".
    query = arguments.get("query")
    ref = arguments.get("ref")
    query = None if query == "" and ref not in (None, "") else query
    ref = None if ref == "" and query not in (None, "") else ref
    max_tokens = arguments.get("max_tokens")
    if max_tokens is None:
        max_tokens = DEFAULT_MAX_TOKENS
    if isinstance(max_tokens, float) and max_tokens.is_integer():
        max_tokens = int(max_tokens)
    if (
        isinstance(max_tokens, bool)
        or not isinstance(max_tokens, int)
        or not 1 <= max_tokens <= TOOL_MAX_TOKENS
    ):
        raise InvalidInputError(
            f"max_tokens must be a whole number from 1 to {TOOL_MAX_TOKENS}, not {max_tokens!r}"
        )
    return query, ref, max_tokens


class Recall:
    """The recall tool as an object the framework integrations offer the model: `name`,
    `description`, `parameters` (a JSON schema) and ``__call__(session, arguments)``, the
    answer text (the ``RecallTool`` shape of `ctxfold.integrations`).

    ``CtxfoldSession(..., recall=True)`` (and the LangChain and pydantic-ai integrations) use
    this one; pass ``recall=Recall()`` explicitly, or your own object of the same shape.
    """

    name = NAME
    description = DESCRIPTION

    def __init__(self) -> None:
        self.parameters: Mapping[str, Any] = json.loads(json.dumps(PARAMETERS))

    def __call__(self, session: Session, arguments: Mapping[str, Any]) -> str:
        return session.call_recall(arguments)

    def __repr__(self) -> str:
        return "Recall()"
