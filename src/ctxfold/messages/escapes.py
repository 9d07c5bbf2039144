"""Control characters written as escapes, so that text from the history stays on one line and
reads as written wherever ctxfold shows it (a summary's record, a recall frame's labels)."""

from __future__ import annotations

import re

_CONTROLS = "\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(f"[{_CONTROLS}]")
_CONTROL_OR_BOM = re.compile(f"[{_CONTROLS}\ufeff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape_controls(text: str, *, bom: bool = False) -> str:
    r"""`text` with every control, line-break and bidirectional-override character written as an
    escape (``\n``, ``\r``, ``\t``, ``\x0b``, ``\u2028``, ...); other characters as they are.
    With `bom`, a zero-width no-break space (U+FEFF) is escaped too.

    >>> escape_controls("a\rb\u2028c")
    'a\\rb\\u2028c'
    >>> escape_controls("\ufeffa", bom=True)
    '\\ufeffa'
    """
    return (_CONTROL_OR_BOM if bom else _CONTROL).sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    char = match.group(0)
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
