"""The errors ctxfold raises. Catch `CtxfoldError` for all of them."""

from __future__ import annotations


class CtxfoldError(Exception):
    """Root of every error ctxfold raises on purpose."""


class InvalidInputError(CtxfoldError, ValueError):
    """Input that cannot be read: a malformed line, an unknown role, a bad value.

    The message names the line (when there is one) and the offending value.
    """

    def __init__(self, message: str, *, line: int | None = None) -> None:
        self.line = line
        super().__init__(f"line {line}: {message}" if line is not None else message)


class InvalidHistoryError(CtxfoldError, ValueError):
    """An edit or a history that would break the rules a provider enforces with a 400.

    Raised at append time for a compaction or mask whose range is not contiguous in the current
    projection or that would split a tool call from its result; nothing is written.
    """


class ConflictError(CtxfoldError):
    """Another writer appended to the session first: `expected_seq` is no longer the last seq."""

    def __init__(self, session_id: str, expected_seq: int | None, actual_seq: int) -> None:
        self.session_id = session_id
        self.expected_seq = expected_seq
        self.actual_seq = actual_seq
        super().__init__(
            f"session {session_id!r}: expected last seq {expected_seq}, but it is {actual_seq}; "
            "another writer appended first, read the session again and retry"
        )


class BudgetError(CtxfoldError, ValueError):
    """A budget that cannot work: an unknown model, a non-positive window, a bad fraction, or
    pinned messages that alone exceed the window."""


class SummarizerError(CtxfoldError):
    """A summarizer failed (raised, timed out, or answered something unusable)."""


class MissingDependencyError(CtxfoldError, ImportError):
    """An optional dependency is not installed; the message gives the pip command."""

    def __init__(self, what: str, package: str, extra: str) -> None:
        super().__init__(f"{what} needs {package}: pip install 'ctxfold[{extra}]'")
