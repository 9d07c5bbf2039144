"""What an exact counter hands its tokenizer: for tests that check a text is not counted twice."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ctxfold.tokens import TiktokenCounter


@contextmanager
def tokenized_by(counter: TiktokenCounter) -> Iterator[list[str]]:
    """The texts `counter` sends to its tokenizer while the block runs, in order (what its
    memos did not answer); the counter is as it was afterwards."""
    tokenized: list[str] = []
    fast = counter._fast

    def recording(text: str) -> int:
        tokenized.append(text)
        return fast(text)

    counter._fast = recording  # type: ignore[method-assign]
    try:
        yield tokenized
    finally:
        counter._fast = fast  # type: ignore[method-assign]
