"""``ctxfold compact``: compact a transcript file once and say what it did."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click

from ctxfold.cli._common import (
    OutputFile,
    build_budget,
    build_summarizer,
    check_not_input,
    check_writable,
    echo_json,
    input_argument,
    is_stdout,
    json_option,
    parse_target,
    read_input,
    repair_option,
    summarizer_options,
    tokens,
    window_options,
)
from ctxfold.messages import dumps_jsonl, write_jsonl

if TYPE_CHECKING:
    from ctxfold.compactor import CompactionReport
    from ctxfold.messages.jsonl import Format


@click.command()
@input_argument
@click.option(
    "-o",
    "--output",
    type=OutputFile(),
    help="Where to write the compacted history ('-' for stdout), never INPUT itself. "
    "Default: INPUT's name with .compacted.jsonl, beside it.",
)
@window_options
@click.option(
    "--target",
    metavar="F",
    callback=parse_target,
    help="Where compaction stops: a fraction of the window (default 0.4) or a token count.",
)
@click.option(
    "--keep-recent-tokens",
    type=click.IntRange(min=0),
    help="Keep at least this many of the newest tokens verbatim (default 8000).",
)
@summarizer_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["openai", "anthropic"]),
    help="Format of the output. Default: the input's.",
)
@repair_option
@json_option
def compact(
    input: Path,
    output: Path | None,
    window: int | None,
    model: str | None,
    target: float | None,
    keep_recent_tokens: int | None,
    summarizer: str,
    summarizer_timeout: float | None,
    redact: bool,
    fmt: str | None,
    repair: bool,
    as_json: bool,
) -> None:
    """Compact the transcript INPUT (JSONL, OpenAI or Anthropic format) to fit a window.

    Writes the compacted history in the same format and prints tokens before and after, the
    target, what each strategy did, and identifiers kept and left out. An input that is not a
    valid history for the output's provider is refused (exit 2) unless --repair is given, and
    nothing is written when anything fails.

    \b
    Example:
      ctxfold compact run.jsonl -o run.small.jsonl --window 16000 --target 0.4
    """
    from ctxfold.replay import compact_transcript
    from ctxfold.summarizers.redact import redact_secrets
    from ctxfold.tokens import counter

    destination = output or input.with_name(f"{input.name.removesuffix('.jsonl')}.compacted.jsonl")
    check_not_input(destination, [input], "-o/--output")
    check_writable(destination)
    budget = build_budget(window, model, target, keep_recent_tokens)
    transcript = read_input(input, repair=repair, provider=fmt)
    out_format = cast("Format", fmt or transcript.format)
    count = counter(model or "auto")
    result = compact_transcript(
        transcript.messages,
        budget,
        provider=out_format,
        summarizer=build_summarizer(summarizer, redact=redact, timeout=summarizer_timeout),
        counter=count,
        redact=redact_secrets if redact else None,
    )
    to_stdout = is_stdout(destination)
    if to_stdout:
        sys.stdout.write(dumps_jsonl(result.messages, out_format))
    else:
        write_jsonl(destination, result.messages, format=out_format)
    summary = {
        "input": str(input),
        "output": str(destination),
        "format": out_format,
        "messages_before": len(transcript.messages),
        "messages_after": len(result.messages),
        "window": budget.window,
        **report_dict(result.report),
        "valid": True,
        "counter": count.name,
        "repaired": len(transcript.fixes),
    }
    if as_json:
        echo_json(summary, err=to_stdout)
    else:
        _print_summary(summary, result.report, to_stderr=to_stdout)


def report_dict(report: CompactionReport) -> dict[str, Any]:
    """The report's figures under the documented JSON keys."""
    return {
        "tokens_before": report.tokens_before,
        "tokens_after": report.tokens_after,
        "target": report.target,
        "fits": report.fits,
        "pinned_tokens": report.pinned_tokens,
        "reason": report.reason,
        "strategies": [
            {
                "name": s.name,
                "tokens_before": s.tokens_before,
                "tokens_after": s.tokens_after,
                "edits": s.edits,
            }
            for s in report.strategies
        ],
        "identifiers": {"kept": report.identifiers_kept, "left_out": report.identifiers_left_out},
        "summarizer": {
            "model": report.summarizer_model,
            "calls": report.summarizer_calls,
            "input_tokens": report.summarizer_input_tokens,
            "output_tokens": report.summarizer_output_tokens,
        },
        "summaries": list(report.summaries),
        "error": report.error,
        "duration_s": round(report.duration_s, 3),
    }


def strategy_lines(report: CompactionReport, indent: str = "  ") -> list[str]:
    """One line per strategy: name, tokens before and after, what it saved, how many edits."""
    width = max((len(s.name) for s in report.strategies), default=0)
    return [
        f"{indent}{s.name:<{width}}  {tokens(s.tokens_before):>9} -> {tokens(s.tokens_after):>9}"
        f"  (-{tokens(s.tokens_before - s.tokens_after)}, {s.edits} edits)"
        for s in report.strategies
    ]


def _print_summary(summary: dict[str, Any], report: CompactionReport, to_stderr: bool) -> None:
    def say(text: str) -> None:
        click.echo(text, err=to_stderr)

    fits = "fits the target" if summary["fits"] else "does NOT fit the target"
    say(
        f"{summary['input']}: {tokens(summary['tokens_before'])} -> "
        f"{tokens(summary['tokens_after'])} tokens (target {tokens(summary['target'])}, "
        f"window {tokens(summary['window'])}); {fits}"
    )
    for line in strategy_lines(report) or [f"  no strategy ran: {_why_none(summary)}"]:
        say(line)
    ids = summary["identifiers"]
    say(f"  identifiers: {ids['kept']} kept, {ids['left_out']} left out")
    if report.summarizer_calls:
        say(
            f"  summarizer: {report.summarizer_model or 'extractive'}, "
            f"{report.summarizer_calls} calls"
        )
    if report.error:
        # The ladder went on without the failed step: the history is valid, but not what a
        # working summarizer would have made (turns dropped rather than summarized, say).
        say(f"  failed: {report.error.rstrip('.')}; the strategies above went on without it")
    say(
        f"wrote {summary['output']} ({summary['format']}, {summary['messages_after']} messages, "
        f"was {summary['messages_before']}); a valid {summary['format']} history"
    )


def _why_none(summary: dict[str, Any]) -> str:
    """Why a compaction that ran no strategy left the transcript as it was."""
    if summary["fits"]:
        return "the transcript already fits the target"
    if summary["pinned_tokens"] > summary["target"]:
        # Under the window (else the command would have failed), over the target: a history
        # the provider accepts, but one no strategy may shrink.
        return (
            f"the messages that must stay (system prompt, current request, newest step) take "
            f"{tokens(summary['pinned_tokens'])} tokens, more than the target; the history "
            "still fits the window"
        )
    return "nothing in the transcript could be compacted; it still fits the window"
