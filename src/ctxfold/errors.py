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
│   ├── StoreUnavailableError (ConnectionError)  the database cannot be reached or written
│   ├── StoreCorruptError               the database's file is damaged
│   └── SchemaVersionError              the database was written by a newer ctxfold
└── MissingDependencyError (ImportError)  an optional extra is not installed, or too old
```

The builtin bases are there for callers who already catch `ValueError` or `ImportError`; the
ctxfold class is always the precise one. ctxfold itself never raises a bare builtin exception
on purpose (a test checks the source for it).
"""

from __future__ import annotations

import importlib.metadata
import re
import sys


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
    use), or cannot do the work asked of it (a full disk, a lock held past the wait, a file it may
    not write). The message names the database without its password and says what to check; an
    append that raises it did not land."""


class StoreCorruptError(StoreError):
    """The database's file is damaged: what it holds cannot be read back as SQLite wrote it.
    The message names the file; restore it from a copy (SQLite's own ``.recover`` may save what
    is left). An append that raises it did not land."""


class SchemaVersionError(StoreError):
    """The database holds a ctxfold schema newer than this version understands; upgrade ctxfold
    to open it. Nothing was changed."""


class MissingDependencyError(CtxfoldError, ImportError):
    """An optional dependency is not installed, or too old; the message gives the pip command.

    With `minimum`, the message names the release needed and the one installed, if any, and
    with `python` too, the Python that release needs when this one is older: a framework's
    newer releases may have left this Python behind, and then no pip command can help.
    """

    def __init__(
        self,
        what: str,
        package: str,
        extra: str,
        *,
        minimum: str | None = None,
        python: tuple[int, int] | None = None,
    ) -> None:
        found = _installed_version(package) if minimum is not None else None
        if minimum is None:
            message = f"{what} needs {package}: pip install 'ctxfold[{extra}]'"
        elif python is not None and sys.version_info[:2] < python:
            here = f"{sys.version_info[0]}.{sys.version_info[1]}"
            message = (
                f"{what} needs {package} {minimum} or later, which needs Python "
                f"{python[0]}.{python[1]} or later; this is Python {here}"
            )
            if found is not None:
                message += f" (with {package} {found})"
        elif found is None:
            message = f"{what} needs {package} {minimum} or later: pip install 'ctxfold[{extra}]'"
        elif _release(found) < _release(minimum):
            message = (
                f"{what} needs {package} {minimum} or later, and {found} is installed: "
                f"pip install --upgrade 'ctxfold[{extra}]'"
            )
        else:
            # Recent enough, yet the import failed: a broken install; the cause is chained.
            message = (
                f"{what} cannot import {package} {found}: "
                f"pip install --force-reinstall 'ctxfold[{extra}]'"
            )
        super().__init__(message)


def _installed_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _release(version: str) -> tuple[int, ...]:
    """The leading numbers of a version ("2.64.0rc1" -> (2, 64, 0)), for comparing releases."""
    match = re.match(r"\d+(?:\.\d+)*", version)
    return tuple(int(part) for part in match.group(0).split(".")) if match else ()
