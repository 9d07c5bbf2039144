"""``ctxfold validate``: would a provider accept this history? Optionally repair it."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ctxfold.cli._common import Transcript, read_transcript
from ctxfold.messages import Problem, repair, write_jsonl
from ctxfold.messages import validate as find_problems


@click.command()
@click.argument("input", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--provider",
    type=click.Choice(["openai", "anthropic"]),
    help="Check against this provider's rules. Default: the file's format.",
)
@click.option(
    "--repair",
    "do_repair",
    is_flag=True,
    help="Drop tool results that answer no call and add a placeholder result for unanswered "
    "calls; needs -o.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where --repair writes the repaired history (same format as INPUT).",
)
def validate(input: Path, provider: str | None, do_repair: bool, output: Path | None) -> None:
    """Check that the transcript INPUT is a history the provider would accept.

    Exit status 0 when it is valid, 1 with one line per problem when not (notes that a provider
    accepts, such as a final call still waiting for its result, do not fail it).

    \b
    Examples:
      ctxfold validate run.jsonl
      ctxfold validate run.jsonl --provider anthropic --repair -o run.fixed.jsonl
    """
    if do_repair != (output is not None):
        raise click.UsageError("--repair and -o go together: --repair -o OUT")
    transcript = read_transcript(input)
    checked = provider or transcript.format
    problems = find_problems(transcript.messages, checked)  # type: ignore[arg-type]
    if do_repair and output is not None:
        _repair(transcript, problems, checked, output)
        return
    errors = _report(transcript, problems)
    if errors:
        sys.exit(1)
    click.echo(f"{input}: valid for {checked} ({len(transcript.messages)} messages)")


def _report(transcript: Transcript, problems: list[Problem]) -> int:
    """Print one line per problem (errors on stdout, notes on stderr); return the error count."""
    errors = 0
    for problem in problems:
        where = f"{transcript.path}: {transcript.where(problem.index)}"
        if problem.severity == "error":
            errors += 1
            click.echo(f"{where}: {problem.code}: {problem.message}")
        else:
            click.echo(f"{where}: note: {problem.code}: {problem.message}", err=True)
    return errors


def _repair(transcript: Transcript, before: list[Problem], provider: str, output: Path) -> None:
    repaired = repair(transcript.messages)
    left = [p for p in find_problems(repaired, provider) if p.severity == "error"]  # type: ignore[arg-type]
    if left:
        # Repair handles pairing problems only; what is left needs a person.
        _report(Transcript(output, repaired, transcript.format, None), left)
        click.echo(
            f"ctxfold: error: {_plural(len(left), 'problem')} remain after repair; "
            f"{output} not written",
            err=True,
        )
        sys.exit(1)
    write_jsonl(output, repaired, format=transcript.format)
    fixed = _plural(sum(1 for p in before if p.severity == "error"), "problem")
    click.echo(
        f"{transcript.path}: {fixed} repaired ({len(transcript.messages)} -> "
        f"{len(repaired)} messages); wrote {output}, valid for {provider}"
    )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
