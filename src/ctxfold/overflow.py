"""Recognise a provider's "the prompt is too long" error, whichever SDK raised it.

The compactor's overflow trigger needs to tell a context overflow apart from every other failure:
an overflow is fixed by compacting and retrying once, anything else is not. The SDKs raise it as
a generic 400, so the test reads the fields each provider documents:

- OpenAI: `openai.BadRequestError` with ``code == "context_length_exceeded"`` (older servers and
  compatible proxies only say "maximum context length" in the message);
- Anthropic: `anthropic.BadRequestError` whose message says "prompt is too long";
- LiteLLM: `litellm.ContextWindowExceededError`, matched by class name so that litellm need not be
  installed or imported.

Wrapped errors count too: the chain of `__cause__` and `__context__` is followed (`causes`), so a
`SummarizerError` raised from an SDK overflow is itself recognised. `stated_window` reads the
window such an error names, for a summarizer that re-plans its pieces under it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_OVERFLOW_CLASS_NAMES = frozenset({"ContextWindowExceededError"})
_OVERFLOW_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})
_OVERFLOW_PHRASES = (
    "maximum context length",
    "prompt is too long",
    "context_length_exceeded",
)
_MAX_CHAIN = 16
"""How many linked exceptions to follow; cycles and absurd chains stop here."""


def is_context_overflow(exc: BaseException | None) -> bool:
    """Whether `exc` (or an exception it was raised from) says the prompt exceeded the window.

    >>> is_context_overflow(ValueError("This model's maximum context length is 8192 tokens"))
    True
    >>> is_context_overflow(TimeoutError("timed out"))
    False
    """
    return any(_says_overflow(current) for current in causes(exc))


def causes(exc: BaseException | None) -> Iterator[BaseException]:
    """`exc`, then what it was raised from or during (`__cause__`, else `__context__`), and so
    on: at most `_MAX_CHAIN` exceptions, each once, so a cycle ends."""
    seen: set[int] = set()
    current = exc
    while current is not None and id(current) not in seen and len(seen) < _MAX_CHAIN:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


_STATED_WINDOW = re.compile(
    r"maximum context length is (\d+)|> (\d+) maximum|context window of (\d+)", re.IGNORECASE
)


def stated_window(exc: BaseException) -> int | None:
    """The window, in tokens, that an overflow error states ("maximum context length is 8192
    tokens", "... tokens > 200000 maximum"), searching its chain of causes; None when none does.

    >>> stated_window(ValueError("This model's maximum context length is 8192 tokens"))
    8192
    """
    for current in causes(exc):
        match = _STATED_WINDOW.search(str(current))
        if match:
            return int(next(group for group in match.groups() if group))
    return None


def _says_overflow(exc: BaseException) -> bool:
    if any(cls.__name__ in _OVERFLOW_CLASS_NAMES for cls in type(exc).__mro__):
        return True
    code = getattr(exc, "code", None)
    if isinstance(code, str) and code in _OVERFLOW_CODES:
        return True
    status = getattr(exc, "status_code", None)
    # A status other than 400/413 (a 500, a 429) is never an overflow, whatever its text says.
    if status is not None and status not in (400, 413):
        return False
    text = " ".join(str(part) for part in (exc, _body_message(exc)) if part).lower()
    return any(phrase in text for phrase in _OVERFLOW_PHRASES)


def _body_message(exc: BaseException) -> str:
    """The error message inside an SDK error's JSON body, where the SDK keeps it."""
    body = getattr(exc, "body", None)
    if not isinstance(body, dict):
        return ""
    error = body.get("error", body)
    if isinstance(error, dict):
        return str(error.get("message", ""))
    return str(error)
