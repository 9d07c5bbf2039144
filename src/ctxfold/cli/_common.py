"""What every command shares: error reporting, reading transcripts, options that build objects.

Errors: a command raises `CtxfoldError` (bad input, a budget that cannot work) or click raises a
usage error; `CtxfoldGroup.main` turns either into one line on stderr and exit status 2, with no
traceback. Environment variables are read here and nowhere else in ctxfold.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from ctxfold.errors import CtxfoldError, InvalidInputError, MissingDependencyError
from ctxfold.messages import Message, read_jsonl

if TYPE_CHECKING:
    from ctxfold.messages.jsonl import Format
    from ctxfold.protocols import SyncSummarizer
    from ctxfold.storage import StoreBase

EXIT_BAD_INPUT = 2
DATABASE_ENV = "CTXFOLD_DATABASE_URL"
F = TypeVar("F", bound=Callable[..., Any])


class CtxfoldGroup(click.Group):
    """A click group whose errors are one line on stderr and exit status 2, never a traceback."""

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
        except click.UsageError as exc:
            hint = f"; see '{exc.ctx.command_path} --help'" if exc.ctx is not None else ""
            message = exc.format_message().rstrip(".")
            return _fail(f"{message}{hint}", exc.exit_code, standalone_mode)
        except click.ClickException as exc:
            return _fail(exc.format_message(), EXIT_BAD_INPUT, standalone_mode)
        except CtxfoldError as exc:
            return _fail(str(exc), EXIT_BAD_INPUT, standalone_mode)
        except click.Abort:
            return _fail("aborted", 130, standalone_mode)
        except OSError as exc:
            # A file that cannot be read or written is bad input too, named by its path.
            where = f"{exc.filename}: " if exc.filename else ""
            return _fail(f"{where}{exc.strerror or exc}", EXIT_BAD_INPUT, standalone_mode)
        if not standalone_mode:
            return result
        sys.exit(result if isinstance(result, int) else 0)


def _fail(message: str, code: int, standalone: bool) -> int:
    click.echo(f"ctxfold: error: {message}", err=True)
    if standalone:
        sys.exit(code)
    return code


@dataclass(frozen=True)
class Transcript:
    """A transcript read from a file: its messages, its format, and the line of each message when
    the file holds one message per line (OpenAI format), so problems can name lines."""

    path: Path
    messages: list[Message]
    format: Format
    lines: list[int] | None

    def where(self, index: int) -> str:
        """`line N` for message `index` when known, else `message N` (counted from 1)."""
        if self.lines is not None and 0 <= index < len(self.lines):
            return f"line {self.lines[index]}"
        return f"message {index + 1}"


def read_transcript(path: Path) -> Transcript:
    """Read a JSONL transcript in either format; errors name the file and the line."""
    from ctxfold.messages import detect_format

    try:
        messages = read_jsonl(path)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{path}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{path}: not UTF-8 text ({exc.reason})") from None
    with open(path, encoding="utf-8") as handle:
        numbered = [(n, line) for n, line in enumerate(handle, 1) if line.strip()]
    fmt = detect_format(json.loads(line) for _, line in numbered)
    lines = [n for n, _ in numbered] if fmt == "openai" and len(numbered) == len(messages) else None
    return Transcript(path, messages, fmt, lines)


def parse_target(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """--target: a fraction of the window in (0, 1], or a whole number of tokens above 1."""
    if value is None:
        return None
    try:
        number = float(value.replace(",", "").replace("_", ""))
    except ValueError:
        number = float("nan")
    if not 0 < number < float("inf"):
        raise click.BadParameter(
            f"{value!r} is neither a fraction of the window like 0.4 nor a token count like 6000",
            ctx,
            param,
        )
    if number > 1 and not number.is_integer():
        raise click.BadParameter(
            f"{value!r} is above 1, so it must be a whole number of tokens", ctx, param
        )
    return int(number) if number > 1 else number


def build_summarizer(spec: str) -> SyncSummarizer:
    """The summarizer `spec` names: ``extractive``, ``openai:MODEL`` or ``anthropic:MODEL``.

    The SDK is imported only here, so the other choices work without it installed.
    """
    kind, _, model = spec.partition(":")
    if kind == "extractive" and not model:
        from ctxfold.summarizers.extractive import ExtractiveSummarizer

        return cast("SyncSummarizer", ExtractiveSummarizer())
    if kind in ("openai", "anthropic") and model:
        try:
            if kind == "openai":
                from ctxfold.summarizers.openai import OpenAISummarizer

                return cast("SyncSummarizer", OpenAISummarizer(model))
            from ctxfold.summarizers.anthropic import AnthropicSummarizer

            return cast("SyncSummarizer", AnthropicSummarizer(model))
        except ImportError as exc:
            if isinstance(exc, MissingDependencyError):
                raise
            raise MissingDependencyError(f"--summarizer {spec}", kind, kind) from None
    raise click.BadParameter(
        f"{spec!r} is not a summarizer; use extractive, openai:MODEL or anthropic:MODEL "
        "(for example openai:gpt-4o-mini)",
        param_hint="'--summarizer'",
    )


def default_database_url(env: os._Environ[str] | dict[str, str] | None = None) -> str:
    """CTXFOLD_DATABASE_URL, else the embedded SQLite file in the user's data folder."""
    from ctxfold.storage import default_sqlite_path

    env = os.environ if env is None else env
    url = env.get(DATABASE_ENV, "").strip()
    if url:
        return url
    path = default_sqlite_path(env)
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def database_option(command: F) -> F:
    """-d/--database URL, falling back to CTXFOLD_DATABASE_URL and then the embedded SQLite file."""
    return click.option(
        "-d",
        "--database",
        "database",
        metavar="URL",
        default=None,
        help=(
            "Store URL: sqlite:///path.db, postgresql://user@host/db or memory://. "
            f"Default: ${DATABASE_ENV}, else the embedded SQLite file "
            "(~/.local/share/ctxfold/ctxfold.db)."
        ),
    )(command)


def open_database(url: str | None) -> StoreBase:
    """Open the store named on the command line (or the default one)."""
    from ctxfold.storage import open_store

    return open_store(url or default_database_url())


def check_writable(path: Path) -> None:
    """Fail before any work when `path` cannot be written: its folder must exist."""
    if str(path) == "-":
        return
    if path.is_dir():
        raise InvalidInputError(f"cannot write {path}: it is a folder")
    if not path.parent.is_dir():
        raise InvalidInputError(f"cannot write {path}: folder {path.parent} does not exist")


def echo_json(data: Any) -> None:
    """One JSON object on stdout, keys in a stable order."""
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


def tokens(n: int) -> str:
    """A token count as people read it: 12,345."""
    return f"{n:,}"
