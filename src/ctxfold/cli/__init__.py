"""The ``ctxfold`` command: compact, replay and validate transcripts; store and inspect sessions.

Each command body reads its input (`read_transcript`: one set of rules for every command), calls
one library function, and formats what it returns. Every failure is one line on stderr with a
documented exit status (`ctxfold.cli._errors`); docs/cli.md describes the conventions.
"""

from __future__ import annotations

import click

from ctxfold.cli._errors import CtxfoldGroup, end_on_sigterm
from ctxfold.cli.compact import compact
from ctxfold.cli.demo import demo
from ctxfold.cli.replay import replay
from ctxfold.cli.sessions import sessions
from ctxfold.cli.validate import validate


@click.group(cls=CtxfoldGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ctxfold", prog_name="ctxfold")
def cli() -> None:
    """Keep long-running LLM agent conversations inside the model's context window.

    Exit status: 0 done, 1 problems found (validate) or a ctxfold bug, 2 bad input,
    130 interrupted, 143 terminated.

    \b
    Examples:
      ctxfold demo
      ctxfold compact run.jsonl -o run.small.jsonl --window 16000
      ctxfold replay run.jsonl --window 16000 --html replay.html
      ctxfold validate run.jsonl --provider anthropic
      ctxfold sessions import run.jsonl --session run-42
    """


for command in (compact, replay, validate, sessions, demo):
    cli.add_command(command)


def main() -> None:
    """Entry point of the ``ctxfold`` console script (and ``python -m ctxfold``)."""
    end_on_sigterm()
    cli.main(prog_name="ctxfold")


__all__ = ["cli", "main"]
