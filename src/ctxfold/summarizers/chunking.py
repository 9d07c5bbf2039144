"""Keep a summarizer's own input inside its model's window: summarize in pieces, then combine.

A stretch that fits is sent as it is, in one call. A larger one is split at safe cut points
(`ctxfold.messages.structure.analyze(...).cuts`, so a call and its results are read together),
each piece is summarized, and the piece summaries are combined by a final request whose
messages are those summaries, marked synthetic, so the model updates them into one. A single
unit too large for any piece is clipped in the summarizer's copy only, with a marker saying so;
the history and the log keep every character.

The algorithm is written once, as a generator (`bounded`) that yields each `SummaryRequest` to
send and receives the `SummaryResult`; `drive` and `adrive` run it with a sync or an async send.
An SDK error the send raises is thrown back into the generator: when it is a context overflow
(our count ran low), the request is planned again with a smaller limit instead of failing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise

from ctxfold import _drive
from ctxfold.errors import SummarizerError
from ctxfold.messages import Message
from ctxfold.messages.structure import analyze
from ctxfold.overflow import is_context_overflow, overflow_figures
from ctxfold.protocols import TokenCounter
from ctxfold.summarizers.prompt import build_request
from ctxfold.summarizers.request import SummaryRequest, SummaryResult
from ctxfold.tokens.heuristic import HeuristicCounter

Flow = Generator[SummaryRequest, SummaryResult, SummaryResult]
Build = Callable[..., SummaryRequest]

PROMPT_MARGIN = 64
"""Tokens kept free for what the counter cannot see: chat framing, the SDK's own fields."""

MAX_REPLANS = 8
"""How many times a request that overflowed is planned again, smaller, before giving up."""

MAX_LEVELS = 8
"""How many rounds of combining summaries of summaries are tried before giving up."""

MIN_CLIP_TOKENS = 16
"""No message is clipped below this many tokens, so each keeps its start and its end."""


