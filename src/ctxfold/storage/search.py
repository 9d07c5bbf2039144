"""Full-text search over a session's messages: what is indexed, how a query reads, what comes back.

Every store indexes the same words and reads a query the same way, so a search finds the same
messages in memory, SQLite (FTS5) and PostgreSQL (``tsvector``); only the scores differ.

- **What is indexed:** the text of each ``message`` event: its content, and the name and arguments
  of each tool call (JSON arguments as their keys and values, escapes read: `arguments_text`), up
  to `MAX_INDEXED_CHARS` characters per message. Summaries, notes and other event types are not
  indexed (the view shows them already).
- **Words:** runs of letters and digits, lowercased; everything else separates words, so
  ``src/ctxfold/session.py`` is the words ``src ctxfold session py``. Words match whole (no prefix
  or stemming: an identifier is found by itself, and a short word does not flood the results).
- **A query:** the words of each whitespace-separated term must appear one after another (so
  ``src/ctxfold/session.py`` matches that path, not the four words anywhere), and every term must
  appear in the message. Nothing in a query is syntax: quotes, ``AND``, ``*`` or ``:`` are text.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ctxfold.errors import InvalidInputError
from ctxfold.events import Event

MAX_INDEXED_CHARS = 100_000
"""Characters of one message's text that are indexed; the rest of a huge tool output is not
searchable (PostgreSQL caps a ``tsvector`` at 1 MB, and phrase positions at 16,383 words)."""

MAX_QUERY_CHARS = 2_000
"""The longest query, in characters."""

_WORD = re.compile(r"[^\W_]+")
_ASCII_SEPARATORS = bytes(c if chr(c).isalnum() else 32 for c in range(128)) + b" " * 128


@dataclass(frozen=True)
class SearchHit:
    """One message that matched a search.

    - `seq`: the seq of the ``message`` event that matched;
    - `score`: how well it matched, higher is better; compare scores within one result list only
      (each store computes them its own way);
    - `event`: the event itself, so a caller needs no second read.
    """

    seq: int
    score: float
    event: Event


@dataclass(frozen=True)
class SearchQuery:
    """A query read into terms, each a tuple of words that must appear in that order."""

    text: str
    terms: tuple[tuple[str, ...], ...]

    @classmethod
    def parse(cls, query: object) -> SearchQuery:
        """Read user text into terms; an empty query, or one with no words, is refused."""
        if not isinstance(query, str):
            raise InvalidInputError(f"a search query must be a string, not {query!r}")
        if not query.strip():
            raise InvalidInputError(f"a search query needs at least one word, not {query!r}")
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidInputError(
                f"a search query is at most {MAX_QUERY_CHARS:,} characters, not {len(query):,}"
            )
        terms = tuple(t for t in (tuple(words(part)) for part in query.split()) if t)
        if not terms:
            raise InvalidInputError(
                f"the search query {query!r} has no letters or digits to search for"
            )
        return cls(query, terms)

    def fts5(self) -> str:
        """The query in SQLite FTS5 syntax: each term a quoted phrase, all required."""
        # Words hold only letters and digits, so quoting them cannot open any FTS5 syntax.
        return " AND ".join('"' + " ".join(term) + '"' for term in self.terms)

    def tsquery(self) -> str:
        """The query in PostgreSQL ``to_tsquery`` syntax: phrases joined by ``&``."""
        return " & ".join(
            "(" + " <-> ".join(f"'{word}'" for word in term) + ")" for term in self.terms
        )

    def score(self, indexed: str) -> float:
        """How well `indexed` text (as `index_words` makes it) matches; 0.0 when it does not.

        Used by stores that scan (the memory store): occurrences of each term, damped by the
        length of the message, so a short message that says it often ranks first."""
        tokens = indexed.split()
        found = 0
        for term in self.terms:
            count = _count_phrase(tokens, term)
            if count == 0:
                return 0.0
            found += count
        return found / (1.0 + math.log(len(tokens)))


def words(text: str) -> list[str]:
    """The words of `text` as search sees them: lowercase runs of letters and digits."""
    return index_words(text).split()


def index_words(text: str) -> str:
    """`text` lowercased with every character that is not a letter or a digit made a space: the
    form a store that does not tokenize by itself indexes (PostgreSQL, memory)."""
    text = text.lower()
    if text.isascii():
        # The common case, at C speed: one table lookup per byte.
        return text.encode("ascii").translate(_ASCII_SEPARATORS).decode("ascii")
    return " ".join(_WORD.findall(text))


def search_text(data: Mapping[str, Any]) -> str:
    """The text a ``message`` event is searched by: its content, then each tool call's name and
    arguments, one per line, cut at `MAX_INDEXED_CHARS`.

    SQLite's FTS5 tokenizes this itself (its ``unicode61`` words are letters and digits too);
    other stores index `index_words` of it. Tolerant by design: a message event of an unexpected
    shape indexes what text it has and never fails a search."""
    message = data.get("message")
    if not isinstance(message, Mapping):
        return ""
    parts: list[str] = []
    content = message.get("content")
    if isinstance(content, str):
        parts.append(content)
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            if isinstance(call, Mapping):
                name, arguments = call.get("name"), call.get("arguments")
                if isinstance(name, str):
                    parts.append(name)
                if isinstance(arguments, str):
                    parts.append(arguments_text(arguments))
    return "\n".join(parts)[:MAX_INDEXED_CHARS]


def arguments_text(arguments: str) -> str:
    r"""A tool call's arguments as the words they hold: for JSON, each key and each value on a
    line of its own, with JSON's escapes read (so ``"a\nfix"`` is the words ``a`` and ``fix``,
    not ``a`` and ``nfix``); any other text as it is.

    >>> arguments_text('{"command": "cd /repo\\npytest -x"}')
    'command\ncd /repo\npytest -x'
    """
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return arguments
    if isinstance(parsed, str):
        return parsed
    if not isinstance(parsed, (dict, list)):
        return arguments
    return "\n".join(_json_words(parsed))


def _json_words(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _json_words(item)
    elif isinstance(value, list):
        for item in value:
            yield from _json_words(item)
    elif value is not None and not isinstance(value, bool):
        yield str(value)


def stored_text(data: str) -> str:
    """`search_text` of a stored event's JSON data ("" for a row that is not a JSON object)."""
    try:
        value = json.loads(data)
    except (TypeError, ValueError):
        return ""
    return search_text(value) if isinstance(value, Mapping) else ""


def _count_phrase(tokens: list[str], phrase: tuple[str, ...]) -> int:
    first, size = phrase[0], len(phrase)
    return sum(
        1
        for i, token in enumerate(tokens)
        if token == first and tuple(tokens[i : i + size]) == phrase
    )
