"""What the engine needs to treat every summarizer alike.

- `as_summarizer` wraps anything a user passes (a function, an async function, an object with an
  async ``__call__`` or an ``acall`` method) in one `NormalizedSummarizer` with a sync and an async
  way to call it, and an `is_async` flag saying which one works.
- `normalize_result` reads any answer as a `SummaryResult`; `is_decline` says whether it declined.
- `is_echo` catches a summarizer that sent back its prompt or copied its input (`echo-rejected`).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
from collections.abc import Callable, Sequence
from typing import Any

from ctxfold._unicode import well_formed
from ctxfold.errors import ConfigurationError, SummarizerError
from ctxfold.summarizers._lines import WRITTEN
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
    `SummaryResult` stays as it is; anything else (or a `SummaryResult` whose text is neither
    a `str` nor None) is a `SummarizerError`.

    A lone surrogate in the text (half of a UTF-16 pair, as an SDK gives for a JSON ``"\\ud83d"``
    escape a model wrote with its other half missing) becomes U+FFFD, and two halves that make a
    pair become the one character they stand for: no store and no UTF-8 file can hold a lone
    surrogate, so as it came the summary could never land (`well_formed`).

    >>> normalize_result("## Objective\\n- fixed emoji \\ud83d").text
    '## Objective\\n- fixed emoji \ufffd'
    """
    if value is None:
        return SummaryResult(None)
    if isinstance(value, SummaryResult):
        text = value.text
        if text is not None and not isinstance(text, str):
            raise SummarizerError(
                f"a summarizer returned a SummaryResult whose text is a {type(text).__name__}; "
                "expected str or None"
            )
        fixed = _well_formed_result(value)
        return value if fixed is None else fixed
    if isinstance(value, str):
        return SummaryResult(well_formed(value))
    raise SummarizerError(
        f"a summarizer returned {type(value).__name__}; expected str, SummaryResult or None"
    )


def _well_formed_result(result: SummaryResult) -> SummaryResult | None:
    """`result` with its text, model and notes `well_formed`, or None when they already are."""
    text = well_formed(result.text) if result.text is not None else None
    model = well_formed(result.model) if isinstance(result.model, str) else result.model
    notes = tuple(well_formed(n) if isinstance(n, str) else n for n in result.notes)
    if text == result.text and model == result.model and notes == tuple(result.notes):
        return None
    return dataclasses.replace(result, text=text, model=model, notes=notes)


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
    instructions = _instruction_shingles(request.instructions)
    if instructions and _shared_count(_words(text), instructions) * 4 >= len(instructions):
        return True
    # Identifiers are taken out of both sides: a summary must copy them, so they prove nothing.
    identifiers = sorted(request.identifiers, key=len, reverse=True)
    own = _words(_without(text, identifiers))
    record_text = request.record or render_record(request.messages)
    content_text = _content(request) if request.messages else record_text
    # Most summaries have far fewer words than their stretch, which settles it (below) once the
    # stretch's words are seen to pass twice the summary's: count them only that far.
    enough = max(len(own) * 2, SHINGLE - 1) + 1
    if _at_least_without(record_text, identifiers, enough) and (
        content_text is record_text or _at_least_without(content_text, identifiers, enough)
    ):
        return False
    record_text = _without(record_text, identifiers)
    content_text = _without(content_text, identifiers) if request.messages else record_text
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


def _at_least_without(text: str, identifiers: list[str], n: int) -> bool:
    """``_at_least(_without(text, identifiers), n)``, with the identifiers taken out of only as
    much of `text` as it reads: the stretch is long, and its first lines mostly settle it.

    An identifier without a newline is found, and replaced by a space, within one line, so
    taking the identifiers out of the text line by line gives the same lines, and a run of
    whole lines holds the words of its own lines alone."""
    if any(not identifier or "\n" in identifier for identifier in identifiers):
        return _at_least(_without(text, identifiers), n)
    found = 0
    start = 0
    size = 8 * n
    while start < len(text):
        cut = text.find("\n", start + size)
        end = len(text) if cut < 0 else cut
        found += _word_count(_without(text[start:end], identifiers))
        if found >= n:
            return True
        start = end + 1
        size *= 4
    return found >= n


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
    if not text.isascii():
        spaced = _spaced(text)
        if spaced is None:
            return [w.lower() for w in _other_words(text)]
        text = spaced
    # Lowering ASCII text changes only A-Z, word characters both before and after: the
    # same words, lowered in one pass rather than one by one (`_ascii_words`).
    return _ascii_words(text.lower())


