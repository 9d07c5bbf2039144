"""What every command shares: reading transcripts, options that build objects, output helpers.

Environment variables are read here and in `_errors` and nowhere else in ctxfold.
"""

from __future__ import annotations

import contextlib
import json
import os
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from ctxfold.errors import BudgetError, CtxfoldError, MissingDependencyError
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
    """The budget the options describe; exactly one of --window and --model is needed. A
    budget that cannot work is a `BudgetError` in the words of the command line's flags."""
    import dataclasses

    from ctxfold.tokens import Budget, lookup
    from ctxfold.tokens.budget import target_in_tokens

    if (window is None) == (model is None):
        raise click.UsageError("give either --window N or --model NAME (one of them, not both)")
    if model is not None and lookup(model) is None:
        raise BudgetError(f"unknown model {model!r}; give its context window with --window N")
    fields: dict[str, Any] = {}
    if keep_recent_tokens is not None:
        fields["keep_recent_tokens"] = keep_recent_tokens
    given = f"--model {model}" if model is not None else f"--window {window}"
    try:
        if model is not None:
            budget = Budget.for_model(model, **fields)
        else:
            budget = Budget(window=cast(int, window), **fields)
    except BudgetError as exc:
        raise BudgetError(f"{given}: {exc}") from None
    if target is None:
        return budget
    try:
        return dataclasses.replace(budget, target=target)
    except BudgetError:
        # The one way a target that passed the option's own check can fail: it is not below
        # the point where compaction starts. Quote that point as the default target has it
        # (for a small window a larger target can move it up): any target below it works.
        shown = str(int(target)) if float(target).is_integer() else repr(target)
        raise BudgetError(
            f"--target {shown} is {tokens(target_in_tokens(target, budget.window))} tokens, "
            f"not below the trigger point of {tokens(budget.trigger_tokens)}, where "
            f"compaction starts with {given} (the window less {tokens(budget.reserve_tokens)} "
            "tokens kept for the reply); give a smaller --target, such as the default 0.4"
        ) from None


def summarizer_options(command: F) -> F:
    """--summarizer, --summarizer-timeout and --redact/--no-redact, for the commands that
    summarize."""
    command = click.option(
        "--summarizer-timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        metavar="SECONDS",
        help="How long one attempt of an LLM summarizer's call may take before it fails (the "
        "SDK tries twice more), and the compaction goes on without it. Default: the SDK's own.",
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

    named = named_store(url)
    if named:
        with _password_masked(named):
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

    named = named_store(url)
    if not named:
        return default_sqlite_path()
    with _password_masked(named):
        return sqlite_file(named)


def in_memory(url: str | None) -> bool:
    """True when `url` (or $CTXFOLD_DATABASE_URL) names a store that lives in this process's
    memory (``memory://``, ``sqlite:///:memory:``), which no other process can see."""
    named = named_store(url)
    scheme, separator, _ = named.partition("://")
    if not separator:
        return False
    if scheme.lower() == "memory":
        return True
    return scheme.lower() == "sqlite" and database_file(url) is None


def named_store(url: str | None) -> str:
    """The store URL in effect: -d's `url`, else $CTXFOLD_DATABASE_URL; empty for the embedded
    SQLite file."""
    return url or os.environ.get(DATABASE_ENV, "").strip()


@contextlib.contextmanager
def _password_masked(url: str) -> Iterator[None]:
    """Mask the password of `url` in any error raised inside, as the PostgreSQL store does for
    its own: an error line may end up in a log or a bug report."""
    from ctxfold.storage.checks import redacted

    try:
        yield
    except CtxfoldError as exc:
        shown = redacted(url)
        if shown != url:
            exc.args = tuple(
                arg.replace(url, shown) if isinstance(arg, str) else arg for arg in exc.args
            )
        raise


class OutputFile(click.Path):
    """An output file option: a path (``-`` for stdout when `dash`), never an empty one, which
    click would read as the current folder."""

    def __init__(self, *, dash: bool = True) -> None:
        super().__init__(dir_okay=False, allow_dash=dash, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            where = " or '-' for stdout" if self.allow_dash else ""
            self.fail(f"{value!r} names no file; give a file name{where}", param, ctx)
        return super().convert(value, param, ctx)


def is_stdout(path: Path | None) -> bool:
    """True for the ``-`` that an output option reads as stdout."""
    return path is not None and str(path) == "-"


def check_writable(path: Path) -> None:
    """Fail before any work when `path` plainly cannot be written: an empty path, a folder, a
    missing folder, one this process may not write (see `check_target`)."""
    from ctxfold._files import check_target

    if not is_stdout(path):
        check_target(path)


def check_not_input(output: Path, inputs: list[Path], option: str) -> None:
    """Refuse (a usage error, exit 2) the output file `option` names (``"-o/--output"``,
    ``"--html"``) when it is one of the `inputs`, through a link or another spelling included,
    before any work: the write would replace a file the command reads. ``-`` (stdout) is never
    an input.

    >>> check_not_input(Path("run.small.jsonl"), [Path("run.jsonl")], "-o/--output")
    """
    if is_stdout(output):
        return
    for given in inputs:
        if _same_file(output, given):
            raise click.BadParameter(
                f"{str(output)!r} is the input transcript {str(given)!r}; writing there would "
                "replace it, so give another file",
                param_hint=" / ".join(f"'{flag}'" for flag in option.split("/")),
            )


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them is not there yet: compare where the names lead
        return os.path.realpath(a) == os.path.realpath(b)


def printable(text: str) -> str:
    """`text` with its control characters escaped as Python writes them (``\\n``, ``\\x1b``,
    ``\\u2028``), so that a value from a store (a session id, say) stays on its line and cannot
    drive the terminal; everything else, non-ASCII letters included, is left as it is.

    >>> printable("run\\n42\\x1b[2J")
    'run\\\\n42\\\\x1b[2J'
    """
    return "".join(_escaped(char) for char in text)


def _escaped(char: str) -> str:
    if unicodedata.category(char) in ("Cc", "Zl", "Zp") or char in _BIDI_CONTROLS:
        return repr(char)[1:-1]
    return char


# Characters that reorder how a terminal shows the text around them.
_BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


def echo_json(data: Any, *, err: bool = False) -> None:
    """One JSON object on stdout (stderr when stdout carries data), keys in a stable order."""
    click.echo(json.dumps(data, ensure_ascii=False, indent=2), err=err)


def tokens(n: int) -> str:
    """A token count as people read it: 12,345."""
    return f"{n:,}"


def plural(n: int, word: str) -> str:
    """``1 problem``, ``2 problems``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
