"""``ctxfold replay``: play a transcript into a session as a live agent would, compaction on."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, cast

import click

from ctxfold.cli._common import (
    OutputFile,
    build_budget,
    build_summarizer,
    check_not_input,
    check_writable,
    database_option,
    echo_json,
    input_argument,
    json_option,
    read_input,
    repair_option,
    summarizer_options,
    tokens,
    window_options,
)

if TYPE_CHECKING:
    from ctxfold.messages import Message
    from ctxfold.messages.validity import Provider
    from ctxfold.protocols import Summarizer
    from ctxfold.replay import ReplayResult
    from ctxfold.tokens import Budget


@click.command()
@input_argument
@window_options
@database_option(
    help="Keep the replayed session in this store (sqlite:///runs.db, postgresql://..., "
    "memory://), under a new id replay-NAME. Default: memory://, gone afterwards.",
)
@click.option(
    "--html",
    type=OutputFile(dash=False),
    help="Write a self-contained HTML page with a chart of the run to this file.",
)
@summarizer_options
@repair_option
@json_option
def replay(
    input: Path,
    window: int | None,
    model: str | None,
    database: str | None,
    html: Path | None,
    summarizer: str,
    summarizer_timeout: float | None,
    redact: bool,
    repair: bool,
    as_json: bool,
) -> None:
    """Replay the transcript INPUT message by message with automatic compaction on.

    Before each model request the compactor's trigger runs, as in a live agent loop. Prints the
    context size of every request, each compaction, the summarizer calls, and how much of each
    request repeated the previous one's prefix (what a provider's prompt cache could reuse).
    A progress bar shows on a terminal.

    \b
    Example:
      ctxfold replay run.jsonl --window 16000 --html replay.html
    """
    if html is not None:
        check_not_input(html, [input], "--html")
        check_writable(html)
    budget = build_budget(window, model)
    transcript = read_input(input, repair=repair)
    result = run_replay(
        transcript.messages,
        budget,
        database=database,
        name=_session_name(input),
        provider=transcript.provider,
        summarizer=build_summarizer(summarizer, redact=redact, timeout=summarizer_timeout),
        redact=redact,
    )
    if html is not None:
        from ctxfold.replay import write_html

        write_html(html, result, title=f"ctxfold replay of {input.name}")
    if as_json:
        data = result.to_dict()
        data["input"] = str(input)
        data["html"] = str(html) if html is not None else None
        echo_json(data)
    else:
        print_replay(result, str(input))
        if html is not None:
            click.echo(f"html: {html}")


def _session_name(input: Path) -> str:
    """replay-STEM: a file name that is not UTF-8 (bytes Python holds as lone surrogates, which
    no store takes in an id) has them shown as U+FFFD."""
    stem = os.fsencode(input.stem).decode("utf-8", "replace")
    return f"replay-{stem}"


def run_replay(
    messages: list[Message],
    budget: Budget,
    *,
    database: str | None,
    name: str,
    provider: str = "openai",
    summarizer: Summarizer | None = None,
    redact: bool = True,
) -> ReplayResult:
    """Replay into the store `database` names (in memory when None), with a progress bar."""
    from ctxfold.replay import replay_transcript
    from ctxfold.storage import open_store
    from ctxfold.summarizers.redact import redact_secrets

    with open_store(database or "memory://") as store, _progress(len(messages)) as advance:
        return replay_transcript(
            messages,
            budget,
            store=store,
            name=name,
            progress=advance,
            provider=cast("Provider", provider),
            summarizer=summarizer,
            redact=redact_secrets if redact else None,
        )


def print_replay(result: ReplayResult, source: str) -> None:
    """The replay as a few lines of text: totals, each compaction, sizes per request."""
    from ctxfold.replay.html import strategy_text

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
    over = result.over_window
    if over:
        shown = ", ".join(str(turn) for turn in over[:8]) + (", ..." if len(over) > 8 else "")
        click.echo(
            f"  over the window: {len(over):,} of {len(result.requests):,} requests took more "
            f"than {tokens(result.window)} tokens (requests {shown}), which a provider refuses; "
            "compaction could not bring them under it"
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
    if result.fidelity is not None:
        from ctxfold.replay.fidelity import describe

        click.echo("  what the final view kept:")
        for line in describe(result.fidelity):
            click.echo(f"    {line}")
    click.echo("  context per request (tokens; * = compacted first):")
    cells = [
        f"{r.turn}:{r.tokens:,}{'*' if r.compaction is not None else ''}" for r in result.requests
    ]
    for start in range(0, len(cells), 8):
        click.echo("    " + "  ".join(cells[start : start + 8]))


@contextlib.contextmanager
def _progress(total: int) -> Iterator[Callable[[int], None] | None]:
    """A progress bar on stderr when it is a terminal; nothing otherwise."""
    if not sys.stderr.isatty():
        yield None
        return
    with click.progressbar(length=total, label="replaying", file=sys.stderr) as bar:
        yield bar.update
