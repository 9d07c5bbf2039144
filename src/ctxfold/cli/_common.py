"""What every command shares: reading transcripts, options that build objects, output helpers.

Environment variables are read here and in `_errors` and nowhere else in ctxfold.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from ctxfold.errors import BudgetError, MissingDependencyError
from ctxfold.messages import Transcript, read_transcript

if TYPE_CHECKING:
    from ctxfold.messages.validity import Provider
    from ctxfold.protocols import SyncSummarizer
    from ctxfold.storage import StoreBase
    from ctxfold.tokens import Budget

DATABASE_ENV = "CTXFOLD_DATABASE_URL"
F = TypeVar("F", bound=Callable[..., Any])


def read_input(path: Path, *, repair: bool, provider: str | None = None) -> Transcript:
    """Read INPUT under the one set of reading rules (`read_transcript`); with --repair, say on
    stderr what the repair changed, one line per change."""
    transcript = read_transcript(path, provider=cast("Provider | None", provider), repair=repair)
    for fix in transcript.fixes:
        click.echo(
            f"ctxfold: repaired {path}: {transcript.fix_where(fix)}: {fix.message}", err=True
        )
    return transcript


def input_argument(command: F) -> F:
    """INPUT: a JSONL transcript file that must exist."""
    return click.argument("input", type=click.Path(exists=True, dir_okay=False, path_type=Path))(
        command
    )


def repair_option(command: F) -> F:
    """--repair: fix results and calls that do not pair up instead of refusing the input."""
    return click.option(
        "--repair",
        is_flag=True,
        help="Repair an input whose tool results and calls do not pair up (drop results that "
        "answer no call, answer calls never answered) instead of refusing it; each change is "
        "reported on stderr.",
    )(command)


def json_option(command: F) -> F:
    """--json: one JSON object on stdout instead of text."""
    return click.option(
        "--json", "as_json", is_flag=True, help="Print one JSON object (see docs/cli.md)."
    )(command)


def window_options(command: F) -> F:
    """--window N / --model NAME: the context window, given or from the model catalog."""
    command = click.option(
        "--model", help="Take the window (and reply size) from this model, e.g. gpt-4o."
    )(command)
    return click.option("--window", type=click.IntRange(min=1), help="Context window in tokens.")(
        command
    )


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


def build_budget(
    window: int | None,
    model: str | None,
    target: float | None = None,
    keep_recent_tokens: int | None = None,
) -> Budget:
    """The budget the options describe; exactly one of --window and --model is needed."""
    from ctxfold.tokens import Budget, lookup

    if (window is None) == (model is None):
        raise click.UsageError("give either --window N or --model NAME (one of them, not both)")
    if model is not None and lookup(model) is None:
        raise BudgetError(f"unknown model {model!r}; give its context window with --window N")
    fields: dict[str, Any] = {}
    if target is not None:
        fields["target"] = target
    if keep_recent_tokens is not None:
        fields["keep_recent_tokens"] = keep_recent_tokens
    try:
        if model is not None:
            return Budget.for_model(model, **fields)
        return Budget(window=cast(int, window), **fields)
    except BudgetError as exc:
        given = " ".join(
            f"{flag} {value}"
            for flag, value in (("--window", window), ("--model", model), ("--target", target))
            if value is not None
        )
        raise BudgetError(f"{given}: {exc}") from None


def summarizer_options(command: F) -> F:
    """--summarizer, --summarizer-timeout and --redact/--no-redact, for the commands that
    summarize."""
    command = click.option(
        "--summarizer-timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        metavar="SECONDS",
        help="How long one call of an LLM summarizer may take before it fails, and the "
        "compaction goes on without it. Default: the SDK's own.",
    )(command)
    command = click.option(
        "--redact/--no-redact",
        default=True,
        show_default=True,
        help="Scrub secrets (keys, tokens, passwords, private keys) from what an LLM "
        "summarizer is sent and from every summary written.",
    )(command)
    return click.option(
        "--summarizer",
        default="extractive",
        show_default=True,
        metavar="extractive|openai:MODEL|anthropic:MODEL",
        help="Who writes summaries; the LLM ones read their SDK's usual API-key variables.",
    )(command)


def build_summarizer(
    spec: str, *, redact: bool = True, timeout: float | None = None
) -> SyncSummarizer | None:
    """The summarizer `spec` names: ``extractive``, ``openai:MODEL`` or ``anthropic:MODEL``.

    ``extractive`` is None: the compactor's own default, which counts with the compactor's
    counter, so a summary's budget is in the same exact tokens as the window. With `redact`, an
    LLM summarizer scrubs secrets from everything it sends (its default); without, it sends the
    history as it is. `timeout` (seconds) bounds each call of an LLM summarizer (None: the SDK's
    default). The SDK is imported only here, so the other choices work without it.
    """
    kind, _, model = spec.partition(":")
    if kind == "extractive" and not model:
        return None
    if kind in ("openai", "anthropic") and model:
        from ctxfold.summarizers.redact import redact_secrets

        scrub = redact_secrets if redact else None
        try:
            if kind == "openai":
                from ctxfold.summarizers.openai import OpenAISummarizer

                return cast(
                    "SyncSummarizer", OpenAISummarizer(model, redact=scrub, timeout=timeout)
                )
            from ctxfold.summarizers.anthropic import AnthropicSummarizer

            return cast("SyncSummarizer", AnthropicSummarizer(model, redact=scrub, timeout=timeout))
        except ImportError as exc:
            if isinstance(exc, MissingDependencyError):
                raise
            raise MissingDependencyError(f"--summarizer {spec}", kind, kind) from None
    raise click.BadParameter(
        f"{spec!r} is not a summarizer; use extractive, openai:MODEL or anthropic:MODEL "
        "(for example openai:gpt-4o-mini)",
        param_hint="'--summarizer'",
    )


DATABASE_HELP = (
    "Store URL: sqlite:///path.db, postgresql://user@host/db or memory://. "
    f"Default: ${DATABASE_ENV}, else the embedded SQLite file "
    "(~/.local/share/ctxfold/ctxfold.db)."
)


def database_option(*, help: str = DATABASE_HELP) -> Callable[[F], F]:
    """-d/--database URL: the one way every command names a store."""
    return click.option("-d", "--database", "database", metavar="URL", default=None, help=help)


def open_database(url: str | None, *, create: bool = True) -> StoreBase:
    """Open the store named on the command line, else by $CTXFOLD_DATABASE_URL, else the
    embedded SQLite file in the user's data folder. Commands that only read pass
    ``create=False``: a SQLite file that is not there is an error naming it, rather than a new
    empty database that would answer "no sessions"."""
    from ctxfold.errors import StoreUnavailableError
    from ctxfold.storage import default_sqlite_path, open_store

    named = _named(url)
    if named:
        return open_store(named, create=create)
    path = default_sqlite_path()
    if not create and not path.exists():
        # Nothing named, and the embedded file not made yet: nothing was ever stored here.
        raise StoreUnavailableError(
            f"no sessions stored yet: the embedded database {path} does not exist (a command "
            "that writes makes it, such as 'ctxfold sessions import'); name another store with "
            f"-d URL or ${DATABASE_ENV}"
        )
    return open_store(f"sqlite:///{path}", create=create)


def database_file(url: str | None) -> Path | None:
    """The SQLite file `open_database` would open for `url`; None when it opens another store."""
    from ctxfold.storage import default_sqlite_path
    from ctxfold.storage.url import sqlite_file

    named = _named(url)
    return sqlite_file(named) if named else default_sqlite_path()


def _named(url: str | None) -> str:
    return url or os.environ.get(DATABASE_ENV, "").strip()


def check_writable(path: Path) -> None:
    """Fail before any work when `path` cannot be written: its folder must exist."""
    from ctxfold.errors import InvalidInputError

    if str(path) == "-":
        return
    if path.is_dir():
        raise InvalidInputError(f"cannot write {path}: it is a folder")
    if not path.parent.is_dir():
        raise InvalidInputError(f"cannot write {path}: folder {path.parent} does not exist")


def echo_json(data: Any, *, err: bool = False) -> None:
    """One JSON object on stdout (stderr when stdout carries data), keys in a stable order."""
    click.echo(json.dumps(data, ensure_ascii=False, indent=2), err=err)


def tokens(n: int) -> str:
    """A token count as people read it: 12,345."""
    return f"{n:,}"


def plural(n: int, word: str) -> str:
    """``1 problem``, ``2 problems``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
