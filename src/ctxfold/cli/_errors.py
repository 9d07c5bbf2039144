"""How every command fails: one line on stderr, a documented exit status, never a traceback.

- 0: done.
- 1: ``validate`` found problems; or ctxfold itself failed (a bug: it produced an invalid
  history, or an unexpected error).
- 2: bad input: a usage error, a file or line that cannot be read, a history that is already
  invalid, a budget that cannot work, a database that cannot be reached.
- 130: interrupted (Ctrl-C); 143: terminated (SIGTERM), which takes the same path.

Set ``CTXFOLD_TRACEBACK=1`` (or ``true``, ``yes``) to get the traceback of an unexpected error
instead of its one line.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType
from typing import Any

import click

from ctxfold.errors import CtxfoldError, InvalidHistoryError

EXIT_PROBLEMS = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 128 + signal.SIGTERM
TRACEBACK_ENV = "CTXFOLD_TRACEBACK"
_TRACEBACK_ON = ("1", "true", "yes")

_terminated = threading.Event()
"""Set once SIGTERM arrived: the KeyboardInterrupt it raised then exits with 143, not 130."""

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

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args and not ctx.resilient_parsing:
            # Bare `ctxfold`: a usage error (exit 2, as click itself makes it from 8.2 on), but
            # shown as the help it is, formatted, not folded into one error line.
            click.echo(ctx.get_help(), err=True)
            ctx.exit(EXIT_BAD_INPUT)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            # The reader went away (`ctxfold ... | head`): stop quietly with status 0, as other
            # tools do. Caught here, before click's own handling turns it into status 1.
            _silence_stdout()
            return None
        except KeyboardInterrupt as exc:
            if not terminated():
                raise  # click prints a blank line after the terminal's ^C, then aborts
            # SIGTERM echoed no ^C to close: abort here, where click adds no blank line.
            raise click.Abort from exc

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
        # A command that knows more (what an interrupted import left) says so in the
        # interrupt's own text; click hands the interrupt on as the cause of an Abort.
        interrupt = exc.__cause__ if isinstance(exc, click.Abort) else exc
        said = str(interrupt) if isinstance(interrupt, KeyboardInterrupt) else ""
        if terminated():
            return EXIT_TERMINATED, said or "terminated"
        return EXIT_INTERRUPTED, said or "interrupted"
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
    if show_traceback() or not isinstance(exc, Exception):
        return 0, None
    return EXIT_PROBLEMS, (
        f"internal error: {type(exc).__name__}: {exc}; this is a bug in ctxfold "
        f"(set {TRACEBACK_ENV}=1 to see the traceback)"
    )


def show_traceback() -> bool:
    """True when $CTXFOLD_TRACEBACK asks for tracebacks: 1, true or yes (0, false, no or unset
    do not)."""
    return os.environ.get(TRACEBACK_ENV, "").strip().lower() in _TRACEBACK_ON


def terminated() -> bool:
    """True once SIGTERM arrived (after `end_on_sigterm`): the interrupt being handled is it."""
    return _terminated.is_set()


def end_on_sigterm() -> None:
    """Make SIGTERM end the command as Ctrl-C does (a temporary file removed, an import told
    apart, one line on stderr), with exit status 143. For the console script only: a library
    must never take a process's signals."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # Further SIGTERMs are ignored, so that a second one cannot cut the clean-up short;
    # SIGKILL still ends a clean-up that hangs.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _terminated.set()
    signal.default_int_handler(signum, frame)  # raises KeyboardInterrupt, here in the main thread


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
