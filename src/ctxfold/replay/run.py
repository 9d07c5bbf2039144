"""Replay a transcript into a session the way a live agent would, with compaction on.

`replay` appends the transcript message by message. Before each model request (the point where
the next message is the assistant's answer) it runs the compactor's automatic trigger, exactly as
an agent loop calls `maybe_compact` before sending, and records what the model would have been
sent: its size, any compaction that ran, and how much of it was a prefix of the previous request,
which is what a provider's prompt cache could reuse.

The functions read no files and no environment; the CLI formats the `ReplayResult`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING, Any

from ctxfold._assembled import assembled
from ctxfold.errors import BudgetError, ConflictError, InvalidHistoryError
from ctxfold.events import COMPACTION
from ctxfold.messages import Message, validate
from ctxfold.replay.fidelity import Fidelity, measure
from ctxfold.session.frozen import Frozen

if TYPE_CHECKING:
    from ctxfold.compactor import CompactionReport, Compactor
    from ctxfold.events import Event
    from ctxfold.messages.validity import Provider
    from ctxfold.protocols import Summarizer, TokenCounter
    from ctxfold.session import Session
    from ctxfold.storage import StoreBase
    from ctxfold.tokens import Budget


@dataclass(frozen=True)
class Request:
    """One model request during the replay.

    - `turn`: 1, 2, 3 … in request order; `message`: how many transcript messages were in by then.
    - `tokens_before`: the compactor's estimate before its trigger ran; `tokens`: after.
    - `request_tokens`: the projected messages as the counter counts them; `prefix_tokens`: the
      part of them that the previous request began with, message for message.
    - `compaction`: index into `ReplayResult.compactions` when one ran before this request.
    """

    turn: int
    message: int
    tokens_before: int
    tokens: int
    request_tokens: int
    prefix_tokens: int
    compaction: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "message": self.message,
            "tokens_before": self.tokens_before,
            "tokens": self.tokens,
            "request_tokens": self.request_tokens,
            "prefix_tokens": self.prefix_tokens,
            "compaction": self.compaction,
        }


@dataclass(frozen=True)
class ReplayCompaction:
    """A compaction the automatic trigger ran before request `turn`, with the engine's report."""

    turn: int
    report: CompactionReport

    @property
    def saved(self) -> int:
        return self.report.tokens_before - self.report.tokens_after

    def to_dict(self) -> dict[str, Any]:
        return {"turn": self.turn, "saved": self.saved, **self.report.to_dict()}


