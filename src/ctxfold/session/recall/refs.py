"""Reading a recall reference: the text a note, placeholder or summary prints, as a value.

What ctxfold prints, and so what a reference may be:

- a range of log items, ``41-57``, as notes and summaries print it (``log items 41–57``, with
  an en dash) or the work ledger does (``log 41–57``);
- one log item, ``12``, as placeholders (``event 12``), summaries of one message
  (``log item 12``) and the ledger (``log 12``) print it; several, separated by commas
  (``log 12, 15, 20``; an ellipsis among them is skipped);
- a compaction event, ``c12``: its seq changes when a compaction is rebased over a concurrent
  append, so ctxfold never prints one; it names the event the log shows at that seq;
- a tool call id (``call_7``, ``toolu_01…``), as placeholders print it (``call call_7``).

Item numbers are seqs of original messages, which no later event renumbers, so a printed
reference keeps working after any rebase. Surrounding quotes, backticks and brackets are
ignored. Whether the reference names anything is for the log to say (`UnknownRefError`); here
only its form is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ctxfold.errors import InvalidInputError

MAX_REF_CHARS = 500
"""The longest reference, in characters."""

_WRAPPING = "\"'`()[]{}<>«»“”‘’ \t\r\n"
_DASHES = "-–—‒―−"
_PREFIX = re.compile(
    r"^(?:log\s+items?|log\s+entries|log\s+entry|log|events?|items?|seqs?|messages?)"
    r"(?:\s*[:#]\s*|\s+)",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"^\d{1,18}$")
_RANGE = re.compile(rf"^(\d{{1,18}})\s*(?:[{_DASHES}]|\.\.|\bto\b)\s*(\d{{1,18}})$")
_COMPACTION = re.compile(r"^(?:c|compaction\s+|compaction\s*#\s*)(\d{1,18})$", re.IGNORECASE)
_CALL = re.compile(r"^(?:call|call\s+id|tool\s+call)\s+(\S+)$", re.IGNORECASE)
_SEPARATOR = re.compile(r"\s*(?:,|;|\band\b)\s*")
_ELLIPSIS = frozenset({"…", "...", ""})


@dataclass(frozen=True)
class SeqsRef:
    """Log items: each of `ranges` is a first and last seq, inclusive."""

    text: str
    ranges: tuple[tuple[int, int], ...]

    @property
    def single(self) -> int | None:
        """The one seq this names, when it names exactly one."""
        if len(self.ranges) == 1 and self.ranges[0][0] == self.ranges[0][1]:
            return self.ranges[0][0]
        return None


@dataclass(frozen=True)
class CompactionRef:
    """The compaction event at `seq`."""

    text: str
    seq: int


@dataclass(frozen=True)
class CallRef:
    """Every tool result that answers the call `call_id`."""

    text: str
    call_id: str


Ref = SeqsRef | CompactionRef | CallRef


def parse_ref(ref: object) -> Ref:
    """The reference `ref` names, read from any form ctxfold prints.

    >>> parse_ref("log items 41–57")
    SeqsRef(text='log items 41–57', ranges=((41, 57),))
    >>> parse_ref("event 12").single, parse_ref("c12").seq, parse_ref("call_7").call_id
    (12, 12, 'call_7')
    """
    if not isinstance(ref, str):
        raise InvalidInputError(f"a recall ref must be a string, not {type(ref).__name__} {ref!r}")
    if len(ref) > MAX_REF_CHARS:
        raise InvalidInputError(
            f"a recall ref is at most {MAX_REF_CHARS} characters, not {len(ref):,}; pass the "
            "reference a note, placeholder or summary prints, such as '41-57' or 'c12'"
        )
    text = ref.strip(_WRAPPING).rstrip(".,;:").strip(_WRAPPING)
    if not text:
        raise InvalidInputError(
            f"a recall ref needs some text, not {ref!r}; pass the reference a note, placeholder "
            "or summary prints, such as '41-57', 'event 12', 'c12' or a call id"
        )
    compaction = _COMPACTION.match(text)
    if compaction:
        return CompactionRef(ref, int(compaction.group(1)))
    call = _CALL.match(text)
    if call:
        return CallRef(ref, call.group(1).strip(_WRAPPING).rstrip(".,;:"))
    ranges = _ranges(_PREFIX.sub("", text, count=1))
    if ranges is not None:
        return SeqsRef(ref, ranges)
    if any(c.isspace() for c in text):
        raise InvalidInputError(
            f"{ref!r} is not a recall ref: use the reference a note, placeholder or summary "
            "prints, such as '41-57', 'event 12', 'c12' or a call id; to search, pass it as "
            "the query instead"
        )
    return CallRef(ref, text)


def _ranges(text: str) -> tuple[tuple[int, int], ...] | None:
    """The seq ranges of ``12``, ``41-57`` or a comma list of them; None for any other text."""
    parts = [p.strip() for p in _SEPARATOR.split(text)]
    out: list[tuple[int, int]] = []
    for part in parts:
        if part in _ELLIPSIS:
            continue
        if _NUMBER.match(part):
            out.append((int(part), int(part)))
            continue
        found = _RANGE.match(part)
        if found is None:
            return None
        first, last = int(found.group(1)), int(found.group(2))
        if first > last:
            raise InvalidInputError(
                f"the recall ref {text!r} has a reversed range: {first} comes after {last}; "
                f"write it as {last}-{first}"
            )
        out.append((first, last))
    return tuple(out) or None


def format_ranges(seqs: list[int] | tuple[int, ...]) -> str:
    """Sorted seqs as the shortest ref that names them: ``3-5, 9``.

    >>> format_ranges([3, 4, 5, 9])
    '3-5, 9'
    """
    parts: list[str] = []
    start = previous = None
    for seq in seqs:
        if previous is not None and seq == previous + 1:
            previous = seq
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = seq
    if start is not None:
        parts.append(str(start) if start == previous else f"{start}-{previous}")
    return ", ".join(parts)
