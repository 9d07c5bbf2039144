"""The note that stands where dropped history stood: how much went, and how to recall it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ctxfold.messages import Message
from ctxfold.messages.frames import NOTE_MARK
from ctxfold.messages.structure import Structure
from ctxfold.pipeline.rules import SummaryRole
from ctxfold.session.projection import Item


@dataclass(frozen=True)
class Note:
    """A note for a dropped stretch: its `message`, how many items it stands for (`dropped`) and
    how many user turns began in it (`turns`)."""

    message: Message
    dropped: int
    turns: int


def note_for(
    items: Sequence[Item], structure: Structure, start: int, end: int, role: SummaryRole
) -> Note:
    """The note that stands for `items[start:end]` once they are dropped; `structure` is the
    structure of all of `items`."""
    turns = structure.turns_begun(start, end)
    return note_over(items[start], items[end - 1], end - start, turns, role)


def note_over(first: Item, last: Item, dropped: int, turns: int, role: SummaryRole) -> Note:
    """The note that stands for `dropped` items, from `first` to `last`, in which `turns` user
    turns began: what `note_for` writes, for a caller that knows these already."""
    low, high = first.span[0], last.span[1]
    return Note(Message(role, _note_text(dropped, turns, low, high)), dropped, turns)


def _note_text(items: int, turns: int, first_seq: int, last_seq: int) -> str:
    what = f"{items} message{'s' if items != 1 else ''}"
    if turns:
        what += f" spanning {turns} user turn{'s' if turns != 1 else ''}"
    return (
        f"{NOTE_MARK}: {what} (log items {first_seq}–{last_seq}) were removed to fit the "
        "context window. The originals are kept in the session log; recall them from there if "
        "their exact text matters.]"
    )