@dataclass(frozen=True)
class ReplayResult:
    """What a replay saw. Token figures are tokens, not characters.

    `window`, `trigger` and `target` are the budget's, in tokens; `original_tokens` is what the
    whole transcript would take with no compaction at all.
    """

    window: int
    trigger: int
    target: int
    messages: int
    original_tokens: int
    requests: tuple[Request, ...]
    compactions: tuple[ReplayCompaction, ...]
    duration_s: float
    counter: str
    summaries: tuple[str, ...] = field(default=())
    fidelity: Fidelity | None = None
    """What the final view kept of the user's words, identifiers and probes (see
    `ctxfold.replay.fidelity`)."""

    @property
    def summarizer_calls(self) -> int:
        return sum(c.report.summarizer_calls for c in self.compactions)

    @property
    def failed_compactions(self) -> int:
        return sum(1 for c in self.compactions if not c.report.landed or c.report.error)

    @property
    def peak_tokens(self) -> int:
        return max((r.tokens for r in self.requests), default=0)

    @property
    def final_tokens(self) -> int:
        return self.requests[-1].tokens if self.requests else 0

    @property
    def over_window(self) -> tuple[int, ...]:
        """The turns whose request took more tokens than the window: a provider refuses those.
        Compaction could not bring them under it (too few messages yet for `min_messages`, or
        what is left is kept whole: the system prompt, the newest turn, pinned items)."""
        return tuple(r.turn for r in self.requests if r.tokens > self.window)

    @property
    def requested_tokens(self) -> int:
        """Tokens sent over the whole run: the sum of every request's size."""
        return sum(r.request_tokens for r in self.requests)

    @property
    def reused_tokens(self) -> int:
        """Of `requested_tokens`, those that repeated the previous request's prefix."""
        return sum(r.prefix_tokens for r in self.requests)

    @property
    def cache_reuse(self) -> float:
        """`reused_tokens / requested_tokens`: the share a prompt cache could serve (0 to 1)."""
        return self.reused_tokens / self.requested_tokens if self.requested_tokens else 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `docs/cli.md` documents its keys."""
        return {
            "window": self.window,
            "trigger": self.trigger,
            "target": self.target,
            "messages": self.messages,
            "requests": len(self.requests),
            "original_tokens": self.original_tokens,
            "peak_tokens": self.peak_tokens,
            "final_tokens": self.final_tokens,
            "over_window": list(self.over_window),
            "compactions": [c.to_dict() for c in self.compactions],
            "failed_compactions": self.failed_compactions,
            "summarizer_calls": self.summarizer_calls,
            "requested_tokens": self.requested_tokens,
            "reused_tokens": self.reused_tokens,
            "cache_reuse": round(self.cache_reuse, 4),
            "duration_s": round(self.duration_s, 3),
            "counter": self.counter,
            "fidelity": self.fidelity.to_dict() if self.fidelity is not None else None,
            "turns": [r.to_dict() for r in self.requests],
        }


def replay(
    session: Session,
    messages: Sequence[Message],
    compactor: Compactor,
    *,
    counter: TokenCounter | None = None,
    progress: Callable[[int], None] | None = None,
    provider: Provider = "openai",
    fidelity: bool = True,
    new_session: bool = False,
) -> ReplayResult:
    """Play `messages` into `session` with `compactor`'s automatic trigger on; report each request.

    `counter` sizes requests for the prefix figures (default: the compactor's counter).
    `progress`, when given, is called with the number of messages appended after each one.
    `fidelity` (default True) measures what the final view kept (`ReplayResult.fidelity`,
    `ctxfold.replay.fidelity`), recall included; False leaves it None, for timing the replay
    alone. `new_session` True: the session must still be empty, and the first append says so to
    the store (``expected_seq=0``), so that a writer that took the id meanwhile makes it raise
    `ConflictError` with nothing written, rather than two runs share one session.
    Raises `BudgetError` for a compactor without a budget (it has no trigger to replay) or a
    system prompt that alone exceeds the window, before anything is appended; and
    `InvalidHistoryError` if a compaction ever left a history `provider` would reject (that
    would be a bug in ctxfold: `history-always-valid`).

    >>> from ctxfold.compactor import Compactor
    >>> from ctxfold.testing.transcripts import generate
    >>> from ctxfold.storage import MemoryStore
    >>> from ctxfold.tokens import Budget
    >>> compactor = Compactor(Budget(window=16_000))
    >>> result = replay(MemoryStore().session("r"), generate(steps=40), compactor)
    >>> result.peak_tokens < 16_000 < result.original_tokens
    True
    """
    budget = compactor.budget
    if budget is None:
        raise BudgetError("replay needs a compactor with a budget: its trigger is what is replayed")
    count = counter or compactor.counter
    sizes = _Sizes(count, session if count is compactor.counter else None)
    system = sizes.total([m for m in messages if m.role == "system"])
    if system > budget.window:
        raise BudgetError(
            f"the system prompt alone takes {system:,} tokens, more than the "
            f"{budget.window:,}-token window; give a larger window"
        )
    started = time.perf_counter()
    requests: list[Request] = []
    compactions: list[ReplayCompaction] = []
    previous: Sequence[Message] = ()
    seqs: list[int] = []
    asks = _request_points(messages)
    for index, message in enumerate(messages):
        if index == 0 and new_session:
            stored = session.append(message, expected_seq=0)
        else:
            stored = session.append(message)
        sizes.appended(message, stored)
        seqs.append(stored[0].seq if stored else session.last_seq)
        if progress is not None:
            progress(1)
        if not asks[index]:
            continue
        turn = len(requests) + 1
        before = compactor.estimate(session)
        report = compactor.maybe_compact(session)
        slot: int | None = None
        if report is not None:
            slot = len(compactions)
            compactions.append(ReplayCompaction(turn, report))
        projected = session.messages()
        if report is not None and report.landed:
            _check_valid(projected, provider, turn)
        request_tokens, prefix_tokens = sizes.request(previous, projected)
        requests.append(
            _request(
                turn=turn,
                message=index + 1,
                tokens_before=before,
                tokens=compactor.estimate(session) if report is not None else before,
                request_tokens=request_tokens,
                prefix_tokens=prefix_tokens,
                compaction=slot,
            )
        )
        previous = projected
    duration = time.perf_counter() - started
    original = sizes.total(messages)
    return ReplayResult(
        window=budget.window,
        trigger=budget.trigger_tokens,
        target=budget.target_tokens,
        messages=len(messages),
        original_tokens=original,
        requests=tuple(requests),
        compactions=tuple(compactions),
        duration_s=duration,
        counter=str(getattr(count, "name", type(count).__name__)),
        summaries=tuple(s for c in compactions for s in c.report.summaries),
        fidelity=measure(
            messages,
            session.items(),
            lambda message: sizes.total([message]),
            user_bound=budget.user_words_tokens,
            target=budget.target_tokens,
            largest_summary=_largest_summary(compactions),
            read_tokens=sum(c.report.stretch_tokens for c in compactions),
            history_tokens=original,
            seqs=seqs,
            recall=lambda query: session.recall(query).seqs,
        )
        if fidelity
        else None,
    )


def replay_transcript(
    messages: Sequence[Message],
    budget: Budget,
    *,
    store: StoreBase | None = None,
    name: str = "replay",
    counter: TokenCounter | None = None,
    progress: Callable[[int], None] | None = None,
    provider: Provider = "openai",
    summarizer: Summarizer | None = None,
    redact: Callable[[str], str] | None = None,
) -> ReplayResult:
    """Replay `messages` into a new session of `store` (default: a fresh `MemoryStore`) with the
    default compactor for `budget`, `summarizer` (default: the extractive one) and `redact`
    applied to every summary before it is stored.

    The session is named `name`, or ``name-2``, ``name-3``... when taken, so a replay never
    appends to an earlier one. `counter` defaults to the best available (``counter("auto")``).

    >>> from ctxfold.testing.transcripts import generate
    >>> from ctxfold.tokens import Budget
    >>> replay_transcript(generate(steps=40), Budget(window=16_000)).peak_tokens < 16_000
    True
    """
    from ctxfold.compactor import Compactor
    from ctxfold.storage import MemoryStore
    from ctxfold.tokens import counter as best_counter

    count = counter or best_counter("auto")
    target = store if store is not None else MemoryStore()
    compactor = Compactor(budget, summarizer=summarizer, counter=count, redact=redact)

    def into_a_new_session() -> ReplayResult:
        session = target.session(fresh_session_id(target, name), counter=count)
        return replay(
            session,
            messages,
            compactor,
            counter=count,
            progress=progress,
            provider=provider,
            new_session=True,
        )

    for _ in range(_CLAIMS - 1):
        try:
            return into_a_new_session()
        except ConflictError:
            # Another replay took the id between the look and the first append (several runs
            # into one database at once): nothing of this one was written; take the next id.
            continue
    return into_a_new_session()


_CLAIMS = 20
"""Ids a replay tries before it gives up on finding a new session (each taken by a racing run)."""


def fresh_session_id(store: StoreBase, base: str) -> str:
    """`base`, or `base-2`, `base-3`, ...: the first id `store` holds no session under."""
    taken = set(store.sessions())
    if base not in taken:
        return base
    n = 2
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"


def _largest_summary(compactions: Sequence[ReplayCompaction]) -> int:
    """Tokens of the largest summary any compaction stored."""
    sizes = [
        int(event.data.get("tokens_after") or 0)
        for c in compactions
        for event in c.report.events
        if event.type == COMPACTION and event.data.get("kind") == "summary"
    ]
    return max(sizes, default=0)


def _check_valid(projected: Sequence[Message], provider: Provider, turn: int) -> None:
    errors = [p for p in validate(projected, provider) if p.severity == "error"]
    if errors:
        raise InvalidHistoryError(
            f"the compaction before request {turn} left a history {provider} would reject "
            f"({errors[0]}); this is a bug in ctxfold, please report it"
        )


def _common_prefix(a: Sequence[Message], b: Sequence[Message]) -> list[Message]:
    """The longest run of messages both lists start with."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x is not y and x != y:
            break
        n += 1
    return list(b[:n])


class _Sizes:
    """Per-message token counts, each message counted once: consecutive requests share most of
    their messages.

    Given the `session`, whose tally counts with this same counter, the counts come from that
    tally, which counted every message as it was appended and took each summary's count from its
    compaction event: the replay then counts nothing itself, and a request's size is the
    tally's sum over the items it holds."""

    def __init__(self, counter: TokenCounter, session: Session | None = None) -> None:
        self.counter = counter
        self.session = session
        # Keyed by id(); the message is kept alongside so that its id cannot be reused.
        self.cache: dict[int, tuple[Message, int]] = {}
        self.last = 0
        """Tokens of the previous request."""

    def appended(self, message: Message, stored: Sequence[Event]) -> None:
        """`message` was appended as `stored`: it has the tally's count (for the transcript's
        total; a request is sized from the tally itself)."""
        if self.session is None or not stored:
            return
        # Not fresh: the append just folded `message` in, and another writer's later events
        # must not stand in for it; no look at the store is needed.
        tokens = self.session.tally(self.counter, fresh=False).count(stored[0].seq)
        self.cache[id(message)] = (message, tokens)

    def request(self, previous: Sequence[Message], projected: Sequence[Message]) -> tuple[int, int]:
        """Tokens of `projected`, the session's projection now, and of the part of it `previous`
        began with. When only appends came in between, that part is the whole previous request:
        O(1) with the session's tally, else O(new messages)."""
        grown = isinstance(projected, Frozen) and projected.extends(previous)
        if self.session is not None:
            # `projected` is what the session projects now, so the tally holds its items.
            tally = self.session.tally(self.counter, fresh=False)
            total = tally.items_total
            if not grown:
                # The projected copies (summaries, masked results, decoded messages) get the
                # tally's counts, for the prefix below and for the next requests.
                for item in self.session.items(fresh=False):
                    if id(item.message) not in self.cache:
                        self.cache[id(item.message)] = (item.message, tally.count(item.id))
        elif grown:
            total = self.last + self.total(projected[len(previous) :])
        else:
            total = self.total(projected)
        prefix = self.last if grown else self.total(_common_prefix(previous, projected))
        self.last = total
        return total, prefix

    def total(self, messages: Sequence[Message]) -> int:
        out = 0
        for message in messages:
            hit = self.cache.get(id(message))
            if hit is None or hit[0] is not message:
                hit = (message, self.counter.count_message(message))
                self.cache[id(message)] = hit
            out += hit[1]
        return out


def _request(
    *,
    turn: int,
    message: int,
    tokens_before: int,
    tokens: int,
    request_tokens: int,
    prefix_tokens: int,
    compaction: int | None,
) -> Request:
    """``Request(...)`` with its fields set at once (`assembled`; `Request` checks nothing): for
    seven fields the constructor costs more than the rest of a request's bookkeeping, and a
    replay makes one per model request."""
    fields = {
        "turn": turn,
        "message": message,
        "tokens_before": tokens_before,
        "tokens": tokens,
        "request_tokens": request_tokens,
        "prefix_tokens": prefix_tokens,
        "compaction": compaction,
    }
    return assembled(Request, fields)


def _request_points(messages: Sequence[Message]) -> list[bool]:
    """For each message, whether the model is asked for a reply right after it, in one pass
    rather than a call per message.

    That is before every assistant message, and once at the end when the transcript stops on a
    user or tool message (the reply it still owes).
    """
    if not messages:
        return []
    points = [message.role == "assistant" for message in islice(messages, 1, None)]
    points.append(messages[-1].role != "assistant")
    return points