def _word_count(text: str) -> int:
    """``len(_WORD.findall(text))``."""
    if not text.isascii():
        spaced = _spaced(text)
        if spaced is None:
            return sum(1 if piece.isascii() else len(_WORD.findall(_decoded(piece)))
                       for piece in _pieces(text))  # fmt: skip
        text = spaced
    return len(_ascii_words(text))


# In ASCII text a word character (`_WORD`) is a letter, a digit or "_": every other character
# made a space, the words are what `str.split` finds, at a fraction of the regex engine's cost.
_NOT_WORD = str.maketrans({c: " " for c in map(chr, range(128)) if not (c.isalnum() or c == "_")})
_NOT_WORD_BYTES = bytes.maketrans(
    bytes(range(128)), bytes(c if chr(c).isalnum() or chr(c) == "_" else 32 for c in range(128))
)


def _ascii_words(text: str) -> list[str]:
    """``_WORD.findall(text)`` for ASCII `text`."""
    return text.translate(_NOT_WORD).split()


def _spaced(text: str) -> str | None:
    """`text` with the arrows, ellipses and dashes ctxfold writes made spaces, when that
    leaves it ASCII: none of them is a word character (`_WORD`), so the same words, in text
    the ASCII path reads; else None. Summaries and records are ASCII but for those, which
    sent all their text down the slower path (`_other_words`)."""
    for char in WRITTEN:
        if char in text:
            text = text.replace(char, " ")
    return text if text.isascii() else None


def _other_words(text: str) -> list[str]:
    """``_WORD.findall(text)`` for any `text`: a piece of it between ASCII characters that are
    not word characters is one word when it is ASCII; only the others are read by the regex
    engine, which costs many times what splitting does. (Split as UTF-8 bytes: `str.translate`
    is slow on text that is not ASCII, and no byte of a character beyond ASCII is an ASCII
    one.)"""
    words: list[str] = []
    for piece in _pieces(text):
        if piece.isascii():
            words.append(piece.decode("ascii"))
        else:
            words += _WORD.findall(_decoded(piece))
    return words


def _pieces(text: str) -> list[bytes]:
    return text.encode("utf-8", "surrogatepass").translate(_NOT_WORD_BYTES).split()


def _decoded(piece: bytes) -> str:
    return piece.decode("utf-8", "surrogatepass")


@functools.lru_cache(maxsize=64)
def _instruction_shingles(instructions: str) -> frozenset[tuple[str, ...]]:
    """The runs of the instructions, which differ only by their length limit from request to
    request: worked out once for each. The limit is said in their last paragraph, so the runs
    of the paragraphs before it are worked out once for all of them (`_head_shingles`); a
    paragraph break holds no word, so the words of the whole are those of the head and then
    those of the last paragraph."""
    cut = instructions.rfind("\n\n")
    if cut < 0:
        return frozenset(_shingles(_words(instructions)))
    head, runs = _head_shingles(instructions[:cut])
    return runs | _shingles([*head[-(SHINGLE - 1) :], *_words(instructions[cut:])])


@functools.lru_cache(maxsize=16)
def _head_shingles(head: str) -> tuple[list[str], frozenset[tuple[str, ...]]]:
    words = _words(head)
    return words, frozenset(_shingles(words))


def _shared_count(words: list[str], known: frozenset[tuple[str, ...]]) -> int:
    """``len(known & _shingles(words))``: a run of `words` is built only where its first word
    starts one of `known`."""
    firsts = _firsts(known)
    return len(
        {
            run
            for i in range(len(words) - SHINGLE + 1)
            if words[i] in firsts and (run := tuple(words[i : i + SHINGLE])) in known
        }
    )


@functools.lru_cache(maxsize=64)
def _firsts(runs: frozenset[tuple[str, ...]]) -> frozenset[str]:
    return frozenset(run[0] for run in runs)


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
