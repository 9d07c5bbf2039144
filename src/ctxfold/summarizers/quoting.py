"""Text from the history shown as data: control characters escaped, spans that cannot be closed.

A summary or a record puts text that came from the history (tool output, identifiers, tool
names and call ids) next to ctxfold's own words. That text must not be able to start a line of
its own, close the quotation it sits in, or pass for a label, so it goes through here:

- `escape_controls` shows every control character and every line-break variant (``\\r``,
  vertical tab, form feed, U+0085, U+2028, U+2029) and bidirectional override as an escape,
  so the text stays on one line and reads as written;
- `code_span` quotes a text as a Markdown code span whose delimiter is longer than any run of
  backticks inside, so nothing inside can end it; `unquote` reads one back.
"""

from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_TICKS = re.compile("`+")
_SPAN = re.compile(r"^(`+)( ?)(.*?)\2\1$", re.DOTALL)


def escape_controls(text: str) -> str:
    r"""`text` with every control, line-break and bidirectional-override character written as an
    escape (``\n``, ``\r``, ``\t``, ``\x0b``, ``\u2028``, ...); other characters as they are.

    >>> escape_controls("a\rb\u2028c")
    'a\\rb\\u2028c'
    """
    return _CONTROL.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    char = match.group(0)
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


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
