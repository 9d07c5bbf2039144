"""Line-local regex passes over only the lines that can hold a match.

Most of the identifier and secret patterns need a literal on the line of every match (a path a
``/``, an assignment a ``:`` or ``=``), and most lines of a transcript lack most of these.
`str.find` finds the lines that hold one at a fraction of the regex engine's cost per
character, so a pass over those lines alone finds what a pass over the whole text finds, for
less. Every pattern passed here must match within one line (never take a newline) and hold one
of its literals on that line; the tests hold each pattern to that.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable


def matches(pattern: re.Pattern[str], needs: tuple[str, ...], text: str) -> Iterable[re.Match[str]]:
    """The matches of `pattern` in `text`, in order, found by passing over only the lines that
    hold one of `needs` (all of `text` when `needs` is empty).

    Every match lies within one line and holds one of `needs` there, so the other lines cannot
    hold one; `str.find` skips them at a fraction of the regex engine's cost per character. A
    match found from a line's start is the one the whole text gives: the engine's lookbehinds
    and word boundaries see the characters before ``pos``, and at ``endpos`` stands the newline
    that ends the line, which no pattern takes and every boundary reads as the end of a text.
    """
    if len(needs) == 1:  # the most common case, and most texts scanned are a line or two
        if needs[0] not in text:
            return ()
    elif needs:
        needs = tuple(literal for literal in needs if literal in text)
        if not needs:
            return ()
    if not needs or "\n" not in text:
        return pattern.finditer(text)
    return itertools.chain.from_iterable(
        pattern.finditer(text, start, end) for start, end in lines_holding(text, needs)
    )


WRITTEN = ("→", "…", "–", "—")
"""The characters beyond ASCII that ctxfold's own summaries, records and ledgers write: arrows,
ellipses and dashes. None is a word character, none has a case, and lowering leaves each one
character long, so text that holds no other is read as ASCII text is (`str.replace` of each is a
scan in C, where finding any character beyond ASCII is one in the regex engine)."""

TOKEN_MARKS = frozenset("_.:-")
"""With the letters and digits, the characters of a token (see `token_matches`)."""


def token_matches(
    pattern: re.Pattern[str], gate: re.Pattern[str], text: str
) -> list[re.Match[str]]:
    """The matches of `pattern` in `text`, in order, found by passing over only the tokens of
    `text` that hold a match of `gate`. A token is a maximal run of word characters (letters,
    digits, ``_``) and ``.``, ``:``, ``-`` (`TOKEN_MARKS`).

    For a pattern whose every match is such a run and holds a match of `gate` (a file name
    holds ``.py`` or another extension), found by one pass of `gate` over `text` (gate matches
    are made of token characters, and never overlap one another). A pattern that tries every
    word of a line costs a pass of the regex engine over it; a gate that starts with a literal
    lets the engine skip to where it can match, so most lines cost next to nothing.

    A match found from a token's start is the one the whole text gives: the tokens before it
    hold none, the engine's lookbehinds see the characters before ``pos``, and ``endpos``
    leaves one character after the token for its lookaheads and word boundaries to read.
    """
    found: list[re.Match[str]] = []
    size = len(text)
    end = -1
    for hit in gate.finditer(text):
        at = hit.start()
        if at < end:
            continue  # in the token just passed over
        start = at
        while start and _in_token(text[start - 1]):
            start -= 1
        end = hit.end()
        while end < size and _in_token(text[end]):
            end += 1
        found += pattern.finditer(text, start, min(end + 1, size))
    return found


def _in_token(char: str) -> bool:
    # `str.isalnum` is the regex engine's test for a word character other than "_".
    return char.isalnum() or char in TOKEN_MARKS


def lines_holding(text: str, needs: tuple[str, ...]) -> list[tuple[int, int]]:
    """The spans of `text` made of whole lines (newlines left out at their ends) that cover
    every line holding one of `needs`, in order; neighbouring such lines make one span."""
    if len(needs) > 1:
        hits = sorted(span for literal in needs for span in lines_holding(text, (literal,)))
        merged: list[tuple[int, int]] = []
        for start, end in hits:
            if merged and start <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        return merged
    literal = needs[0]
    spans: list[tuple[int, int]] = []
    found = text.find(literal)
    while found >= 0:
        start = text.rfind("\n", 0, found) + 1
        end = text.find("\n", found)
        if end < 0:
            end = len(text)
        if spans and start <= spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
        found = text.find(literal, end)
    return spans


def sub_lines(
    pattern: re.Pattern[str],
    replace: Callable[[re.Match[str]], str],
    needs: tuple[str, ...],
    text: str,
    within: str | None = None,
) -> str:
    """``pattern.sub(replace, text)``, passing over only the lines that hold one of `needs`:
    the caller's promise is that on any other line `replace` gives back every match as it was.

    `within`, when given, is where `needs` are looked for instead of `text`: a text as long as
    `text`, with its newlines where `text` has them (``text.lower()`` of ASCII text), so that
    a literal can be matched whatever its case. A line's replacements never depend on the
    lines around it (the negative lookbehinds of the patterns read a text's start as they read
    the newline before a line), so each run of such lines is replaced on its own and the other
    lines are kept as they are.
    """
    gate = text if within is None else within
    needs = tuple(literal for literal in needs if literal in gate)
    if not needs:
        return text
    if "\n" not in text:
        return pattern.sub(replace, text)
    out: list[str] = []
    position = 0
    for start, end in lines_holding(gate, needs):
        out.append(text[position:start])
        out.append(pattern.sub(replace, text[start:end]))
        position = end
    out.append(text[position:])
    return "".join(out)
