"""``ctxfold validate``: would a provider accept this history? Optionally repair it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, cast

import click

from ctxfold.cli._common import (
    OutputFile,
    check_writable,
    echo_json,
    input_argument,
    is_stdout,
    json_option,
    plural,
    read_input,
)
from ctxfold.messages import Problem, Transcript, dumps_jsonl, read_transcript, write_jsonl
from ctxfold.messages import validate as find_problems
from ctxfold.messages.validity import Provider


@click.command()
@input_argument
@click.option(
    "--provider",
    type=click.Choice(["openai", "anthropic"]),
    help="Check against this provider's rules. Default: the file's format.",
)
@click.option(
    "--repair",
    is_flag=True,
    help="Drop tool results that answer no call and add a placeholder result for unanswered "
    "calls, then write the result to -o OUT; each change is reported on stderr.",
)
@click.option(
    "-o",
    "--output",
    type=OutputFile(),
    help="Where --repair writes the repaired history (same format as INPUT); '-' for stdout.",
)
@json_option
def validate(
    input: Path, provider: str | None, repair: bool, output: Path | None, as_json: bool
) -> None:
    """Check that the transcript INPUT is a history the provider would accept.

    Exit status 0 when it is valid, 1 with one line per problem when not (notes that a provider
    accepts, such as a final call still waiting for its result, do not fail it). A file that
    cannot be read at all (a bad line, no messages) is exit status 2, as for every command.

    \b
    Examples:
      ctxfold validate run.jsonl
      ctxfold validate run.jsonl --provider anthropic --repair -o run.fixed.jsonl
      ctxfold validate run.jsonl --repair -o - | head
    """
    if repair != (output is not None):
        raise click.UsageError("--repair and -o go together: --repair -o OUT")
    if repair and output is not None:
        check_writable(output)
        fixed = read_input(input, repair=True, provider=provider)
        if is_stdout(output):
            sys.stdout.write(dumps_jsonl(fixed.messages, fixed.format))
        else:
            write_jsonl(output, fixed.messages, format=fixed.format)
        _repaired(fixed, output, as_json)
        return
    transcript = read_transcript(input, provider=cast("Provider | None", provider), check=False)
    problems = find_problems(transcript.messages, transcript.provider)
    errors = [p for p in problems if p.severity == "error"]
    if as_json:
        echo_json(_checked(transcript, problems))
    else:
        _report(transcript, problems)
        if not errors:
            click.echo(
                f"{input}: valid for {transcript.provider} ({len(transcript.messages)} messages)"
            )
    if errors:
        sys.exit(1)


def _report(transcript: Transcript, problems: list[Problem]) -> None:
    """Print one line per problem: errors on stdout, notes on stderr."""
    for problem in problems:
        where = f"{transcript.source}: {transcript.where(problem.index)}"
        if problem.severity == "error":
            click.echo(f"{where}: {problem.code}: {problem.message}")
        else:
            click.echo(f"{where}: note: {problem.code}: {problem.message}", err=True)


def _checked(transcript: Transcript, problems: list[Problem]) -> dict[str, Any]:
    return {
        "input": transcript.source,
        "provider": transcript.provider,
        "messages": len(transcript.messages),
        "valid": not any(p.severity == "error" for p in problems),
        "problems": [
            {
                "line": transcript.lines[p.index],
                "code": p.code,
                "severity": p.severity,
                "message": p.message,
            }
            for p in problems
        ],
    }


def _repaired(fixed: Transcript, output: Path, as_json: bool) -> None:
    # With -o -, stdout carries the history, so the report goes to stderr.
    to_stderr = is_stdout(output)
    if as_json:
        data = _checked(fixed, list(fixed.notes))
        data.update(
            output=str(output),
            fixes=[
                {
                    "line": fixed.input_lines[f.index],
                    "action": f.action,
                    "call_id": f.call_id,
                    "message": f.message,
                }
                for f in fixed.fixes
            ],
        )
        echo_json(data, err=to_stderr)
        return
    click.echo(
        f"{fixed.source}: {plural(len(fixed.fixes), 'change')} "
        f"({len(fixed.input_lines)} -> {len(fixed.messages)} messages); wrote {output}, "
        f"valid for {fixed.provider}",
        err=to_stderr,
    )