@dataclass(frozen=True)
class Bound:
    """How large one summarizer request may be.

    - `window`: the summarizer model's context window, in tokens.
    - `max_output`: tokens reserved for the answer (the `max_tokens` each call sends).
    - `counter`: how prompt text is counted (default: the characters / 4 heuristic).
    """

    window: int
    max_output: int
    counter: TokenCounter = field(default_factory=HeuristicCounter)

    @property
    def limit(self) -> int:
        """Most prompt tokens one call may send."""
        return self.window - self.max_output - PROMPT_MARGIN

    def size(self, request: SummaryRequest) -> int:
        """Prompt tokens of `request` as sent: the instructions and the record."""
        count = self.counter.count_text
        return count(request.instructions) + count(request.record)

    def fits(self, request: SummaryRequest) -> bool:
        return self.size(request) <= self.limit

    def tighter(self, request: SummaryRequest, stated: int | None = None) -> Bound:
        """A bound under which `request` no longer fits: what to plan with after an overflow.

        With the window the error stated, plan a little under it; without, halve the limit.
        """
        size = min(self.limit, self.size(request))
        limit = size // 2
        if stated is not None and stated - self.max_output - PROMPT_MARGIN > 0:
            limit = min(size * 9 // 10, (stated - self.max_output - PROMPT_MARGIN) * 9 // 10)
        return replace(self, window=max(limit, 1) + self.max_output + PROMPT_MARGIN)


def bounded(request: SummaryRequest, bound: Bound, build: Build | None = None) -> Flow:
    """Summarize `request` in calls that each fit `bound`; return the combined result.

    Yields the requests to send and receives their results. A piece that declines makes the
    whole declines (text None), with the usage spent so far and a note saying which piece.
    """
    return _bounded(request, _Plan(bound, build or build_request), 0)


def drive(flow: Flow, send: Callable[[SummaryRequest], SummaryResult]) -> SummaryResult:
    """Run `flow` with a synchronous `send`; SummarizerErrors go back into the flow."""
    return _drive.drive(flow, send, catch=(SummarizerError,))


async def adrive(
    flow: Flow, send: Callable[[SummaryRequest], Awaitable[SummaryResult]]
) -> SummaryResult:
    """Run `flow` with an async `send`; the same steps as `drive`."""
    return await _drive.adrive(flow, send, catch=(SummarizerError,))


@dataclass
class _Plan:
    """What one run has learned: the bound to plan with (it only ever tightens, after an
    overflow, and then applies to every later piece too) and how often it tightened."""

    bound: Bound
    build: Build
    replans: int = 0


def _bounded(request: SummaryRequest, plan: _Plan, level: int) -> Flow:
    bound = plan.bound
    if plan.replans > MAX_REPLANS or level > MAX_LEVELS:
        raise SummarizerError(
            f"could not fit the stretch into the summarizer's window of {bound.window} tokens "
            f"({plan.replans} re-plans, {level} rounds of combining); pass a smaller window= "
            "or a smaller max_output_tokens="
        )
    if bound.limit <= 0:
        raise SummarizerError(
            f"the summarizer's window ({bound.window} tokens) leaves no room for a prompt after "
            f"reserving {bound.max_output} tokens for the answer"
        )
    if bound.fits(request):
        try:
            return (yield request)
        except SummarizerError as exc:
            if not is_context_overflow(exc):
                raise
            # The model's window is smaller than we were told, or our count ran low for it:
            # plan again, this request and every later one, under a limit this one exceeds.
            plan.bound = bound.tighter(request, overflow_figures(exc).limit)
            plan.replans += 1
            retried = yield from _bounded(request, plan, level)
            return _merged([retried], retried.text, f"re-planned after an overflow: {exc}")

    pieces = split(request, bound, plan.build)
    if len(pieces) == 1:
        # One unit too large even alone, now clipped: its summary needs no combining.
        only = yield from _bounded(pieces[0], plan, level)
        return _merged([only], only.text, "clipped to fit the summarizer's window")
    results: list[SummaryResult] = []
    for number, piece in enumerate(pieces, 1):
        result = yield from _bounded(piece, plan, level)
        results.append(result)
        if not (result.text and result.text.strip()):
            return _merged(results, None, f"piece {number} of {len(pieces)} declined")
    summaries = tuple(
        Message("user", f"Summary of part {n} of {len(results)}:\n{r.text}")
        for n, r in enumerate(results, 1)
    )
    combine = plan.build(
        summaries,
        synthetic=frozenset(range(len(summaries))),
        max_tokens=request.max_tokens,
        tier="summaries",
        tokens=sum(bound.counter.count_message(m) for m in summaries),
    )
    combine = replace(combine, identifiers=request.identifiers or combine.identifiers)
    final = yield from _bounded(combine, plan, level + 1)
    results.append(final)
    return _merged(results, final.text, f"read in {len(pieces)} pieces, then combined")


def split(
    request: SummaryRequest, bound: Bound, build: Build | None = None
) -> list[SummaryRequest]:
    """Cut `request`'s stretch at safe cut points into requests that each fit `bound`.

    Units are packed greedily, oldest first; a unit larger than a piece is clipped (in the
    summarizer's copy only). Raises SummarizerError when even one clipped message cannot fit,
    which means the instructions alone leave no room.
    """
    build = build or build_request
    messages, synthetic = request.messages, request.synthetic
    cuts = sorted({0, *analyze(messages, synthetic).cuts, len(messages)})
    segments = [(a, b) for a, b in pairwise(cuts) if a < b]
    room = bound.limit - bound.counter.count_text(request.instructions)
    if room <= MIN_CLIP_TOKENS:
        raise SummarizerError(
            f"the summary instructions alone take {bound.limit - room} of the "
            f"{bound.limit} prompt tokens the summarizer's window allows"
        )
    costs = [sum(bound.counter.count_message(m) for m in messages[a:b]) for a, b in segments]
    # Aim for pieces of even size: a greedy fill would leave a small last piece, and a summary
    # of a sliver is hard to tell from a copy of it.
    target = sum(costs) / max(1, -(-sum(costs) // room))
    groups: list[list[tuple[int, int]]] = [[]]
    used = 0
    for segment, cost in zip(segments, costs, strict=True):
        if groups[-1] and (used + cost > room or used >= target):
            groups.append([])
            used = 0
        groups[-1].append(segment)
        used += cost
    pieces: list[SummaryRequest] = []
    for group in groups:
        pieces.extend(_fit(request, group, room, bound, build))
    return pieces


def _fit(
    request: SummaryRequest,
    group: Sequence[tuple[int, int]],
    room: int,
    bound: Bound,
    build: Build,
) -> list[SummaryRequest]:
    """One request for `group`, or several when its record came out larger than estimated."""
    start, end = group[0][0], group[-1][1]
    messages = request.messages[start:end]
    for attempt in range(MAX_REPLANS):
        piece = build(
            messages,
            synthetic=frozenset(i - start for i in request.synthetic if start <= i < end),
            max_tokens=request.max_tokens,
            tier=request.tier,
            tokens=sum(bound.counter.count_message(m) for m in request.messages[start:end]),
        )
        if bound.fits(piece):
            return [piece]
        if len(group) > 1:
            half = len(group) // 2
            return _fit(request, group[:half], room, bound, build) + _fit(
                request, group[half:], room, bound, build
            )
        # One unit: clip its copy harder each time until its record fits.
        messages = clip(request.messages[start:end], room >> attempt, bound.counter)
    raise SummarizerError(
        f"messages {start}..{end - 1} do not fit the summarizer's window of {bound.window} "
        "tokens even clipped; pass a larger window="
    )


def clip(messages: Sequence[Message], budget: int, counter: TokenCounter) -> tuple[Message, ...]:
    """Copies of `messages` shortened to about `budget` tokens in all, each keeping its start
    and end with a marker in between saying how much was left out of the summarizer's copy."""
    total = sum(counter.count_message(m) for m in messages) or 1
    share = min(1.0, budget / total)
    out: list[Message] = []
    for message in messages:
        allowed = max(int(counter.count_message(message) * share), MIN_CLIP_TOKENS)
        calls = tuple(
            replace(call, arguments=_clip_text(call.arguments, allowed // 2, counter))
            for call in message.tool_calls
        )
        content = message.content
        if content is not None:
            content = _clip_text(content, allowed, counter)
        out.append(message.replace(content=content, tool_calls=calls))
    return tuple(out)


def _clip_text(text: str, tokens: int, counter: TokenCounter) -> str:
    have = counter.count_text(text)
    if have <= tokens:
        return text
    keep = max(len(text) * tokens // have, 2 * MIN_CLIP_TOKENS)
    head, tail = keep * 2 // 3, keep // 3
    left_out = len(text) - head - tail
    marker = f"\n[… {left_out} characters left out of the summarizer's copy …]\n"
    return f"{text[:head]}{marker}{text[len(text) - tail :]}"


def _merged(results: Sequence[SummaryResult], text: str | None, note: str) -> SummaryResult:
    models = [r.model for r in results if r.model]
    notes: list[str] = [n for r in results for n in r.notes]
    notes.append(note)
    return SummaryResult(
        text=text,
        model=models[-1] if models else None,
        input_tokens=sum(r.input_tokens for r in results),
        output_tokens=sum(r.output_tokens for r in results),
        calls=sum(r.calls for r in results),
        notes=tuple(notes),
    )
