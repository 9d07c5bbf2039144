"""How an error message shows a value it got: short, and never failing itself.

`repr` can raise on the very input being reported: an integer of more than 4,300 digits
(`ValueError`), a structure nested thousands deep (`RecursionError`). An error about bad input
must never turn into a traceback of its own, so every value quoted in an error goes through
`show`.
"""

from __future__ import annotations

WIDTH = 80
"""Characters of a value's repr kept in an error message."""


def show(value: object, width: int = WIDTH) -> str:
    """`repr(value)` cut to `width` characters, or a description when it cannot be built.

    >>> show("a" * 100)[-5:]
    'aaaaa'
    >>> show(10 ** 5000)
    '<an int too large to show>'
    """
    try:
        text = repr(value)
    except (ValueError, RecursionError, MemoryError):
        return f"<{_article(type(value).__name__)} too large to show>"
    return text[:width]


def _article(noun: str) -> str:
    return f"an {noun}" if noun[:1].lower() in "aeiou" else f"a {noun}"
