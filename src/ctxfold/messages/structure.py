"""The shape of a transcript: system block, turns, steps, pending calls and safe cut points.

Pure functions over a message list. Strategies use this to decide what they may touch:

- the *system block* is the leading run of system messages;
- a *step* is an assistant message together with the tool messages that directly follow it (the
  results of its calls, parallel calls included), so a step is never split;
- a *turn* starts at a real user message and runs to the next one; the last turn is the current
  task;
- a *safe cut point* is an index where the history may be cut: the start of a unit (a step, a user
  message, a summary) or the end. Cutting anywhere else would separate a call from its result.

Whether an index is a safe cut, and whether the last step still waits for results, depend only on
the messages around it (`is_safe_cut`, `pending_step`): an edit that checks one range need not
analyze the whole history again.

Summaries and notes that ctxfold put into a history are not real user messages even when they
carry the user role; callers say which indices are such *synthetic* items.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from ctxfold.errors import InvalidInputError
from ctxfold.messages._values import Message

UnitKind = Literal["system", "user", "step", "synthetic", "orphan", "other"]


@dataclass(frozen=True)
class Unit:
    """A run of messages `[start, end)` that strategies keep or give up as a whole."""

    start: int
    end: int
    kind: UnitKind

    def __len__(self) -> int:
        return self.end - self.start

    @property
    def indices(self) -> range:
        return range(self.start, self.end)


@dataclass(frozen=True)
class Turn:
    """A real user message (`user`, None for a preamble before the first one) and what followed."""

    start: int
    end: int
    user: int | None
    units: tuple[Unit, ...]

    @property
    def steps(self) -> tuple[Unit, ...]:
        return tuple(u for u in self.units if u.kind == "step")


@dataclass(frozen=True)
class Structure:
    """What `analyze` found in a message list. Indices refer to that list."""

    size: int
    system_end: int
    units: tuple[Unit, ...]
    turns: tuple[Turn, ...]
    pending: tuple[int, ...]
    """Indices of assistant messages at the end whose calls have no result yet."""

    @property
    def current_turn(self) -> Turn | None:
        return self.turns[-1] if self.turns else None

    @property
    def current_request(self) -> int | None:
        """Index of the user message of the current task, if there is one."""
        turn = self.current_turn
        return turn.user if turn else None

    @property
    def cuts(self) -> frozenset[int]:
        """Every index where the history may be cut without splitting a step."""
        return frozenset([u.start for u in self.units] + [self.system_end, self.size])

    @property
    def steps(self) -> tuple[Unit, ...]:
        return tuple(u for u in self.units if u.kind == "step")

    def turns_begun(self, start: int, end: int) -> int:
        """How many user turns begin at an index in `[start, end)` (a preamble is no user turn)."""
        return bisect_left(self._requests, end) - bisect_left(self._requests, start)

    @cached_property
    def _requests(self) -> tuple[int, ...]:
        return tuple(t.start for t in self.turns if t.user is not None)

    def unit_at(self, index: int) -> Unit:
        for unit in self.units:
            if unit.start <= index < unit.end:
                return unit
        raise InvalidInputError(f"index {index} is outside the history of {self.size} messages")

    def pinned(self, keep_steps: int = 1, also: Iterable[int] = ()) -> frozenset[int]:
        """Indices no strategy may touch: the system block, the current request, the newest
        `keep_steps` steps, any step with a pending call, and `also` (widened to whole units)."""
        out: set[int] = set(range(self.system_end))
        if self.current_request is not None:
            out.add(self.current_request)
        steps = self.steps
        for unit in steps[len(steps) - keep_steps :] if keep_steps > 0 else ():
            out.update(unit.indices)
        for index in self.pending:
            out.update(self.unit_at(index).indices)
        for index in also:
            out.update(self.unit_at(index).indices)
        return frozenset(out)


def answers(call_ids: Sequence[str], results: Sequence[Message]) -> tuple[list[int], list[str]]:
    """Pair tool results with the calls of one assistant message, by position for repeated ids.

    Returns the positions (into `results`) that answer none of the calls, and the call ids left
    without a result. A call id used twice pairs its first result with its first call.
    """
    open_calls = Counter(call_ids)
    orphans: list[int] = []
    for position, result in enumerate(results):
        call_id = result.tool_call_id or ""
        if open_calls[call_id] > 0:
            open_calls[call_id] -= 1
        else:
            orphans.append(position)
    # The unanswered calls of a repeated id are its last ones: results pair with calls in order.
    missing: list[str] = []
    for call_id in reversed(call_ids):
        if open_calls[call_id] > 0:
            open_calls[call_id] -= 1
            missing.append(call_id)
    return orphans, missing[::-1]


def analyze(messages: Sequence[Message], synthetic: Container[int] = ()) -> Structure:
    """Find the system block, units, turns and pending calls of `messages`.

    `synthetic` names indices that ctxfold itself inserted (summaries, notes): they form units of
    their own and never start a turn.

    >>> from ctxfold.messages import Message, ToolCall
    >>> s = analyze([Message("system", "be brief"), Message("user", "hi"),
    ...              Message("assistant", None, (ToolCall("c1", "ls"),)),
    ...              Message("tool", "a.py", tool_call_id="c1")])
    >>> (s.system_end, [u.kind for u in s.units], sorted(s.cuts))
    (1, ['user', 'step'], [1, 2, 4])
    """
    n = len(messages)
    system_end = 0
    while system_end < n and _system(messages, system_end, synthetic):
        system_end += 1

    units: list[Unit] = []
    i = system_end
    while i < n:
        message = messages[i]
        if i in synthetic:
            units.append(Unit(i, i + 1, "synthetic"))
            i += 1
        elif message.role in _TAKES_RESULTS:
            j = i + 1
            while j < n and _result(messages, j, synthetic):
                j += 1
            units.append(Unit(i, j, "step" if message.role == "assistant" else "orphan"))
            i = j
        elif message.role == "user":
            units.append(Unit(i, i + 1, "user"))
            i += 1
        else:
            units.append(Unit(i, i + 1, "other"))
            i += 1

    turns: list[Turn] = []
    current: list[Unit] = []
    for unit in units:
        if unit.kind == "user" and current:
            turns.append(_turn(current))
            current = []
        current.append(unit)
    if current:
        turns.append(_turn(current))

    pending: list[int] = []
    if units and units[-1].kind == "step" and _waits(messages, units[-1].start):
        pending.append(units[-1].start)

    return Structure(n, system_end, tuple(units), tuple(turns), tuple(pending))


def _turn(units: list[Unit]) -> Turn:
    first = units[0]
    return Turn(
        first.start, units[-1].end, first.start if first.kind == "user" else None, tuple(units)
    )


def is_safe_cut(messages: Sequence[Message], index: int, synthetic: Container[int] = ()) -> bool:
    """Whether the history may be cut just before `index` without splitting a step: the same
    answer as ``index in analyze(messages, synthetic).cuts``, from the messages next to `index`
    alone (and the system block, when `index` is in it or just after it)."""
    if index == len(messages):
        return True
    if not 0 <= index < len(messages):
        return False
    if index > 0 and _result(messages, index, synthetic):
        previous = index - 1
        if previous not in synthetic and messages[previous].role in _TAKES_RESULTS:
            return False  # a result of the step (or the stray results) before it
    return not in_system_block(messages, index, synthetic)


def in_system_block(
    messages: Sequence[Message], index: int, synthetic: Container[int] = ()
) -> bool:
    """Whether `index` is in the leading run of system messages (`Structure.system_end`): one
    look, unless the message at `index` is a system message."""
    return all(_system(messages, i, synthetic) for i in range(index, -1, -1))


def pending_step(messages: Sequence[Message], synthetic: Container[int] = ()) -> int | None:
    """The index of the last step when some of its calls have no result yet (the one entry of
    `Structure.pending`), else None; from the last step alone."""
    start = len(messages) - 1
    while start > 0 and _result(messages, start, synthetic):
        start -= 1
    if start < 0 or start in synthetic or messages[start].role != "assistant":
        return None
    return start if _waits(messages, start) else None


_TAKES_RESULTS = ("assistant", "tool")
"""The roles whose unit goes on over the tool results after it: a step, or stray results."""


def _system(messages: Sequence[Message], index: int, synthetic: Container[int]) -> bool:
    return messages[index].role == "system" and index not in synthetic


def _result(messages: Sequence[Message], index: int, synthetic: Container[int]) -> bool:
    """Whether the message at `index` is a tool result, which belongs to the unit before it when
    that unit takes results."""
    return messages[index].role == "tool" and index not in synthetic


def _waits(messages: Sequence[Message], start: int) -> bool:
    """Whether the step at `start` (to the end of `messages`) has a call without a result."""
    calls = [c.id for c in messages[start].tool_calls]
    _, missing = answers(calls, messages[start + 1 :])
    return bool(missing)
