"""`evict_oldest`: how the counters' memos of texts give room back."""

from __future__ import annotations


def evict_oldest(memo: dict[str, int], chars: int, limit: int) -> int:
    """Drop the oldest entries of `memo` (texts, in the order they came) until the characters
    of what stays are at most three quarters of `limit`; returns those characters (`chars`:
    those of `memo` now).

    A quarter is given back at once, not one text per new one: a dict hands out its oldest key
    only after walking past every key deleted before it, so evicting one text per insert came
    to a walk over all the evicted ones each time (quadratic once a large stretch overflowed
    the memo).

    >>> memo = {"aa": 1, "bbbb": 2, "cc": 1}
    >>> evict_oldest(memo, 8, 6), list(memo)
    (2, ['cc'])
    """
    keep = limit * 3 // 4
    doomed: list[str] = []
    for text in memo:
        if chars <= keep:
            break
        chars -= len(text)
        doomed.append(text)
    for text in doomed:
        del memo[text]
    return chars
