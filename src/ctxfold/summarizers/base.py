"""What the engine needs to treat every summarizer alike.

- `as_summarizer` wraps anything a user passes (a function, an async function, an object with an
  async ``__call__`` or an ``acall`` method) in one `NormalizedSummarizer` with a sync and an async
  way to call it, and an `is_async` flag saying which one works.
- `normalize_result` reads any answer as a `SummaryResult`; `is_decline` says whether it declined.
- `is_echo` catches a summarizer that sent back its prompt or copied its input (`echo-rejected`).
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Sequence
from typing import Any

from ctxfold.errors import ConfigurationError, SummarizerError
from ctxfold.summarizers.record import render_record
from ctxfold.summarizers.request import SummaryRequest, SummaryResult

_WORD = re.compile(r"\w+")
SHINGLE = 6
"""Words per run when comparing a summary with its prompt or its input."""


class NormalizedSummarizer:
    """One summarizer behind a uniform face.

    - `is_async`: True when it can only be awaited (use `acall`); `__call__` then raises.
    - `__call__(request)`: run it synchronously; always returns a `SummaryResult`.
    - `acall(request)`: await it (a sync summarizer is called directly); a `SummaryResult`.
    - `wrapped`: what was passed to `as_summarizer`.
    """

    def __init__(self, wrapped: Any) -> None:
        if not callable(wrapped) and not callable(getattr(wrapped, "acall", None)):
            raise ConfigurationError(
                f"a summarizer must be callable with a SummaryRequest, not {type(wrapped).__name__}"
            )
        self.wrapped = wrapped
        declared = getattr(wrapped, "is_async", None)
        if isinstance(declared, bool):
            self.is_async = declared
        else:
            self.is_async = not callable(wrapped) or _is_coroutine_callable(wrapped)
        acall = getattr(wrapped, "acall", None)
        self._acall: Callable[[SummaryRequest], Any] | None = acall if callable(acall) else None

    @property
    def name(self) -> str:
        """A short name for reports: the summarizer's `name` attribute, else the function's or
        the class's name."""
        wrapped = self.wrapped
        for attribute in ("name", "__name__"):
            value = getattr(wrapped, attribute, None)
            if isinstance(value, str) and value:
                return value
        return type(wrapped).__name__

    def __repr__(self) -> str:
        return f"NormalizedSummarizer({self.wrapped!r}, is_async={self.is_async})"

    def __call__(self, request: SummaryRequest) -> SummaryResult:
        if self.is_async:
            raise SummarizerError(
                f"summarizer {self.name} is async; call it from async code (acompact, acall)"
            )
        value = self.wrapped(request)
        if inspect.isawaitable(value):
            if inspect.iscoroutine(value):
                value.close()  # never awaited; closing it avoids a "never awaited" warning
            raise SummarizerError(
                f"summarizer {self.name} returned an awaitable from a sync call; "
                "use acompact() or give it is_async = True"
            )
        return normalize_result(value)

    async def acall(self, request: SummaryRequest) -> SummaryResult:
        value = self._acall(request) if self._acall is not None else self.wrapped(request)
        if inspect.isawaitable(value):
            value = await value
        return normalize_result(value)


def _is_coroutine_callable(obj: Any) -> bool:
    if inspect.iscoroutinefunction(obj):
        return True
    call = getattr(type(obj), "__call__", None)  # noqa: B004 - the class's, not the instance's
    return call is not None and inspect.iscoroutinefunction(call)


def as_summarizer(obj: Any) -> NormalizedSummarizer:
    """Wrap a summarizer (sync or async callable, or an object with ``acall``) for the engine.

    >>> s = as_summarizer(lambda request: "## Objective\\n- nothing")
    >>> s.is_async
    False
    """
    return obj if isinstance(obj, NormalizedSummarizer) else NormalizedSummarizer(obj)


def normalize_result(value: object) -> SummaryResult:
    """Read a summarizer's answer: a `str` becomes ``SummaryResult(text)``, None a decline, a
    `SummaryResult` stays as it is; anything else is a `SummarizerError`."""
    if value is None:
        return SummaryResult(None)
    if isinstance(value, SummaryResult):
        return value
    if isinstance(value, str):
        return SummaryResult(value)
    raise SummarizerError(
        f"a summarizer returned {type(value).__name__}; expected str, SummaryResult or None"
    )


