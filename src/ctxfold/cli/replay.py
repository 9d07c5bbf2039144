"""``ctxfold replay``: play a transcript into a session as a live agent would, compaction on."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ctxfold.cli._common import check_writable, echo_json, read_transcript, tokens
from ctxfold.errors import BudgetError

if TYPE_CHECKING:
    from collections.abc import Callable

    from ctxfold.messages import Message
    from ctxfold.replay import ReplayResult
    from ctxfold.storage import StoreBase


@click.command()
@click.argument("input", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--window", required=True, type=click.IntRange(min=1), help="Window in tokens.")
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Keep the session in this SQLite file (default: in memory, gone afterwards).",
)
@click.option(
    "--report",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write a self-contained HTML report with a chart of the run.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (see docs/cli.md).")
def replay(input: Path, window: int, db: Path | None, report: Path | None, as_json: bool) -> None:
    """Replay the transcript INPUT message by message with automatic compaction on.

    Before each model request the compactor's trigger runs, as in a live agent loop. Prints the
    context size of every request, each compaction, the summarizer calls, and how much of each
    request repeated the previous one's prefix (what a provider's prompt cache could reuse).
    A progress bar shows on a terminal.

    \b
    Example:
      ctxfold replay run.jsonl --window 16000 --report report.html
    """
    for path in (db, report):
        if path is not None:
            check_writable(path)
    transcript = read_transcript(input)
    result = run_replay(transcript.messages, window, db=db, session_prefix=input.stem)
    if report is not None:
        from ctxfold.report import write_html

        write_html(report, result, title=f"ctxfold replay of {input.name}")
    if as_json:
        data = result.to_dict()
        data["input"] = str(input)
        data["report"] = str(report) if report is not None else None
        echo_json(data)
    else:
        print_replay(result, str(input))
        if report is not None:
            click.echo(f"report: {report}")


def run_replay(
    messages: Sequence[Message], window: int, *, db: Path | None, session_prefix: str
) -> ReplayResult:
    """Replay into a fresh session of an in-memory store, or of the SQLite file `db`."""
    from ctxfold.compactor import Compactor
    from ctxfold.replay import replay as replay_messages
    from ctxfold.storage import MemoryStore, SQLiteStore
    from ctxfold.tokens import Budget, counter

    count = counter("auto")
    system = sum(count.count_message(m) for m in messages if m.role == "system")
    if system > window:
        raise BudgetError(
            f"the system prompt alone takes {system:,} tokens, more than the "
            f"{window:,}-token window; raise --window"
        )
    store: StoreBase = SQLiteStore(str(db)) if db is not None else MemoryStore()
    with store, _progress(len(messages)) as advance:
        session = store.session(_fresh_id(store, f"replay-{session_prefix}"), counter=count)
        compactor = Compactor(Budget(window=window), counter=count)
        return replay_messages(session, messages, compactor, counter=count, progress=advance)


def print_replay(result: ReplayResult, source: str) -> None:
    """The replay as a few lines of text: totals, each compaction, sizes per request."""
    from ctxfold.report.html import strategy_text

    click.echo(
        f"replayed {source}: {result.messages:,} messages, {len(result.requests):,} requests, "
        f"window {tokens(result.window)} (trigger {tokens(result.trigger)}, "
        f"target {tokens(result.target)})"
    )
    click.echo(
        f"  context: largest request {tokens(result.peak_tokens)}, last "
        f"{tokens(result.final_tokens)} tokens; the whole transcript is "
        f"{tokens(result.original_tokens)}"
    )
    failed = f" ({result.failed_compactions} failed)" if result.failed_compactions else ""
    click.echo(
        f"  compactions: {len(result.compactions)}{failed}; "
        f"summarizer calls: {result.summarizer_calls}"
    )
    for number, c in enumerate(result.compactions, 1):
        r = c.report
        what = strategy_text(c, "-") or r.error or ""
        click.echo(
            f"    #{number} before request {c.turn}: {tokens(r.tokens_before)} -> "
            f"{tokens(r.tokens_after)} (-{tokens(c.saved)}) {what}"
        )
    click.echo(
        f"  prompt-cache reuse: {result.cache_reuse:.1%} ({tokens(result.reused_tokens)} of "
        f"{tokens(result.requested_tokens)} tokens sent repeated the previous request's prefix)"
    )
    click.echo("  context per request (tokens; * = compacted first):")
    cells = [
        f"{r.turn}:{r.tokens:,}{'*' if r.compaction is not None else ''}" for r in result.requests
    ]
    for start in range(0, len(cells), 8):
        click.echo("    " + "  ".join(cells[start : start + 8]))


def _fresh_id(store: StoreBase, base: str) -> str:
    """`base`, or `base-2`, `base-3`, ... : a replay never appends to an earlier run's session."""
    taken = set(store.sessions())
    if base not in taken:
        return base
    n = 2
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"


@contextlib.contextmanager
def _progress(total: int) -> Iterator[Callable[[int], None] | None]:
    """A progress bar on stderr when it is a terminal; nothing otherwise."""
    if not sys.stderr.isatty():
        yield None
        return
    with click.progressbar(length=total, label="replaying", file=sys.stderr) as bar:
        yield bar.update
