"""Recognise a provider's "the prompt is too long" error, whichever SDK raised it.

The compactor's overflow trigger needs to tell a context overflow apart from every other failure:
an overflow is fixed by compacting and retrying once, anything else is not. The SDKs raise it as
a generic 400, so the test reads the fields each provider documents:

- OpenAI: `openai.BadRequestError` with ``code == "context_length_exceeded"`` (older servers and
  compatible proxies only say "maximum context length" in the message);
- Anthropic: `anthropic.BadRequestError` whose message says "prompt is too long", or that the
  input length and `max_tokens` exceed the context limit (the prompt fits, but not with the
  output the request asked room for: the same fix, since compacting makes that room);
- LiteLLM: `litellm.ContextWindowExceededError`, matched by class name so that litellm need not be
  installed or imported.

Wrapped errors count too: the chain of `__cause__` and `__context__` is followed (`causes`), so a
`SummarizerError` raised from an SDK overflow is itself recognised.

`overflow_figures` reads what the error states, when it does: the size the provider measured
for the refused prompt and the model's limit. Overflow recovery uses both (the measured size as
provider usage, the limit in place of a window that was set too large), and so does a summarizer
that re-plans its pieces under the limit.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

_OVERFLOW_CLASS_NAMES = frozenset({"ContextWindowExceededError"})
_OVERFLOW_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})
_OVERFLOW_PHRASES = (
    "maximum context length",
    "prompt is too long",
    "context_length_exceeded",
    "exceed context limit",
)
_MAX_CHAIN = 16
"""How many linked exceptions to follow; cycles and absurd chains stop here."""

_NUMBER = r"(\d[\d,]*)"
# OpenAI: "maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens"
# (or "you requested 9500 tokens (9000 in the messages, 500 in the completion)").
_OPENAI_LIMIT = re.compile(rf"maximum context length is {_NUMBER} tokens", re.IGNORECASE)
_OPENAI_PROMPT = re.compile(
    rf"(?:resulted in {_NUMBER} tokens|\({_NUMBER} in the messages)", re.IGNORECASE
)
# Proxies and other providers: "... exceeds the context window of 32768 tokens".
_WINDOW_OF = re.compile(rf"context window of {_NUMBER}", re.IGNORECASE)
# Anthropic: "prompt is too long: 208310 tokens > 200000 maximum".
_ANTHROPIC = re.compile(rf"prompt is too long:\s*{_NUMBER} tokens\s*>\s*{_NUMBER}", re.IGNORECASE)
# Anthropic, prompt plus max_tokens: "... exceed context limit: 199759 + 8192 > 200000, ...".
_ANTHROPIC_WITH_OUTPUT = re.compile(
    rf"exceed context limit:\s*{_NUMBER}\s*\+\s*{_NUMBER}\s*>\s*{_NUMBER}", re.IGNORECASE
)


@dataclass(frozen=True)
class OverflowFigures:
    """What a context-overflow error states, in the provider's tokens: the size it measured for
    the refused prompt (`prompt_tokens`) and the model's limit (`limit`); None where unstated."""

    prompt_tokens: int | None = None
    limit: int | None = None


def is_context_overflow(exc: BaseException | None) -> bool:
    """Whether `exc` (or an exception it was raised from) says the prompt exceeded the window.
    Anything that is no exception (None, a string, a status code) is no overflow: False.

    >>> is_context_overflow(ValueError("This model's maximum context length is 8192 tokens"))
    True
    >>> is_context_overflow(TimeoutError("timed out")), is_context_overflow(400)
    (False, False)
    """
    return any(_says_overflow(current) for current in causes(exc))


def causes(exc: BaseException | None) -> Iterator[BaseException]:
    """`exc`, then what it was raised from or during (`__cause__`, else `__context__`), and so
    on: at most `_MAX_CHAIN` exceptions, each once, so a cycle ends. Nothing for what is no
    exception."""
    seen: set[int] = set()
    current = exc
    while isinstance(current, BaseException) and id(current) not in seen and len(seen) < _MAX_CHAIN:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


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


def overflow_figures(exc: BaseException | None) -> OverflowFigures:
    """The prompt size and limit an overflow error states (following the exception chain), as far
    as it states them.

    >>> overflow_figures(ValueError("prompt is too long: 208310 tokens > 200000 maximum"))
    OverflowFigures(prompt_tokens=208310, limit=200000)
    >>> overflow_figures(TimeoutError("timed out"))
    OverflowFigures(prompt_tokens=None, limit=None)
    """
    for current in causes(exc):
        text = " ".join(str(part) for part in (current, _body_message(current)) if part)
        figures = _figures(text)
        if figures.prompt_tokens is not None or figures.limit is not None:
            return figures
    return OverflowFigures()


def _figures(text: str) -> OverflowFigures:
    anthropic = _ANTHROPIC.search(text)
    if anthropic:
        return OverflowFigures(_int(anthropic.group(1)), _int(anthropic.group(2)))
    with_output = _ANTHROPIC_WITH_OUTPUT.search(text)
    if with_output:
        # The limit is the window itself; the output's share is the request's, not the model's.
        return OverflowFigures(_int(with_output.group(1)), _int(with_output.group(3)))
    limit = _OPENAI_LIMIT.search(text) or _WINDOW_OF.search(text)
    prompt = _OPENAI_PROMPT.search(text)
    return OverflowFigures(
        _int(prompt.group(1) or prompt.group(2)) if prompt else None,
        _int(limit.group(1)) if limit else None,
    )


def _int(digits: str) -> int:
    return int(digits.replace(",", ""))