def is_decline(result: SummaryResult | str | None) -> bool:
    """Whether the answer declines: None, or text that is empty or only whitespace
    (`decline-writes-nothing`)."""
    text = result.text if isinstance(result, SummaryResult) else result
    return text is None or not text.strip()


def is_echo(summary: SummaryResult | str | None, request: SummaryRequest) -> bool:
    """Whether `summary` sent back its own prompt or copied its input instead of condensing it.

    Two tests, on runs of `SHINGLE` words:

    - the prompt: it repeats a quarter or more of the instructions' runs (a summary shares
      headings and a few words with them, never whole sentences);
    - the input: after taking out the identifiers (which a summary must copy), the runs it shares
      with the record cover at least half as many words as the stretch has. Quoting identifiers,
      commands and error lines therefore never makes an echo; reproducing most of the stretch
      does.
    """
    text = summary.text if isinstance(summary, SummaryResult) else summary
    if not text or not text.strip():
        return False
    words = _words(text)
    instructions = _instruction_shingles(request.instructions)
    if instructions:
        shared = len(instructions & _shingles(words))
        if shared * 4 >= len(instructions):
            return True
    # Identifiers are taken out of both sides: a summary must copy them, so they prove nothing.
    identifiers = sorted(request.identifiers, key=len, reverse=True)
    own = _words(_without(text, identifiers))
    record_text = _without(request.record or render_record(request.messages), identifiers)
    content_text = _without(_content(request), identifiers) if request.messages else record_text
    # Most summaries have far fewer words than their stretch, which settles it (below) once the
    # stretch's words are seen to pass twice the summary's: count them only that far.
    enough = max(len(own) * 2, SHINGLE - 1) + 1
    if _at_least(record_text, enough) and _at_least(content_text, enough):
        return False
    record = _words(record_text)
    content = _words(content_text) if request.messages else record
    size = min(len(record), len(content))
    if size < SHINGLE:
        return size > 0 and own == content
    if len(own) * 2 < size:
        return False  # too few words to cover half the stretch's, whatever they copied
    copied = _covered(own, _shared_shingles(own, (record, content)))
    return copied * 2 >= size


def _content(request: SummaryRequest) -> str:
    parts: list[str] = []
    for message in request.messages:
        parts.append(message.text)
        parts.extend(call.arguments for call in message.tool_calls)
    return "\n".join(parts)


def _without(text: str, identifiers: list[str]) -> str:
    for identifier in identifiers:
        text = text.replace(identifier, " ")
    return text


def _at_least(text: str, n: int) -> bool:
    """Whether `text` has `n` words or more (as many as `_words` finds), read only about that
    far: a prefix never has more words than the whole (a word it cuts is one word in both)."""
    end = 8 * n
    while True:
        if len(_WORD.findall(text, 0, end)) >= n:
            return True
        if end >= len(text):
            return False
        end *= 4


def _words(text: str) -> list[str]:
    if text.isascii():
        # Lowering ASCII text changes only A-Z, word characters both before and after: the
        # same words, lowered in one pass rather than one by one.
        return _WORD.findall(text.lower())
    return [w.lower() for w in _WORD.findall(text)]


@functools.lru_cache(maxsize=64)
def _instruction_shingles(instructions: str) -> frozenset[tuple[str, ...]]:
    """The runs of the instructions, which differ only by their length limit from request to
    request: worked out once for each."""
    return frozenset(_shingles(_words(instructions)))


def _shingles(words: list[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + SHINGLE]) for i in range(len(words) - SHINGLE + 1)}


def _shared_shingles(own: list[str], sources: Sequence[list[str]]) -> set[tuple[str, ...]]:
    """The runs of `own` that one of `sources` holds too: what `_covered` needs of the
    sources' runs. A run of a source is built only where its first word starts a run of
    `own`, rather than at every word of the stretch."""
    runs = _shingles(own)
    firsts = {run[0] for run in runs}
    shared: set[tuple[str, ...]] = set()
    for words in sources:
        for i in range(len(words) - SHINGLE + 1):
            if words[i] in firsts:
                run = tuple(words[i : i + SHINGLE])
                if run in runs:
                    shared.add(run)
    return shared


def _covered(words: list[str], known: set[tuple[str, ...]]) -> int:
    """How many of `words` lie inside a run of `SHINGLE` words that `known` holds."""
    covered = [False] * len(words)
    for i in range(len(words) - SHINGLE + 1):
        if tuple(words[i : i + SHINGLE]) in known:
            for j in range(i, i + SHINGLE):
                covered[j] = True
    return sum(covered)
