"""CutToFit: the last rung, for what is too large to send even after everything else.

Every other rung leaves the newest step alone: it is what the agent is reading now. But one
output can be larger than the whole window (a log, a minified bundle, a directory listing), and
then no request can be sent at all: the provider refuses each retry, and the agent is stuck.
This rung cuts tool results, the newest included, to their first and last characters, so that
the request fits under the run's ceiling (the budget's trigger point: what may be sent with room
for the reply). It only runs when nothing before it made enough room, cuts the largest outputs
first and each only as far as needed (all of them down to one level, rather than one to
nothing), and leaves a marker that names the call and the log event that keeps the whole
output. When tool output alone cannot make room and the request is larger than the window
itself, the user's messages are cut the same way, the current request included, down to the
window: such a request could never be sent whole. Masks, so the log keeps the originals and
recall finds them.
"""

from __future__ import annotations

from collections.abc import Callable

from ctxfold.pipeline.clear import calls_by_result, gist
from ctxfold.pipeline.proposals import MaskResults
from ctxfold.pipeline.strategy import Flow
from ctxfold.pipeline.user_messages import SHORTENED_PHRASE
from ctxfold.pipeline.view import WorkingView
from ctxfold.summarizers.quoting import head_at_boundary, tail_at_boundary

FIT_PHRASE = "of this output were cut here to fit the context window"
"""What every marker of this rung says."""

_TRIES = 8
"""Sizing rounds per output: each one measures the cut text and narrows it; a few suffice, since
characters per token hardly change between the head and tail of one output."""


class CutToFit:
    """Cut the largest tool results, the newest included, to their head and tail so the view
    fits under the run's ceiling (`WorkingView.ceiling`: a compactor's is its budget's
    trigger point; the target when none is set) (`oversized-output-cut`).

    The last rung of the default ladder: it runs only when clearing, summarizing, shortening
    and dropping could not make enough room, which happens when the newest step's output alone
    is too large. Outputs are cut to one common size, largest first, never below a marker
    naming the call and the log event that holds the whole output. When that is not enough and
    the view is larger than the window itself (`WorkingView.window`), the user's messages (the
    current request too) are cut the same way, down to the window, each marker naming the log
    item that holds the whole message. A message the application pinned is never cut. Masks:
    the log keeps the originals.

    >>> CutToFit().name
    'cut_to_fit'
    """

    name = "cut_to_fit"

    def run(self, view: WorkingView) -> Flow:
        goal = view.ceiling
        if view.total <= goal:
            return "the view is within the ceiling: the newest output stays whole"
        pinned = view.app_pinned()
        calls = calls_by_result(view)

        def result(index: int, level: int) -> str | None:
            return _cut_result(view, index, level, calls.get(index, ("tool", "")))

        yield from _cut(view, _positions(view, "tool", pinned), goal, result)
        if view.total > view.window:
            # Tool output alone could not make room, and the request cannot be sent at all:
            # what is left is the user's own words (a pasted log, a whole file in the request).
            # Over the ceiling but within the window they stay whole: the reply has less room,
            # but the request goes.
            def words(index: int, level: int) -> str | None:
                return _cut_user(view, index, level)

            yield from _cut(view, _positions(view, "user", pinned), view.window, words)
        if view.total > goal:
            return (
                "what is left over the ceiling is neither tool output nor the user's, or is pinned"
            )
        return None


def _positions(view: WorkingView, role: str, pinned: frozenset[int]) -> list[int]:
    """The view positions of the messages of `role` this rung may cut: not summaries or notes,
    and not pinned by the application."""
    return [
        i
        for i, item in enumerate(view.items)
        if item.message.role == role and not item.synthetic and i not in pinned
    ]


def _cut(
    view: WorkingView, positions: list[int], goal: int, cut: Callable[[int, int], str | None]
) -> Flow:
    """One mask that cuts the messages at `positions` to one level (`cut(index, level)` makes
    the new text), the largest first, so that the view gets down to `goal`."""
    level = _level(sorted((view.counts[i] for i in positions), reverse=True), view.total - goal)
    chosen: dict[int, str] = {}
    for index in positions:
        if view.counts[index] > level:
            text = cut(index, level)
            if text is not None:
                chosen[index] = text
    if chosen:
        yield MaskResults(chosen)
    return None


