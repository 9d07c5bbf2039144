"""Writing a file so that a reader never sees half of it.

Every file ctxfold writes (a JSONL transcript, the HTML page of a replay) goes through
`write_text_atomic`: the text goes to a temporary file beside the target, is flushed to disk, and
replaces the target in one rename. A failure at any point (text that cannot be encoded, a full
disk, an interrupt) leaves the target as it was and no temporary file behind.

It lives at the package root, beside `errors`, so that the lowest layer (messages) and the
highest (replay) can both use it without an upward import.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ctxfold.errors import InvalidInputError


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write `text` to `path` as UTF-8, all or nothing.

    Text that UTF-8 cannot encode (a lone surrogate such as ``"\\ud800"``) raises
    `InvalidInputError` before anything is created.

    >>> import pathlib, tempfile
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "notes.txt"
    >>> write_text_atomic(target, "first line\\n")
    >>> target.read_text()
    'first line\\n'
    """
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start : exc.end]
        raise InvalidInputError(
            f"cannot write {os.fspath(path)}: the text holds {bad!r} at character {exc.start}, "
            "which is not valid Unicode (a lone surrogate)"
        ) from None
    target = Path(path)
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException as exc:
        os.unlink(temp)
        if isinstance(exc, OSError) and exc.filename is None:
            # A write or flush that failed (a full disk, say) names no file: name the target,
            # not the temporary file the user never asked for.
            exc.filename = os.fspath(path)
        raise
