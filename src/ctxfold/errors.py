"""Every error ctxfold raises on purpose. Catch `CtxfoldError` for all of them.

The tree, and what each branch means for a caller:

```
CtxfoldError
├── InvalidInputError (ValueError)      data that cannot be read or stored; names line and value
│   ├── EmptySessionError               a manual compaction of a session with no messages
│   └── UnknownRefError (LookupError)   a recall ref that names nothing in the log
├── ConfigurationError (ValueError, TypeError)  an argument a component cannot work with
├── BudgetError (ValueError)            a window, reserve, trigger or target that cannot work
├── InvalidHistoryError (ValueError)    an edit or history a provider would reject with a 400
├── ConflictError                       another writer appended first (optimistic concurrency)
├── SummarizerError                     a summarizer raised, timed out or answered nonsense
├── StoreError                          the store itself, not the data given to it
│   ├── StoreClosedError (RuntimeError) the store was closed
│   ├── StoreUnavailableError (ConnectionError)  the database cannot be reached
│   └── SchemaVersionError              the database was written by a newer ctxfold
└── MissingDependencyError (ImportError)  an optional extra is not installed
```

The builtin bases are there for callers who already catch `ValueError` or `ImportError`; the
ctxfold class is always the precise one. ctxfold itself never raises a bare builtin exception
on purpose (a test checks the source for it).
"""

from __future__ import annotations


class CtxfoldError(Exception):
    """Root of every error ctxfold raises on purpose. Never raised itself: every raise picks the
    subclass that says what went wrong."""


class InvalidInputError(CtxfoldError, ValueError):
    """Input that cannot be read or stored: a malformed line, an unknown role, a bad value.

    The message names the line (when there is one) and the offending value.
    """

    def __init__(self, message: str, *, line: int | None = None) -> None:
        self.line = line
        super().__init__(f"line {line}: {message}" if line is not None else message)


class EmptySessionError(InvalidInputError):
    """A manual compaction of a session that holds no messages: there is nothing to compact."""


class UnknownRefError(InvalidInputError, LookupError):
    """A recall reference (``c12``, a cleared result's call id) that names nothing in the log."""


class PositionError(InvalidInputError, IndexError):
    """A position outside a sequence ctxfold handed out (the view `Session.messages()` returns).

    It is an `IndexError`, as the sequence protocol requires."""


class ConfigurationError(CtxfoldError, ValueError, TypeError):
    """An argument a component cannot work with: a negative `keep_steps`, a summary role that is
    no role, a pipeline entry that is not a strategy, a summarizer that is not callable.

    It is a `ValueError` and a `TypeError` too, since either builtin fits some of these cases.
    """


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


class StoreError(CtxfoldError):
    """The store failed, not the data given to it: closed, unreachable, or too new to read."""


class StoreClosedError(StoreError, RuntimeError):
    """The store was closed; open a new one to keep reading or appending."""


class StoreUnavailableError(StoreError, ConnectionError):
    """The database cannot be reached (down, refusing connections, missing, or shut down while in
    use). The message names the database without its password and says what to check."""


class SchemaVersionError(StoreError):
    """The database holds a ctxfold schema newer than this version understands; upgrade ctxfold
    to open it. Nothing was changed."""


class MissingDependencyError(CtxfoldError, ImportError):
    """An optional dependency is not installed; the message gives the pip command."""

    def __init__(self, what: str, package: str, extra: str) -> None:
        super().__init__(f"{what} needs {package}: pip install 'ctxfold[{extra}]'")
