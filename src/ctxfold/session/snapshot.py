"""A frozen snapshot of a projection: everything a compaction run reads, and nothing it could
write to.

A run never sees a store or a `Session`: its driver takes a `Snapshot` (that is the I/O), the run
plans edits against it, and the driver lands them. The same run compacts a plain list, from a
snapshot built out of the list (`Snapshot.of_messages`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ctxfold.messages import Message
from ctxfold.messages.frames import frame_kind
from ctxfold.protocols import TokenCounter
from ctxfold.session.projection import Item
from ctxfold.tokens.tally import REPLY_PRIMING_TOKENS


@dataclass(frozen=True)
class Snapshot:
    """A projection as of seq `base_seq`, with its token counts.

    - `session_id`: the session it was read from (None for a plain list).
    - `items`: the projected items, in order; `counts`: each item's tokens, in counter units.
    - `fixed_tokens`: tokens every request carries that no strategy can shrink: the tool
      schemas and the reply priming.
    - `pinned_ids`: the items the application pinned.
    - `base_seq`: the last seq the snapshot reflects; edits planned on it land with this
      `expected_seq`, and the items they create get the seqs after it.
    - `estimate`: what the next request would take, in tokens: the provider's last reported
      figure plus the counts of what came after when `anchored`, else the count.
    """

    session_id: str | None
    items: tuple[Item, ...]
    counts: tuple[int, ...]
    fixed_tokens: int
    pinned_ids: frozenset[int]
    base_seq: int
    estimate: int
    anchored: bool = False

    @classmethod
    def of_messages(
        cls,
        messages: Sequence[Message],
        counter: TokenCounter,
        *,
        tools_tokens: int = 0,
        session_id: str | None = None,
    ) -> Snapshot:
        """The snapshot a fresh session holding `messages` would give: item ids 1 … n.

        A summary or note that ctxfold wrote (`ctxfold.messages.frames`) becomes a summary or
        note item, as in the session it came from, so a list fed back is read as what it is.

        >>> from ctxfold.testing.counters import FixedCounter
        >>> snap = Snapshot.of_messages([Message("user", "two words")], FixedCounter())
        >>> [item.id for item in snap.items], snap.counts, snap.base_seq
        ([1], (4,), 1)
        """
        items = tuple(
            Item(seq, m, frame_kind(m) or "message", seq) for seq, m in enumerate(messages, 1)
        )
        counts = tuple(counter.count_message(m) for m in messages)
        fixed = (REPLY_PRIMING_TOKENS if items else 0) + tools_tokens
        total = sum(counts) + fixed
        return cls(session_id, items, counts, fixed, frozenset(), len(items), total)

    @property
    def total(self) -> int:
        """Counted tokens of the whole request: every item plus the fixed tokens."""
        return sum(self.counts) + self.fixed_tokens

    def scaled(self, target: int) -> int:
        """`target` (provider tokens) in this snapshot's counter units.

        When a provider report backs the estimate, the provider counts differently from our
        counter: scaling the target by the ratio makes "fits" mean fits by the provider's count.
        """
        total = self.total
        if self.anchored and self.estimate > 0 and total > 0:
            return int(target * total / self.estimate)
        return target