def _cut_result(view: WorkingView, index: int, level: int, call: tuple[str, str]) -> str | None:
    """The original output at `index` cut so that its message weighs at most `level`."""
    tool, arguments = call
    about = gist(arguments)
    named = f"{tool}({about})" if about else tool
    call_id = view.items[index].message.tool_call_id or "?"
    item_id = view.items[index].id

    def marker(cut: int) -> str:
        return (
            f"[ctxfold: {cut:,} characters {FIT_PHRASE} (output of {named}, call {call_id}). "
            f"The full output is kept in the session log as event {item_id}; recall it from "
            "there if the part cut matters.]"
        )

    return _cut_item(view, index, level, marker)


def _cut_user(view: WorkingView, index: int, level: int) -> str | None:
    """The original user message at `index` cut so that it weighs at most `level`, marked as
    `ShortenUserMessages` marks what it shortens (the same phrase, so it is not cut twice)."""
    item_id = view.items[index].id

    def marker(cut: int) -> str:
        return (
            f"[ctxfold: {cut:,} characters {SHORTENED_PHRASE}; the whole message is kept in the "
            f"session log as log item {item_id}; recall it from there.]"
        )

    return _cut_item(view, index, level, marker)


def _cut_item(
    view: WorkingView, index: int, level: int, marker: Callable[[int], str]
) -> str | None:
    """The original text of the message at `index` (before any mask) cut by `cut_to`, weighed
    as the whole message it will be sent in."""
    item = view.items[index]

    def measure(text: str) -> int:
        return view.count(item.message.replace(content=text))

    # A message not masked yet has its count in the view: it is not counted again.
    tokens = view.counts[index] if item.unmasked is item.message else None
    return cut_to(item.unmasked.text, level, measure, marker, tokens=tokens)


def _level(sizes: list[int], need: int) -> int:
    """The highest level such that capping each of `sizes` (largest first) at it saves at least
    `need`; 0 when even removing them all would not.

    >>> _level([900, 300, 100], 500)    # 900 -> 400 saves 500
    400
    >>> _level([900, 300, 100], 700)    # 900 and 300 -> 250 save 650 + 50
    250
    >>> _level([900, 300, 100], 1_000)  # 900 -> 100, 300 -> 100 saves 1,000
    100
    """
    total = 0
    for k, size in enumerate(sizes, 1):
        total += size
        below = sizes[k] if k < len(sizes) else 0
        if total - k * below >= need:
            return (total - need) // k
    return 0


def cut_to(
    text: str,
    limit: int,
    measure: Callable[[str], int],
    marker: Callable[[int], str],
    *,
    tokens: int | None = None,
) -> str | None:
    """`text` cut to its first and last characters (half each, at line or word ends where one
    is near) with `marker(characters cut)` between them, so that `measure` of it is at most
    `limit`; the marker alone when not even that fits, and None when `text` fits already.

    `measure(text) -> tokens` weighs a candidate as it will be sent (the whole message);
    `tokens` is `measure(text)` when the caller knows it already.

    >>> cut = cut_to("a" * 50 + "\\n" + "b" * 50, 30, len, lambda n: f"[{n} cut]")
    >>> cut, len(cut) <= 30
    ('aaaaaaaaa\\n[82 cut]\\nbbbbbbbbbb', True)
    """
    if tokens is None:
        tokens = measure(text)
    if tokens <= limit:
        return None
    alone = marker(len(text))
    fixed = measure(alone)
    room = limit - fixed
    if room <= 0:
        return alone
    # Characters per token differ little within one output, so its own ratio sizes the first
    # try; each miss narrows the next by what it measured.
    keep = len(text) * room // max(tokens, 1)
    for _ in range(_TRIES):
        head = head_at_boundary(text, keep // 2)
        tail = tail_at_boundary(text, keep - keep // 2)
        candidate = "\n".join(
            part for part in (head, marker(len(text) - len(head) - len(tail)), tail) if part
        )
        got = measure(candidate)
        if got <= limit:
            return candidate
        keep = keep * room * 19 // (max(got - fixed, 1) * 20)
        if keep <= 0:
            break
    return alone
