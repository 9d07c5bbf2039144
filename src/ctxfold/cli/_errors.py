"""How every command fails: one line on stderr, a documented exit status, never a traceback.

- 0: done.
- 1: ``validate`` found problems; or ctxfold itself failed (a bug: it produced an invalid
  history, or an unexpected error).
- 2: bad input: a usage error, a file or line that cannot be read, a history that is already
  invalid, a budget that cannot work, a database that cannot be reached.
- 130: interrupted.

Set ``CTXFOLD_TRACEBACK=1`` to get the traceback of an unexpected error instead of its one line.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

import click

from ctxfold.errors import CtxfoldError, InvalidHistoryError

EXIT_PROBLEMS = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
TRACEBACK_ENV = "CTXFOLD_TRACEBACK"

# Commands that moved, so an old spelling gets a pointer rather than "no such command".
MOVED = {"import": "sessions import"}


class CtxfoldGroup(click.Group):
    """The root group: runs a command and turns any failure into one line and an exit status."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] in MOVED and args[0] not in self.commands:
            raise click.UsageError(f"'ctxfold {args[0]}' is now 'ctxfold {MOVED[args[0]]}'", ctx)
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            # The reader went away (`ctxfold ... | head`): stop quietly with status 0, as other
            # tools do. Caught here, before click's own handling turns it into status 1.
            _silence_stdout()
            return None

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except BaseException as exc:  # every failure is reported the same way: see `failure`
            code, message = failure(exc)
            if message is None:
                raise
            return _fail(message, code, standalone_mode)
        if not standalone_mode:
            return result
        sys.exit(result if isinstance(result, int) else 0)


def failure(exc: BaseException) -> tuple[int, str | None]:
    """The exit status and the line to print for `exc`; None for what must propagate (an exit
    the command asked for, or an unexpected error when CTXFOLD_TRACEBACK is set)."""
    if isinstance(exc, SystemExit):
        return 0, None
    if isinstance(exc, click.UsageError):
        hint = f"; see '{exc.ctx.command_path} --help'" if exc.ctx is not None else ""
        return exc.exit_code, f"{exc.format_message().rstrip('.')}{hint}"
    if isinstance(exc, click.ClickException):
        return EXIT_BAD_INPUT, exc.format_message()
    if isinstance(exc, (click.Abort, KeyboardInterrupt)):
        return EXIT_INTERRUPTED, "interrupted"
    if isinstance(exc, InvalidHistoryError):
        # Input is checked when it is read, so a history ctxfold refuses later is its own fault.
        return EXIT_PROBLEMS, str(exc)
    if isinstance(exc, CtxfoldError):
        return EXIT_BAD_INPUT, str(exc)
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return EXIT_BAD_INPUT, f"{where}{exc.strerror or exc}"
    if isinstance(exc, RecursionError):
        return EXIT_BAD_INPUT, "the input is nested too deeply to read"
    if isinstance(exc, UnicodeError):
        return EXIT_BAD_INPUT, f"the input is not valid Unicode text ({exc})"
    if os.environ.get(TRACEBACK_ENV) or not isinstance(exc, Exception):
        return 0, None
    return EXIT_PROBLEMS, (
        f"internal error: {type(exc).__name__}: {exc}; this is a bug in ctxfold "
        f"(set {TRACEBACK_ENV}=1 to see the traceback)"
    )


def _fail(message: str, code: int, standalone: bool) -> int:
    if message:
        # One line, whatever the exception text held.
        line = " ".join(message.replace("\r", "\n").split("\n"))
        click.echo(f"ctxfold: error: {line.strip()}", err=True)
    if standalone:
        sys.exit(code)
    return code


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
