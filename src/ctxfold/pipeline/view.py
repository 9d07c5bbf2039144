"""The working view a pipeline edits: the projected items, their token counts, and the edits made.

Strategies read the view (its structure, what is protected, how far over the target it is) and
propose edits through `replace` and `mask`. The view applies an edit only when it makes the view
smaller and respects the cut rules; each applied edit becomes one event, numbered with the seq the
store will give it, so later edits of the same run can name the items earlier ones created.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxfold.errors import InvalidHistoryError
from ctxfold.events import COMPACTION, MASK, NewEvent
from ctxfold.messages import Message
from ctxfold.messages.structure import Structure, analyze
from ctxfold.projection import Item, ItemKind

CountItem = Callable[[Item], int]


@dataclass
class RunStats:
    """What happened during one pipeline run, beyond the edits themselves."""

    summarizer_calls: int = 0
    summarizer_input_tokens: int = 0
    summarizer_output_tokens: int = 0
    summarizer_model: str | None = None
    stretch_tokens: int = 0
    """Tokens of history handed to summarizers (each stretch counted once per request)."""
    identifiers_kept: int = 0
    identifiers_left_out: int = 0
    left_out: list[str] = field(default_factory=list)
    summaries: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failure: BaseException | None = None
    """The first exception a summarizer raised, kept so a manual compact can raise it."""


class WorkingView:
    """A mutable working copy of a projection, owned by one pipeline run."""

    def __init__(
        self,
        items: Sequence[Item],
        *,
        count: CountItem,
        count_text: Callable[[str], int],
        target: int,
        next_seq: int,
        keep_steps: int = 1,
        keep_recent_tokens: int = 0,
        pinned_ids: Iterable[int] = (),
        fixed_tokens: int = 0,
        summary_role: str = "user",
        redact: Callable[[str], str] | None = None,
    ) -> None:
        self.items: list[Item] = list(items)
        self._count = count
        self.count_text = count_text
        self.counts: list[int] = [count(item) for item in self.items]
        self._total = sum(self.counts)
        self.target = target
        self.next_seq = next_seq
        self.keep_steps = keep_steps
        self.keep_recent_tokens = keep_recent_tokens
        self.pinned_ids = frozenset(pinned_ids)
        self.fixed_tokens = fixed_tokens
        """Tokens sent with every request that no strategy can shrink (tool schemas)."""
        self.summary_role = summary_role
        self._redact = redact
        self.events: list[NewEvent] = []
        self.stats = RunStats()
        self._structure: Structure | None = None

    # -- reading ---------------------------------------------------------------------------
    @property
    def total(self) -> int:
        return self._total + self.fixed_tokens

    @property
    def fits(self) -> bool:
        return self.total <= self.target

    @property
    def excess(self) -> int:
        return max(0, self.total - self.target)

    @property
    def messages(self) -> list[Message]:
        return [item.message for item in self.items]

    def synthetic(self) -> frozenset[int]:
        return frozenset(i for i, item in enumerate(self.items) if item.synthetic)

    def structure(self) -> Structure:
        if self._structure is None:
            self._structure = analyze(self.messages, self.synthetic())
        return self._structure

    def redact(self, text: str) -> str:
        """Apply the configured redactor (`summaries-redacted`) to text about to be stored."""
        return self._redact(text) if self._redact else text

    def tokens(self, start: int, end: int) -> int:
        return sum(self.counts[start:end])

    def hard_pinned(self, keep_steps: int | None = None) -> frozenset[int]:
        """Indices no strategy may touch: system block, current request, newest steps, pending
        calls, and items the application pinned."""
        also = [i for i, item in enumerate(self.items) if item.id in self.pinned_ids]
        steps = self.keep_steps if keep_steps is None else keep_steps
        return self.structure().pinned(steps, also)

    def tail_start(self) -> int:
        """Where the verbatim recent tail begins: at least `keep_recent_tokens` of the newest
        tokens, widened back to a safe cut point. Capped at half the target, so that a small
        window can still be reached."""
        want = min(self.keep_recent_tokens, self.target // 2)
        if want <= 0:
            return len(self.items)
        index, seen = len(self.items), 0
        while index > 0 and seen < want:
            index -= 1
            seen += self.counts[index]
        cuts = self.structure().cuts
        while index > 0 and index not in cuts:
            index -= 1
        return index

    def protected(self, keep_steps: int | None = None, *, tail: bool = True) -> frozenset[int]:
        pinned = self.hard_pinned(keep_steps)
        if not tail:
            return pinned
        return pinned | frozenset(range(self.tail_start(), len(self.items)))

    def pinned_tokens(self) -> int:
        """The fewest tokens this view can be brought down to: the pinned messages, plus, for each
        gap between them, the smaller of what is there and the one note that would stand for it
        (a dropped stretch always leaves a message in its place)."""
        from ctxfold.pipeline.window import note_for

        pinned = self.hard_pinned()
        total = self.fixed_tokens
        gap_start: int | None = None
        for index in range(len(self.items) + 1):
            if index < len(self.items) and index not in pinned:
                gap_start = index if gap_start is None else gap_start
                continue
            if gap_start is not None:
                note, _ = note_for(self, gap_start, index)
                stand_in = self._count(Item(self.next_seq, note, "note"))
                total += min(self.tokens(gap_start, index), stand_in)
                gap_start = None
            if index < len(self.items):
                total += self.counts[index]
        return total

    # -- editing ---------------------------------------------------------------------------
    def replace(
        self,
        start: int,
        end: int,
        message: Message,
        *,
        kind: ItemKind,
        strategy: str,
        meta: Mapping[str, Any] | None = None,
        protected: frozenset[int] | None = None,
    ) -> Item | None:
        """Replace items `[start, end)` with one message. Returns the new item, or None when the
        message is no smaller than what it would replace (the edit is refused)."""
        if not 0 <= start < end <= len(self.items):
            raise InvalidHistoryError(f"range [{start}, {end}) is not within the view")
        structure = self.structure()
        if start not in structure.cuts or end not in structure.cuts:
            raise InvalidHistoryError(f"range [{start}, {end}) is not bounded by safe cut points")
        guard = self.hard_pinned() if protected is None else protected
        if any(start <= i < end for i in guard):
            raise InvalidHistoryError(f"range [{start}, {end}) covers a pinned message")
        seq = self.next_seq
        replaced = self.items[start:end]
        first = replaced[0].covers[0] if replaced[0].covers else replaced[0].id
        last = replaced[-1].covers[1] if replaced[-1].covers else replaced[-1].id
        item = Item(seq, message, kind, replaced[0].key, (first, last))
        new_tokens = self._count(item)
        old_tokens = self.tokens(start, end)
        if new_tokens >= old_tokens:
            return None
        data: dict[str, Any] = {
            "first": replaced[0].id,
            "last": replaced[-1].id,
            "replaced": [i.id for i in replaced],
            "covers": [first, last],
            "message": message.to_dict(),
            "kind": kind,
            "strategy": strategy,
            "tokens_before": old_tokens,
            "tokens_after": new_tokens,
        }
        data.update(meta or {})
        self.events.append(NewEvent(COMPACTION, data))
        self.next_seq += 1
        self.items[start:end] = [item]
        self.counts[start:end] = [new_tokens]
        self._total += new_tokens - old_tokens
        self._structure = None
        return item

    def mask(self, placeholders: Mapping[int, str], *, strategy: str) -> bool:
        """Replace the content of the tool results at these indices. Refused (False) unless the
        view gets smaller."""
        new_items: dict[int, Item] = {}
        new_counts: dict[int, int] = {}
        for index, text in placeholders.items():
            old = self.items[index]
            if old.message.role != "tool":
                raise InvalidHistoryError(f"index {index} is not a tool result")
            item = Item(old.id, old.message.replace(content=text), old.kind, old.key)
            new_items[index] = item
            new_counts[index] = self._count(item)
        saved = sum(self.counts[i] - new_counts[i] for i in new_items)
        if not new_items or saved <= 0:
            return False
        self.events.append(
            NewEvent(
                MASK,
                {
                    "items": [
                        {"id": self.items[i].id, "content": new_items[i].message.content}
                        for i in sorted(new_items)
                    ],
                    "strategy": strategy,
                    "tokens_saved": saved,
                },
            )
        )
        self.next_seq += 1
        for index, item in new_items.items():
            self.items[index] = item
            self.counts[index] = new_counts[index]
        self._total -= saved
        # Masks keep roles and call ids, so the structure is unchanged.
        return True
