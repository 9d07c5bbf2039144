"""Text from the history shown as data: control characters escaped, spans that cannot be closed.

A summary or a record puts text that came from the history (tool output, identifiers, tool
names and call ids) next to ctxfold's own words. That text must not be able to start a line of
its own, close the quotation it sits in, or pass for a label, so it goes through here:

- `escape_controls` (`ctxfold.messages.escapes`, shared with recall's frames) shows every
  control character and every line-break variant (``\\r``, vertical tab, form feed, U+0085,
  U+2028, U+2029) and bidirectional override as an escape, so the text stays on one line and
  reads as written;
- `code_span` quotes a text as a Markdown code span whose delimiter is longer than any run of
  backticks inside, so nothing inside can end it; `unquote` reads one back.
"""

from __future__ import annotations

import functools
import re

from ctxfold.messages.escapes import escape_controls

_TICKS = re.compile("`+")
_SPAN = re.compile(r"^(`+)( ?)(.*?)\2\1$", re.DOTALL)


# Remembered per text: the record, the prompt and every summary quote the same identifiers and
# commands again at each compaction.
@functools.lru_cache(maxsize=16_384)
def code_span(text: str) -> str:
    """`text` (controls escaped) as a Markdown code span nothing inside can close.

    >>> code_span("src/app.py:12")
    '`src/app.py:12`'
    >>> code_span("echo `date` now")
    '``echo `date` now``'
    """
    body = escape_controls(text)
    longest = max((len(run) for run in _TICKS.findall(body)), default=0)
    fence = "`" * (longest + 1)
    # A span that starts or ends with a backtick needs a space inside its delimiters.
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def unquote(item: str) -> str:
    """The text of `item` when it is one whole code span (as `code_span` writes them), else
    `item` unchanged. Escapes are not undone: the text is read back as it was shown.

    >>> unquote("`` `date` ``")
    '`date`'
    >>> unquote("plain words")
    'plain words'
    """
    match = _SPAN.match(item)
    if match is None or "`" * len(match.group(1)) in match.group(3):
        return item
    return match.group(3)


def head_at_boundary(text: str, limit: int) -> str:
    """The longest head of `text` of at most `limit` characters, ending at a line or word end
    when one falls in the last quarter (shortened user messages and ledger lines alike)."""
    if limit >= len(text):
        return text
    for stop in ("\n", " "):
        at = text.rfind(stop, 0, limit + 1)
        if at >= limit * 3 // 4:
            return text[:at].rstrip()
    return text[:limit]


def tail_at_boundary(text: str, limit: int) -> str:
    """The longest tail of `text` of at most `limit` characters, starting at a line or word
    start when one falls in its first quarter (the other end of `head_at_boundary`)."""
    if limit <= 0:
        return ""
    start = len(text) - limit
    if start <= 0:
        return text
    for stop in ("\n", " "):
        at = text.find(stop, start)
        if 0 <= at <= start + limit // 4:
            return text[at + 1 :].lstrip()
    return text[start:]
