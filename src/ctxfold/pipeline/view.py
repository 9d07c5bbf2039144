"""The working view a pipeline edits: the projected items, their token counts, and the edits made.

Strategies read the view (its structure, what is protected, how far over the target it is) and
propose edits; the pipeline applies them with `apply`, which refuses an edit that does not make
the view smaller. Each applied edit becomes one event payload, numbered with the seq the store
will give it, so later edits of the same run can name the items earlier ones created.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import replace as replaced_copy
from typing import Any

from ctxfold._memo import IdentityMemo
from ctxfold.errors import InvalidHistoryError
from ctxfold.events import LEDGER_PARTS, Compaction, LedgerParts, Mask, MaskedItem, RecordedLedger
from ctxfold.messages import Message
from ctxfold.messages.frames import NOTE_MARK
from ctxfold.messages.media import attachments
from ctxfold.messages.structure import Structure, analyze, is_safe_cut
from ctxfold.pipeline.notes import note_for
from ctxfold.pipeline.proposals import Edit, MaskResults, Replace
from ctxfold.pipeline.rules import Rules, SummaryRole
from ctxfold.pipeline.user_words import Candidate, UserWords, select_user_words
from ctxfold.session.projection import Item, SyntheticAt
from ctxfold.session.snapshot import Snapshot
from ctxfold.summarizers.redact import redacted_all
from ctxfold.tokens.budget import user_words_bound

# The counts of the last notes weighed, per counter (by identity) and text.
_NOTES: IdentityMemo[int] = IdentityMemo(maxsize=4096)

MASKABLE = frozenset({"tool", "user"})
"""The roles a mask may give new content: tool results (cleared, cut) and user messages
(collapsed repeats, shortened past the bound)."""


@dataclass(frozen=True)
class Applied:
    """What one applied edit did to the view: the items it took out (`removed`, as they stood),
    the ones it put in (`added`), their tokens (counter units), and the summary's text before
    framing, for a summary."""

    removed: tuple[Item, ...]
    added: tuple[Item, ...]
    tokens_before: int
    tokens_after: int
    summary: str | None = None
    counts: tuple[tuple[int, int], ...] = ()
    """For a mask: each item's tokens before and after, in the order of `removed`, so that a
    landing can leave out items another writer masked first and still report exact figures."""


class WorkingView:
    """A mutable working copy of a snapshot, owned by one run.

    - `snapshot`: what the run read (items, counts, pins, the seq it reflects).
    - `target`: the tokens to get down to, in counter units.
    - `rules`: what may be given up and how summaries are written.
    - `ceiling`: what a request may take and still be sent, in counter units; the last rung
      (`CutToFit`) cuts the newest tool output only down to it. None, or anything under the
      target: the target.
    - `window`: the most a request can hold at all, in counter units; the last rung cuts the
      user's words only to get under it. None, or anything under the ceiling: the ceiling.
    """

    def __init__(
        self,
        snapshot: Snapshot,
        target: int,
        rules: Rules,
        *,
        ceiling: int | None = None,
        window: int | None = None,
    ) -> None:
        self.items: list[Item] = list(snapshot.items)
        self.counts: list[int] = list(snapshot.counts)
        self._messages = [item.message for item in self.items]
        self.target = target
        self.ceiling = target if ceiling is None else max(target, ceiling)
        self.window = self.ceiling if window is None else max(self.ceiling, window)
        self.rules = rules
        self.fixed_tokens = snapshot.fixed_tokens
        """Tokens sent with every request that no strategy can shrink (tool schemas)."""
        self.pinned_ids = snapshot.pinned_ids
        self.next_seq = snapshot.base_seq + 1
        self.edits: list[Compaction | Mask] = []
        self.changes: list[Applied] = []
        self._counted: dict[tuple[object, ...], tuple[object, int]] = {}
        self._texts: dict[str, int] = {}
        """For each of `edits`, the items it took out of the view and the ones it put in."""
        self._total = sum(self.counts)
        self._structure: Structure | None = None
        self._tail: int | None = None
        self._users: UserWords | None = None

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
        return list(self._messages)

    @property
    def summary_role(self) -> SummaryRole:
        return self.rules.summary_role

    def count(self, message: Message) -> int:
        """Tokens of one message, in the run's counter units.

        A strategy counts the message it proposes and the view counts it again as it applies
        it: a message without tool calls is counted once per run, by the fields counters read
        (its provider fields, which may hold attachments, by identity)."""
        if message.tool_calls:
            return self.rules.counter.count_message(message)
        extra = message.extra
        key = (message.role, message.content, message.name, message.tool_call_id, id(extra))
        found = self._counted.get(key)
        if found is not None and found[0] is extra:
            return found[1]
        if not extra and message.text.startswith(NOTE_MARK):
            # A note's text repeats from run to run (the window weighs the same note for the
            # same gap each time): counted once per counter, not once per run.
            counter = self.rules.counter
            tokens = _NOTES.get(
                (counter,), lambda: counter.count_message(message), (message.role, message.text)
            )
        else:
            tokens = self.rules.counter.count_message(message)
        self._counted[key] = (extra, tokens)  # holding `extra` keeps its id from being reused
        return tokens

    def count_written(self, message: Message) -> int:
        """`count` of a message the run wrote from lines it weighed before (a summary: its
        summarizer weighed each draft from its lines' counts as it fitted it to its budget).

        When the counter can count a message from the caller's text counts
        (`TiktokenCounter.count_message_with`) and the run's text counts add up over lines
        (`TextCounts.lines`), the message's text is counted from the remembered counts of its
        lines, so only lines nobody weighed (the frame, restored identifiers) go through the
        tokenizer; else `count`. The same number either way."""
        lines = getattr(self.rules.count_text, "lines", None)
        with_counts = getattr(self.rules.counter, "count_message_with", None)
        if lines is None or with_counts is None or message.extra or message.tool_calls:
            return self.count(message)
        key = (message.role, message.content, message.name, message.tool_call_id, id(None))
        found = self._counted.get(key)
        if found is not None and found[0] is None:
            return found[1]
        tokens: int = with_counts(message, lines)
        self._counted[key] = (None, tokens)
        return tokens

    def count_text(self, text: str) -> int:
        """Tokens of a text, in the run's counter units; remembered for the run, since the
        ledger's lines and sections are weighed again round after round."""
        tokens = self._texts.get(text)
        if tokens is None:
            count = self.rules.count_text or self.rules.counter.count_text
            tokens = self._texts[text] = count(text)
        return tokens

    def count_lines(self, text: str) -> int:
        """`count_text` of a text made mostly of lines weighed before (a ledger section whose
        entries were weighed one by one as it was filled, a summary read back): summed from the
        remembered counts of its lines when the counter adds up over lines
        (`TextCounts.lines`), so only its new lines are counted; else counted whole. The same
        number either way."""
        tokens = self._texts.get(text)
        if tokens is None:
            lines = getattr(self.rules.count_text, "lines", None)
            if lines is None:
                return self.count_text(text)
            tokens = self._texts[text] = lines(text)
        return tokens

    def synthetic(self) -> frozenset[int]:
        return frozenset(i for i, item in enumerate(self.items) if item.synthetic)

    def structure(self) -> Structure:
        if self._structure is None:
            self._structure = analyze(self.messages, self.synthetic())
        return self._structure

    def redact(self, text: str) -> str:
        """Apply the configured redactor (`summaries-redacted`) to text about to be stored."""
        return self.rules.redact(text) if self.rules.redact else text

    def to_summarize(self, start: int, end: int) -> list[Message]:
        """Messages `[start, end)` as a summarizer may read them: with the configured redactor
        applied, so a secret reaches neither the summarizer nor, through identifier
        restoration, the summary (`summaries-redacted`)."""
        stretch = self._messages[start:end]
        redact = self.rules.redact
        return redacted_all(stretch, redact) if redact else stretch

    def originals(self, start: int, end: int) -> list[Message]:
        """The messages at positions `[start, end)` as they were logged, before any mask (a
        summary or note stays itself): what a summary of them must account for. With a
        redactor configured they are redacted too, so no identifier taken from them can put a
        secret back into a summary (`summaries-redacted`)."""
        logged = [item.unmasked for item in self.items[start:end]]
        redact = self.rules.redact
        return redacted_all(logged, redact) if redact else logged

    def tokens(self, start: int, end: int) -> int:
        return sum(self.counts[start:end])

    @property
    def user_bound(self) -> int:
        """The user's words kept verbatim, in tokens: `rules.keep_user_tokens`, or the smaller
        of 20,000 and half the target."""
        bound = self.rules.keep_user_tokens
        return user_words_bound(self.target) if bound is None else bound

    def user_words(self) -> UserWords:
        """Which real user messages stay verbatim within `user_bound`, which are past it and
        which repeat a later one (`ctxfold.pipeline.user_words`); by position."""
        if self._users is None:
            structure = self.structure()
            candidates = [
                Candidate(i, item.unmasked.text, self.counts[i], bool(attachments(item.unmasked)))
                for i, item in enumerate(self.items)
                if i >= structure.system_end and not item.synthetic and item.message.role == "user"
            ]
            self._users = select_user_words(candidates, self.user_bound)
        return self._users

    def app_pinned(self) -> frozenset[int]:
        """Positions of the items the application pinned."""
        return frozenset(i for i, item in enumerate(self.items) if item.id in self.pinned_ids)

    def hard_pinned(self, keep_steps: int | None = None) -> frozenset[int]:
        """Positions no strategy may touch: system block, current request, newest steps, pending
        calls, items the application pinned, and the user's words within their bound
        (`user-words-kept`)."""
        steps = self.rules.keep_steps if keep_steps is None else keep_steps
        structure = self.structure()
        # The system block is pinned already, and is no unit `pinned` could widen a pin to.
        also = [i for i in self.app_pinned() if i >= structure.system_end]
        return structure.pinned(steps, also) | self.user_words().kept

    def tail_start(self) -> int:
        """Where the verbatim recent tail begins, widened back to a safe cut point.

        The tail holds at least `keep_recent_tokens` of the newest tokens, capped at half the
        target so that a small window can still be reached; and at least `keep_count` and
        `min_messages` of the newest messages whenever the target allows it: when the view could
        still be brought within the target with them kept (see `pinned_tokens`)."""
        if self._tail is None:
            self._tail = self._tail_start()
        return self._tail

    def tail_floor(self) -> int | None:
        """Where the tail could start at the earliest, whatever happens before it: None when its
        newest tokens alone set its start (they hold `keep_count` and `min_messages` messages),
        else the cut that keeps that many messages; the tail then starts between this cut and
        the token tail, as far back as `pinned_tokens` allows, which every edit before it moves."""
        return self._tail_bounds(sorted(self.structure().cuts))[1]

    def _tail_start(self) -> int:
        size = len(self.items)
        cuts = sorted(self.structure().cuts)
        start, widest = self._tail_bounds(cuts)
        if widest is None:
            return start
        # The message tail, as long as it may be: from the cut that keeps `count` messages,
        # shorter one step at a time until the target stays within reach.
        for cut in (c for c in cuts if widest <= c < start):
            if self.pinned_tokens(frozenset(range(cut, size))) <= self.target:
                return cut
        return start

    def _tail_bounds(self, cuts: list[int]) -> tuple[int, int | None]:
        """(where the tail of the newest `keep_recent_tokens` starts, widened back to a cut; the
        cut that keeps `keep_count` and `min_messages` messages when that is further back, else
        None). `cuts`: the view's cut points, in order."""
        size = len(self.items)
        start = size
        want = min(self.rules.keep_recent_tokens, self.target // 2)
        if want > 0:
            seen = 0
            while start > 0 and seen < want:
                start -= 1
                seen += self.counts[start]
            start = max((c for c in cuts if c <= start), default=0)
        count = max(self.rules.keep_count, self.rules.min_messages)
        if count <= 0 or size - count >= start:
            return start, None
        return start, max((c for c in cuts if c <= size - count), default=0)

    def protected(self, keep_steps: int | None = None, *, tail: bool = True) -> frozenset[int]:
        pinned = self.hard_pinned(keep_steps)
        if not tail:
            return pinned
        return pinned | frozenset(range(self.tail_start(), len(self.items)))

    def pinned_tokens(self, kept: frozenset[int] = frozenset()) -> int:
        """The fewest tokens this view can be brought down to: the pinned messages (and the
        positions `kept`), plus, for each gap between them, the one note that would stand for it
        (a dropped stretch always leaves a message in its place), or what is there when the note
        would take more than half of it (such a drop is never made)."""
        pinned = self.hard_pinned() | kept
        structure = self.structure()
        total = self.fixed_tokens
        gap_start: int | None = None
        for index in range(len(self.items) + 1):
            if index < len(self.items) and index not in pinned:
                gap_start = index if gap_start is None else gap_start
                continue
            if (
                gap_start is not None
                and index - gap_start == 1
                and self.items[gap_start].kind == "note"
            ):
                total += self.counts[gap_start]  # a note alone stands for itself already
                gap_start = None
            if gap_start is not None:
                note = note_for(self.items, structure, gap_start, index, self.summary_role)
                gap, cost = self.tokens(gap_start, index), self.count(note.message)
                # `drops-worth-their-note`: a gap no more than twice its note's size stays.
                total += cost if 2 * cost <= gap else gap
                gap_start = None
            if index < len(self.items):
                total += self.counts[index]
        return total

    # -- editing ---------------------------------------------------------------------------
    def apply(self, edit: Edit, strategy: str) -> bool:
        """Apply one edit a strategy (named `strategy`) proposed; False when it was refused
        because it would not make the view smaller.

        Nothing is ever put in place of something smaller (`never-larger`): a replacement no
        smaller than its range is refused, and so is each new content of a `MaskResults` that is
        no smaller than the result it would replace (the others still apply)."""
        if isinstance(edit, Replace):
            return self._replace(edit, strategy)
        return self._mask(edit, strategy)

    def _replace(self, edit: Replace, strategy: str) -> bool:
        start, end = edit.start, edit.end
        if not 0 <= start < end <= len(self.items):
            raise InvalidHistoryError(f"range [{start}, {end}) is not within the view")
        # Checked around the range alone: the window makes one edit per dropped run, and a
        # check over the whole view each time made a long history quadratic.
        synthetic = SyntheticAt(self.items)
        if not (
            is_safe_cut(self._messages, start, synthetic)
            and is_safe_cut(self._messages, end, synthetic)
        ):
            raise InvalidHistoryError(f"range [{start}, {end}) is not bounded by safe cut points")
        guard: Container[int] = self.hard_pinned() if edit.protected is None else edit.protected
        if any(i in guard for i in range(start, end)) or any(
            item.id in self.pinned_ids for item in self.items[start:end]
        ):
            raise InvalidHistoryError(f"range [{start}, {end}) covers a pinned message")
        replaced = self.items[start:end]
        covers = (replaced[0].span[0], replaced[-1].span[1])
        held = edit.identifiers.held if edit.identifiers is not None else None
        item = Item(
            self.next_seq, edit.message, edit.kind, replaced[0].key, covers, None, held, edit.ledger
        )
        new_tokens = self.count_written(edit.message)
        old_tokens = self.tokens(start, end)
        if new_tokens >= old_tokens:
            return False
        self.edits.append(
            Compaction(
                first=replaced[0].id,
                last=replaced[-1].id,
                message=edit.message,
                kind=edit.kind,
                strategy=strategy,
                replaced=tuple(i.id for i in replaced),
                covers=covers,
                tokens_before=old_tokens,
                tokens_after=new_tokens,
                tier=edit.tier,
                identifiers=edit.identifiers,
                summarizer=edit.summarizer,
                dropped=edit.dropped,
                turns=edit.turns,
                range=edit.range,
                counter=self.rules.counter.name,
                ledger=_logged_ledger(edit.ledger, replaced),
            )
        )
        self.changes.append(Applied(tuple(replaced), (item,), old_tokens, new_tokens, edit.summary))
        self.next_seq += 1
        self.items[start:end] = [item]
        self.counts[start:end] = [new_tokens]
        self._messages[start:end] = [item.message]
        self._total += new_tokens - old_tokens
        self._structure = None
        self._tail = None
        self._users = None
        return True

    def _mask(self, edit: MaskResults, strategy: str) -> bool:
        pinned = self.app_pinned()
        new_items: dict[int, Item] = {}
        new_counts: dict[int, int] = {}
        for index, text in edit.placeholders.items():
            old = self.items[index]
            if old.message.role not in MASKABLE or old.synthetic:
                raise InvalidHistoryError(
                    f"position {index} is neither a tool result nor a user message"
                )
            if index in pinned:
                raise InvalidHistoryError(f"position {index} is pinned by the application")
            item = replaced_copy(
                old, message=old.message.replace(content=text), original=old.unmasked
            )
            tokens = self.count(item.message)
            if tokens >= self.counts[index]:
                continue  # `never-larger`: a placeholder longer than the output it replaces
            new_items[index] = item
            new_counts[index] = tokens
        saved = sum(self.counts[i] - new_counts[i] for i in new_items)
        if not new_items or saved <= 0:
            return False
        masked = tuple(
            MaskedItem(self.items[i].id, new_items[i].message.text, new_counts[i])
            for i in sorted(new_items)
        )
        counter = self.rules.counter.name
        self.edits.append(Mask(masked, strategy=strategy, tokens_saved=saved, counter=counter))
        order = sorted(new_items)
        self.changes.append(
            Applied(
                tuple(self.items[i] for i in order),
                tuple(new_items[i] for i in order),
                sum(self.counts[i] for i in order),
                sum(new_counts[i] for i in order),
                counts=tuple((self.counts[i], new_counts[i]) for i in order),
            )
        )
        self.next_seq += 1
        for index, item in new_items.items():
            self.items[index] = item
            self.counts[index] = new_counts[index]
            self._messages[index] = item.message
        self._total -= saved
        self._tail = None  # the structure is unchanged (roles and call ids stay); counts are not
        self._users = None
        return True


def _logged_ledger(
    ledger: RecordedLedger | None, replaced: Sequence[Item]
) -> Mapping[str, Any] | None:
    """What a compaction event logs of the `ledger` of the item it puts in place of `replaced`:
    data as it is; parts (`LedgerParts`) as a list in which the recorded ledger of the k-th
    item replaced is ``{"item": k}``, so the log holds it once (the projection joins them
    again when it folds the event: `ctxfold.events.joined_ledger`). A replaced item's own
    ledger (a summary put back with a smaller ledger section) is such a list of one."""
    if ledger is None:
        return None
    held = {id(item.ledger): k for k, item in enumerate(replaced) if item.ledger is not None}
    if id(ledger) in held:
        return {"version": LEDGER_PARTS, "parts": [{"item": held[id(ledger)]}]}
    if not isinstance(ledger, LedgerParts):
        return ledger
    listed: list[Mapping[str, Any]] = []
    for part in ledger.parts:
        k = held.get(id(part))
        if k is not None:
            listed.append({"item": k})
        elif isinstance(part, LedgerParts):
            raise InvalidHistoryError(
                "a ledger kept in parts may only refer to the ledgers of the items it replaces"
            )
        else:
            listed.append(part)
    return {"version": LEDGER_PARTS, "parts": listed}
