"""The two rungs that act on user messages, by masks only: `CollapseRepeats` and
`ShortenUserMessages` (see `ctxfold.pipeline.user_words` for which messages they may touch)."""

from __future__ import annotations

from collections.abc import Callable

from ctxfold.errors import ConfigurationError
from ctxfold.pipeline.proposals import MaskResults
from ctxfold.pipeline.strategy import Flow
from ctxfold.pipeline.view import WorkingView
from ctxfold.summarizers.identifiers import PRIORITY, extract_identifiers, kind_of
from ctxfold.summarizers.quoting import code_span, head_at_boundary, tail_at_boundary

SHORTENED_PHRASE = "of this user message were cut here to fit the context window"
"""What every shortening marker says; a message holding it was shortened already."""
REPEAT_MARK = "[ctxfold: the same user message as log item "
"""How the line that stands for a collapsed repeat begins."""


class CollapseRepeats:
    """Older identical copies of a user message become one line naming the copy that stands for
    them and how many were sent (`user-repeats-collapsed`): a harness's repeated nudge is said
    once. A mask, so the log keeps every copy.

    >>> CollapseRepeats().name
    'collapse_repeats'
    """

    name = "collapse_repeats"

    def run(self, view: WorkingView) -> Flow:
        words = view.user_words()
        pinned = view.hard_pinned() | view.app_pinned()
        chosen: dict[int, str] = {}
        saved = 0
        for position, stands in sorted(words.repeats.items()):
            if saved >= view.excess:
                break
            item = view.items[position]
            if position in pinned or item.message.text.startswith(REPEAT_MARK):
                continue
            sent = words.copies.get(stands, 2)
            text = (
                f"{REPEAT_MARK}{view.items[stands].id}, which stands in full, was sent here "
                f"too ({sent} times in all). This copy is kept in the session log as log item "
                f"{item.id}.]"
            )
            tokens = view.count(item.message.replace(content=text))
            if tokens >= view.counts[position]:
                continue  # `never-larger`
            chosen[position] = text
            saved += view.counts[position] - tokens
        if chosen:
            yield MaskResults(chosen)
        return None


class ShortenUserMessages:
    """User messages past the bound keep their first and last characters, about `keep_tokens`
    tokens in all, with one marker between them naming the log item that holds the whole
    message and quoting, as data, the identifiers of the part cut (up to `keep_tokens` more)
    (`user-words-shortened-past-bound`). Oldest first, and only as far as the target needs; the
    current request is never shortened, and nothing is ever summarized into prose. A mask, so
    the log keeps the original.

    - `keep_tokens`: what a shortened message keeps of its text, in tokens (default 200).

    >>> ShortenUserMessages(keep_tokens=100).name
    'shorten_user_messages'
    """

    name = "shorten_user_messages"

    def __init__(self, keep_tokens: int = 200) -> None:
        if not isinstance(keep_tokens, int) or isinstance(keep_tokens, bool) or keep_tokens < 16:
            raise ConfigurationError(
                f"keep_tokens must be a whole number of tokens >= 16, not {keep_tokens!r}"
            )
        self.keep_tokens = keep_tokens

    def run(self, view: WorkingView) -> Flow:
        words = view.user_words()
        pinned = view.hard_pinned() | view.app_pinned()
        chosen: dict[int, str] = {}
        saved = 0
        for position in words.over:
            if saved >= view.excess:
                break
            item = view.items[position]
            text = item.message.text
            if position in pinned or SHORTENED_PHRASE in text:
                continue
            shorter = shorten(item.unmasked.text, item.id, self.keep_tokens, view.count_text)
            if shorter is None:
                continue
            tokens = view.count(item.message.replace(content=shorter))
            if tokens >= view.counts[position]:
                continue  # `never-larger`
            chosen[position] = shorter
            saved += view.counts[position] - tokens
        if chosen:
            yield MaskResults(chosen)
        return None


def shorten(text: str, item_id: int, keep_tokens: int, count: Callable[[str], int]) -> str | None:
    """`text` cut to its head and tail, about `keep_tokens` tokens in all (two thirds head),
    at line or word ends where one is near, with a marker naming log item `item_id` and
    quoting the identifiers of the part cut, most useful first, in up to `keep_tokens` more;
    None when it is no longer than that already. `count(text) -> tokens` sizes it.

    >>> text = "Fix src/app.py. " + "Some context. " * 200 + "Then run pytest."
    >>> print(shorten(text, 7, 20, lambda t: len(t) // 4).splitlines()[1][:60])
    [ctxfold: 2,759 characters of this user message were cut her
    """
    tokens = count(text)
    if tokens <= keep_tokens:
        return None
    keep = max(32, len(text) * keep_tokens // max(tokens, 1))
    head = head_at_boundary(text, keep * 2 // 3)
    tail = tail_at_boundary(text, keep // 3)
    cut = len(text) - len(head) - len(tail)
    if cut <= 0:
        return None
    kept = f"{head}\n{tail}"
    cut_ids = [i for i in extract_identifiers(text) if i not in kept and "\n" not in i]
    ranked = sorted(cut_ids, key=lambda i: PRIORITY.index(kind_of(i)))
    quoted: list[str] = []
    spent = 0
    for identifier in ranked:
        span = code_span(identifier)
        cost = count(span) + 1
        if spent + cost > keep_tokens:
            continue
        quoted.append(span)
        spent += cost
    listed = f" Identifiers in the part cut, quoted as data: {', '.join(quoted)}." if quoted else ""
    marker = (
        f"[ctxfold: {cut:,} characters {SHORTENED_PHRASE}; the whole message is kept in the "
        f"session log as log item {item_id}; recall it from there.{listed}]"
    )
    return f"{head}\n{marker}\n{tail}"
