"""The user's words: which user messages stay verbatim within the bound, and which are past it.

The task (the first real request) and every later instruction are what the agent works for, so
they are the last thing a compaction gives up (`user-words-kept`). Up to a bound in tokens (by
default the smaller of 20,000 and half the target, `Budget.keep_user_tokens`) no strategy
summarizes or drops them: they are protected like the system prompt, and summaries land around
them. Which messages the bound holds is decided by `select_user_words`, in this order: the task,
the current request (always kept, like every pin), then the others from the newest back; the
first that no longer fits and every older one are *past the bound*.

Two rungs act on user messages (`ctxfold.pipeline.user_messages`), only by masks, so the log
keeps every original:

- `CollapseRepeats`: a harness that sends the same nudge again and again ("No tool calls found in
  the response…") leaves older identical copies; each becomes one line naming the copy kept and
  how many were sent (`user-repeats-collapsed`). Repeats never count against the bound.
- `ShortenUserMessages`: past the bound, the oldest user messages keep their head and tail with a
  marker naming the log item that holds the whole text (`user-words-shortened-past-bound`). They
  are never summarized into prose.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ctxfold.summarizers.ledger.build import is_request


@dataclass(frozen=True)
class Candidate:
    """One real user message: its position (any key that orders them), its original text, its
    tokens as it stands now, and whether it carries media (an image, a document) beside its
    text."""

    position: int
    text: str
    tokens: int
    media: bool = False


@dataclass(frozen=True)
class UserWords:
    """What `select_user_words` decided, by position.

    - `kept`: verbatim within the bound (the current request is always among them);
    - `over`: past the bound, oldest first: the first to be shortened;
    - `repeats`: an older identical copy → the position of the copy that stands for it;
    - `copies`: for each copy that stands for repeats, how many were sent in all;
    - `task`: the position of the task (the first real request), if any.
    """

    kept: frozenset[int] = frozenset()
    over: tuple[int, ...] = ()
    repeats: dict[int, int] = field(default_factory=dict)
    copies: dict[int, int] = field(default_factory=dict)
    task: int | None = None

    @property
    def protected(self) -> frozenset[int]:
        """Every user message no summary may turn into prose: within the bound or past it."""
        return self.kept | frozenset(self.over)


def select_user_words(candidates: Sequence[Candidate], bound: int) -> UserWords:
    """Which of `candidates` (real user messages, oldest first) stay verbatim within `bound`
    tokens: the task first, then the newest (the current request always), then the others from
    the newest back, until one does not fit; repeats of a message count once, as the copy that
    stands for them (the task when it is one of them, else the newest). A `bound` of 0 turns
    the protection off: nothing is kept or past the bound.

    >>> c = [Candidate(1, "Fix the parser.", 5), Candidate(4, "nudge", 3),
    ...      Candidate(7, "Use bytes.", 4), Candidate(9, "nudge", 3)]
    >>> words = select_user_words(c, bound=11)
    >>> sorted(words.kept), words.over, words.repeats, words.task
    ([1, 9], (7,), {4: 9}, 1)
    """
    if not candidates:
        return UserWords()
    task = next((c.position for c in candidates if is_request(c.text)), None)
    keeper: dict[str, int] = {}
    for candidate in candidates:
        key = _repeat_key(candidate)
        if key is None:
            continue
        stands = keeper.get(key)
        if stands is None or stands != task:  # the newest copy, unless the task is one
            keeper[key] = candidate.position
    repeats: dict[int, int] = {}
    copies: dict[int, int] = {}
    for candidate in candidates:
        key = _repeat_key(candidate)
        if key is None:
            continue
        stands = keeper[key]
        copies[stands] = copies.get(stands, 0) + 1
        if stands != candidate.position:
            repeats[candidate.position] = stands
    distinct = [c for c in candidates if c.position not in repeats]
    copies = {k: n for k, n in copies.items() if n > 1}
    if bound <= 0:
        # Turned off: the user's messages are given up like any other (the current request
        # stays pinned by the structure of the history).
        return UserWords(repeats=repeats, copies=copies, task=task)
    current = candidates[-1].position
    by_position = {c.position: c for c in distinct}
    order: list[int] = []
    if task is not None:
        order.append(task)
    if current not in order and current in by_position:
        order.append(current)
    order += [c.position for c in reversed(distinct) if c.position not in order]
    kept: set[int] = set()
    used = 0
    full = False
    for position in order:
        tokens = by_position[position].tokens
        if position == current or (not full and used + tokens <= bound):
            kept.add(position)
            used += tokens
        elif position != task:
            full = True  # this one and every older one are past the bound
    over = tuple(c.position for c in distinct if c.position not in kept)
    return UserWords(frozenset(kept), over, repeats, copies, task)


def _repeat_key(candidate: Candidate) -> str | None:
    """What makes two user messages the same message: their text. None for a message that
    repeats nothing: one with no text (two pictures sent alone are not one picture), or one
    that carries media beside its text (the same question about another image)."""
    key = candidate.text.strip()
    return None if not key or candidate.media else key
