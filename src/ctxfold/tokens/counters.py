"""Choosing a counter: `counter("auto" | "heuristic" | encoding | model name)`."""

from __future__ import annotations

import logging
from typing import cast

from ctxfold.errors import ConfigurationError, InvalidInputError, MissingDependencyError
from ctxfold.protocols import TokenCounter
from ctxfold.tokens.catalog import lookup
from ctxfold.tokens.exact import ENCODINGS, TiktokenCounter
from ctxfold.tokens.heuristic import HeuristicCounter

logger = logging.getLogger("ctxfold.tokens")

# Name prefixes of OpenAI models the catalog may not list yet, longest first so that
# "gpt-4o..." is not taken for "gpt-4...".
_OPENAI_PREFIXES: tuple[tuple[str, str], ...] = (
    ("gpt-4o", "o200k_base"),
    ("chatgpt-4o", "o200k_base"),
    ("gpt-4.1", "o200k_base"),
    ("gpt-4.5", "o200k_base"),
    ("gpt-5", "o200k_base"),
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5", "cl100k_base"),
)


def encoding_for_model(model: str) -> tuple[str, bool]:
    """The encoding that counts a model's tokens, and whether it is that model's own tokenizer.

    OpenAI models map to their tokenizer (gpt-4o, gpt-4.1, o-series, gpt-5: o200k_base; gpt-4 and
    gpt-3.5: cl100k_base). Every other model maps to o200k_base as an approximation (False).

    >>> encoding_for_model("openai/gpt-4o-2024-08-06")
    ('o200k_base', True)
    >>> encoding_for_model("claude-sonnet-4-5")
    ('o200k_base', False)
    """
    info = lookup(model)
    if info is not None:
        return info.encoding, info.exact_encoding
    key = model.strip().lower().rsplit("/", 1)[-1]
    for prefix, encoding in _OPENAI_PREFIXES:
        if key == prefix or key.startswith((f"{prefix}-", f"{prefix}.")):
            return encoding, True
    return "o200k_base", False


def counter(spec: str = "auto") -> TokenCounter:
    """The best available counter for `spec`; its `name` and `exact` say what you got.

    - ``"auto"``: exact o200k_base when tiktoken and bpe-openai are installed, else the heuristic
      (the fallback is logged on the ``ctxfold.tokens`` logger).
    - ``"heuristic"``: characters / 4, no dependencies.
    - ``"o200k_base"`` / ``"cl100k_base"``: that tokenizer, or `MissingDependencyError`.
    - a model name: its tokenizer (see `encoding_for_model`); models from other providers get
      o200k_base as a stand-in, named e.g. ``"o200k_base (approximation for claude-opus-4-1)"``;
      without the dependencies, the heuristic, with a log record.

    >>> counter("gpt-4o").name
    'o200k_base'
    """
    if not isinstance(spec, str):
        raise ConfigurationError(
            f"counter() takes a name: 'auto', 'heuristic', an encoding or a model name, not "
            f"{spec!r}; a counter object is passed as it is, without counter()"
        )
    key = spec.strip()
    if not key:
        raise InvalidInputError(
            "counter() needs 'auto', 'heuristic', an encoding name or a model name, not ''"
        )
    if key == "heuristic":
        return HeuristicCounter()
    if key in ENCODINGS:
        return TiktokenCounter(key)
    if key == "auto":
        encoding, approximation_for = "o200k_base", None
    else:
        encoding, exact = encoding_for_model(key)
        approximation_for = None if exact else key
    try:
        return TiktokenCounter(encoding, approximation_for=approximation_for)
    except MissingDependencyError as exc:
        logger.info("counting tokens for %r with the character heuristic: %s", key, exc)
        return HeuristicCounter()


def as_counter(value: object, what: str) -> TokenCounter:
    """The counter `value` stands for, where an argument `what` takes one: a `TokenCounter`
    as it is, or a name that `counter` reads ("auto", "cl100k_base", "gpt-4o", ...).

    Anything else is a `ConfigurationError` now, rather than an AttributeError at the first
    count, long after the wrong argument was given.

    >>> as_counter("cl100k_base", "counter").name
    'cl100k_base'
    """
    if isinstance(value, str):
        return counter(value)
    if all(
        callable(getattr(value, m, None)) for m in ("count_text", "count_message", "count_tools")
    ):
        return cast(TokenCounter, value)
    raise ConfigurationError(
        f"{what} must be a TokenCounter (count_text, count_message, count_tools) or a name for "
        f"ctxfold.tokens.counter such as 'cl100k_base' or 'gpt-4o', not {value!r:.80}"
    )
