"""The agent's own stated decisions and plan steps, taken verbatim from its prose.

A few robust shapes only, so that what is taken is what the agent said and nothing else:

- decisions: "The fix is …", "I've decided …", "I'll go with …", "The solution is …";
- plan steps: "I will …", "I'll …", "Let me …", "I need to …", "Next, I …", the items of a
  list introduced by "Plan:" or "I need to:", and the first sentence of a mini-swe-agent
  "THOUGHT:" block.

Each one is a substring of the message (clipped at a word boundary when long). Code blocks are
skipped, so a quoted snippet never passes for a decision.

>>> [(d.kind, d.text) for d in decisions_of(3, "THOUGHT: Tests fail. The fix is to cast first.")]
[('plan', 'Tests fail.'), ('decision', 'The fix is to cast first.')]
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ctxfold.summarizers.ledger.values import Decision, DecisionKind

MAX_DECISION_CHARS = 200
"""A stated decision longer than this many characters is clipped at a word boundary."""
MAX_PER_MESSAGE = 4
"""At most this many decisions and plan steps are taken from one message (decisions first)."""

_FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[ \t]*$", re.MULTILINE | re.DOTALL)
_LEAD = r"(?:(?:So|Now|OK|Okay|Therefore|Thus|Then|Finally|Instead|Next|First|Alright),?\s+)?"
_DECISION = re.compile(
    _LEAD + r"(?:I(?:'ve| have)? decided\b|I(?:'ll| will) go with\b|We(?:'ll| will) go with\b"
    r"|(?:The|My|Our) (?:\w+ ){0,2}(?:fix|solution|approach|decision) (?:is|will be)\b"
    r"|Decision:)",
)
_PLAN = re.compile(
    _LEAD + r"(?:I(?:'ll| will| am going to|'m going to| need to| should)\b"
    r"|Let me\b(?! know)|Let's\b|We(?:'ll| will| need to| should)\b|Plan:)",
)
_LIST_HEAD = re.compile(
    r"^[ \t]*(?:(?:My |The )?[Pp]lan|(?:Next )?[Ss]teps|TODO|To do|I need to|I will|I'll)"
    r"\s*:[ \t]*$"
)
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*•]|\d{1,2}[.)])[ \t]+(\S.*?)[ \t]*$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
_THOUGHT = re.compile(r"^\s*THOUGHT:\s*")


def decisions_of(seq: int, text: str) -> list[Decision]:
    """The decisions and plan steps stated in one message's prose, in text order."""
    if not text or not text.strip():
        return []
    prose = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    found: list[tuple[int, DecisionKind, str]] = []
    thought = _THOUGHT.match(prose)
    if thought:
        # Blanked, not cut, so that every start still points into `text`.
        prose = " " * thought.end() + prose[thought.end() :]
        first = next(_sentences(prose, 0), None)
        if first is not None:
            kind: DecisionKind = "decision" if _DECISION.match(first[1]) else "plan"
            found.append((first[0], kind, first[1]))
    found += _list_items(prose)
    for start, sentence in _sentences(prose, 0):
        if _DECISION.match(sentence):
            found.append((start, "decision", sentence))
        elif _PLAN.match(sentence):
            found.append((start, "plan", sentence))
    chosen: dict[int, tuple[DecisionKind, str]] = {}
    for start, kind, sentence in sorted(found, key=lambda f: (f[1] != "decision", f[0])):
        if len(chosen) >= MAX_PER_MESSAGE:
            break
        if start not in chosen or (kind == "decision" and chosen[start][0] != "decision"):
            chosen[start] = (kind, sentence)
    out = []
    for _start, (kind, sentence) in sorted(chosen.items()):
        clipped = _clip(sentence)
        out.append(Decision(seq, kind, clipped, clipped != sentence))
    return out


def _sentences(text: str, offset: int) -> Iterator[tuple[int, str]]:
    """(start, sentence) for each sentence of each line of `text`, starts counted from
    `offset`; list markers are left out."""
    line_start = 0
    for line in text.split("\n"):
        if len(line.strip()) < 8:
            # No piece of it could be long enough (each is a part of it): blank lines, the
            # lines a code block left, a heading word.
            line_start += len(line) + 1
            continue
        item = _LIST_ITEM.match(line)
        body_start = item.start(1) if item else len(line) - len(line.lstrip())
        cursor = body_start
        for piece in _SENTENCE_END.split(line[body_start:].rstrip()):
            at = line.find(piece, cursor)
            cursor = at + len(piece)
            # Eight characters or more, and not a colon that introduces what follows.
            if len(piece.strip()) >= 8 and not piece.rstrip().endswith(":"):
                yield offset + line_start + at, piece.strip()
        line_start += len(line) + 1


def _list_items(text: str) -> list[tuple[int, DecisionKind, str]]:
    out: list[tuple[int, DecisionKind, str]] = []
    lines = text.split("\n")
    position = 0
    in_list = False
    for line in lines:
        start = position
        position += len(line) + 1
        if _LIST_HEAD.match(line):
            in_list = True
            continue
        if not in_list:
            continue
        item = _LIST_ITEM.match(line)
        if item:
            out.append((start + item.start(1), "plan", item.group(1)))
        elif line.strip():
            in_list = False
    return out


def _clip(sentence: str) -> str:
    if len(sentence) <= MAX_DECISION_CHARS:
        return sentence
    cut = sentence.rfind(" ", 0, MAX_DECISION_CHARS)
    return sentence[: cut if cut > MAX_DECISION_CHARS // 2 else MAX_DECISION_CHARS].rstrip()
