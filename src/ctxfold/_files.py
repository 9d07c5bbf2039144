"""Writing a file so that a reader never sees half of it.

Every file ctxfold writes (a JSONL transcript, the HTML page of a replay) goes through
`write_text_atomic`. What it does depends on what is at the path:

- nothing, or a regular file: the text goes to a temporary file beside it, is flushed to disk,
  and replaces it in one rename. A failure at any point (text that cannot be encoded, a full
  disk, an interrupt) leaves the target as it was and no temporary file behind. A new file gets
  the usual mode (``0o666`` less the umask), a replaced one keeps its mode and, where allowed,
  its owner;
- a symbolic link: it is followed, and the file it names is replaced as above, in its own
  folder, so the link stays a link;
- anything else (a device such as ``/dev/null``, a FIFO, ``/dev/stdout``, ``/dev/fd/N`` from a
  shell's ``>(...)``): it is opened and written in place, as a shell's ``>`` would, since
  replacing it would put a regular file where the device or pipe was. Such a write cannot be
  atomic.

Every failure names the path the caller gave, never the temporary file.

It lives at the package root, beside `errors`, so that the lowest layer (messages) and the
highest (replay) can both use it without an upward import.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat

from ctxfold.errors import InvalidInputError

_DESCRIPTOR_FOLDER = re.compile(r"/proc/[^/]+(/task/[^/]+)?/fd")
"""A folder whose entries are a process's open descriptors (``/dev/fd`` leads to one)."""


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write `text` to `path` as UTF-8, all or nothing (for a regular file; see the module).

    Text that UTF-8 cannot encode (a lone surrogate such as ``"\\ud800"``) and an empty path
    raise `InvalidInputError` before anything is created. A path that cannot be written raises
    the `OSError` (or, where the error would mislead, an `InvalidInputError`) naming `path`.

    >>> import pathlib, tempfile
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "notes.txt"
    >>> write_text_atomic(target, "first line\\n")
    >>> target.read_text()
    'first line\\n'
    """
    name = os.fspath(path)
    if not name:
        raise InvalidInputError("cannot write to an empty path; give a file name")
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start : exc.end]
        raise InvalidInputError(
            f"cannot write {name}: the text holds {bad!r} at character {exc.start}, "
            "which is not valid Unicode (a lone surrogate)"
        ) from None
    real = name
    try:
        real, in_place = _resolve(name)
        if in_place:
            _write_in_place(name, data)
        else:
            _replace(real, data)
    except OSError as exc:
        folder = _folder(name, real)
        if exc.errno == errno.ENOENT and os.path.isdir(folder):
            # The folder is there but takes no new file (/proc, say): "no such file or folder"
            # would send the user looking for a folder that exists.
            raise InvalidInputError(
                f"cannot write {name}: folder {folder} does not take new files"
            ) from None
        if exc.errno is None:
            exc.filename = name
            raise
        # Whatever failed (the temporary file, the rename, the disk), the user asked for `name`;
        # a new error, since a rename's second file name cannot be taken off the old one.
        named = OSError(exc.errno, exc.strerror, name)
        raise named.with_traceback(exc.__traceback__) from None


def check_target(path: str | os.PathLike[str]) -> None:
    """Raise `InvalidInputError` naming `path` when `write_text_atomic` could plainly not write
    it (an empty path, a folder, a missing folder, a folder or file this process may not write),
    so that a command can refuse before any work. Passing is no promise: a disk can still fill.
    """
    name = os.fspath(path)
    if not name:
        raise InvalidInputError("cannot write to an empty path; give a file name")
    try:
        real, in_place = _resolve(name)
    except OSError as exc:
        raise InvalidInputError(f"cannot write {name}: {_reason(exc)}") from None
    if os.path.isdir(real):
        raise InvalidInputError(f"cannot write {name}: it is a folder")
    if in_place:
        if not os.access(name, os.W_OK):
            raise InvalidInputError(f"cannot write {name}: permission denied")
        return
    folder = _folder(name, real)
    if not os.path.isdir(folder):
        raise InvalidInputError(f"cannot write {name}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InvalidInputError(f"cannot write {name}: permission denied in folder {folder}")


def _folder(name: str, real: str) -> str:
    """The folder the file goes in, as the user would name it: `name`'s own, unless `name` is
    a link, whose target's folder is where the file is made."""
    return os.path.dirname(real if os.path.islink(name) else name) or "."


def _resolve(name: str) -> tuple[str, bool]:
    """The file to replace, and whether to write `name` in place instead: True for anything
    but a regular file or a folder (a device, a FIFO, a socket), and for a path through a
    process's descriptors (``/dev/stdout``, ``/dev/fd/3``), whose opener chose its mode."""
    if _through_descriptor(name):
        return name, True
    real = os.path.realpath(name)
    try:
        found = os.stat(real)
    except FileNotFoundError:
        return real, False  # a new file, or a link to one not made yet: made where it points
    return real, not (stat.S_ISREG(found.st_mode) or stat.S_ISDIR(found.st_mode))


def _through_descriptor(name: str) -> bool:
    """True when following `name`'s links passes through a ``/proc/PID/fd`` entry."""
    current = os.path.abspath(name)
    for _ in range(40):  # the kernel's own limit on links followed
        if _DESCRIPTOR_FOLDER.fullmatch(os.path.realpath(os.path.dirname(current))):
            return True
        try:
            link = os.readlink(current)
        except OSError:
            return False  # not a link (or not there): the end of the chain
        current = os.path.join(os.path.dirname(current), link)
    return False


def _write_in_place(name: str, data: bytes) -> None:
    # O_APPEND: a regular file behind /dev/fd/N was opened by the caller (a shell's `>>`, say);
    # writing at its end is what writing to that descriptor would do. Devices and pipes ignore
    # it. No O_CREAT: the thing is there, and this must never make a new file.
    fd = os.open(name, os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOCTTY", 0))
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _replace(real: str, data: bytes) -> None:
    folder, base = os.path.split(real)
    try:
        old: os.stat_result | None = os.stat(real)
    except FileNotFoundError:
        old = None
    fd, temp = _create_beside(folder or ".", base)
    try:
        with os.fdopen(fd, "wb") as handle:
            if old is not None:
                _keep_owner_and_mode(handle.fileno(), old)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _create_beside(folder: str, base: str) -> tuple[int, str]:
    """A new, empty temporary file in `folder`: its descriptor and path. Opened with mode 0o666,
    which the kernel narrows by the umask, so a new target gets the mode any tool would give it
    (without reading the umask, which only a process-wide set can do)."""
    while True:
        temp = os.path.join(folder, f".{base}.{secrets.token_hex(4)}.tmp")
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
            return os.open(temp, flags, 0o666), temp
        except FileExistsError:
            continue


def _keep_owner_and_mode(fd: int, old: os.stat_result) -> None:
    if (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
        # Only root may give a file away; for anyone else the new file is the writer's own, as
        # after any editor's save.
        with contextlib.suppress(PermissionError):
            os.fchown(fd, old.st_uid, old.st_gid)
    os.fchmod(fd, stat.S_IMODE(old.st_mode))


def _reason(exc: OSError) -> str:
    """Why a path cannot be written, in the words the CLI uses."""
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, NotADirectoryError):
        return "a part of its path is not a folder"
    if exc.errno == errno.ELOOP:
        return "its symbolic links form a loop"
    why = exc.strerror or str(exc)
    return why[:1].lower() + why[1:]
