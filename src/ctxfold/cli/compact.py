"""``ctxfold compact``: compact a transcript file once and say what it did."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ctxfold.cli._common import (
    build_summarizer,
    check_writable,
    echo_json,
    parse_target,
    read_transcript,
    tokens,
)
from ctxfold.errors import BudgetError
from ctxfold.messages import to_anthropic, to_openai, validate, write_jsonl

if TYPE_CHECKING:
    from ctxfold.compactor import CompactionReport
    from ctxfold.messages import Message
    from ctxfold.tokens import Budget


@click.command()
@click.argument("input", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the compacted history ('-' for stdout). "
    "Default: INPUT's name with .compacted.jsonl, beside it.",
)
@click.option("--window", type=click.IntRange(min=1), help="Context window in tokens.")
@click.option("--model", help="Take the window (and reply size) from this model, e.g. gpt-4o.")
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
@click.option(
    "--summarizer",
    default="extractive",
    show_default=True,
    metavar="extractive|openai:MODEL|anthropic:MODEL",
    help="Who writes summaries; the LLM ones read their SDK's usual API-key variables.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["openai", "anthropic"]),
    help="Format of the output. Default: the input's.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (see docs/cli.md).")
def compact(
    input: Path,
    output: Path | None,
    window: int | None,
    model: str | None,
    target: float | None,
    keep_recent_tokens: int | None,
    summarizer: str,
    fmt: str | None,
    as_json: bool,
) -> None:
    """Compact the transcript INPUT (JSONL, OpenAI or Anthropic format) to fit a window.

    Writes the compacted history in the same format and prints tokens before and after, the
    target, what each strategy did, identifiers kept and left out, and whether the result is a
    valid history. Nothing is written when the input is bad.

    \b
    Example:
      ctxfold compact run.jsonl -o run.small.jsonl --window 16000 --target 0.4
    """
    from ctxfold.compactor import compact_messages
    from ctxfold.tokens import counter

    destination = output or input.with_name(f"{input.name.removesuffix('.jsonl')}.compacted.jsonl")
    check_writable(destination)
    transcript = read_transcript(input)
    budget = build_budget(window, model, target, keep_recent_tokens)
    out_format = fmt or transcript.format
    count = counter(model or "auto")
    result = compact_messages(
        transcript.messages, budget, summarizer=build_summarizer(summarizer), counter=count
    )
    report = result.report
    if report.pinned_tokens > budget.window or report.tokens_after > budget.window:
        raise BudgetError(
            f"the messages that must stay (system prompt, current request, newest step) take "
            f"{max(report.pinned_tokens, report.tokens_after):,} tokens, more than the "
            f"{budget.window:,}-token window; raise --window"
        )
    problems = [p for p in validate(result.messages, out_format) if p.severity == "error"]  # type: ignore[arg-type]
    if problems:
        # Promise 2: a history a provider would reject is never written, even by the CLI.
        for problem in problems:
            click.echo(f"ctxfold: error: compacted history is invalid: {problem}", err=True)
        sys.exit(1)
    if str(destination) == "-":
        _write_stdout(result.messages, out_format)
    else:
        write_jsonl(destination, result.messages, format=out_format)  # type: ignore[arg-type]
    summary = {
        "input": str(input),
        "output": str(destination),
        "format": out_format,
        "messages_before": len(transcript.messages),
        "messages_after": len(result.messages),
        "window": budget.window,
        **report_dict(report),
        "valid": True,
        "counter": count.name,
    }
    if as_json:
        echo_json(summary)
    else:
        _print_summary(summary, report, to_stderr=str(destination) == "-")


def build_budget(
    window: int | None,
    model: str | None,
    target: float | None,
    keep_recent_tokens: int | None,
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
        return Budget(window=window, **fields)  # type: ignore[arg-type]
    except BudgetError as exc:
        given = " ".join(
            f"{flag} {value}"
            for flag, value in (("--window", window), ("--model", model), ("--target", target))
            if value is not None
        )
        raise BudgetError(f"{given}: {exc}") from None


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
    for line in strategy_lines(report) or ["  no strategy ran: the transcript already fits"]:
        say(line)
    ids = summary["identifiers"]
    say(f"  identifiers: {ids['kept']} kept, {ids['left_out']} left out")
    if report.summarizer_calls:
        say(
            f"  summarizer: {report.summarizer_model or 'extractive'}, "
            f"{report.summarizer_calls} calls"
        )
    say(
        f"wrote {summary['output']} ({summary['format']}, {summary['messages_after']} messages, "
        f"was {summary['messages_before']}); a valid {summary['format']} history"
    )


def _write_stdout(messages: list[Message], fmt: str) -> None:
    import json

    if fmt == "anthropic":
        system, rows = to_anthropic(messages)
        out: list[Any] = ([{"system": system}] if system is not None else []) + rows
    else:
        out = list(to_openai(messages))
    sys.stdout.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out))
