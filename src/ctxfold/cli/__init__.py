"""The ``ctxfold`` command: compact, replay and validate transcripts; inspect stored sessions.

Each command body reads its input, calls one library function, and formats what it returns.
"""

from __future__ import annotations

import click

from ctxfold.cli._common import CtxfoldGroup
from ctxfold.cli.compact import compact
from ctxfold.cli.demo import demo
from ctxfold.cli.recall import recall
from ctxfold.cli.replay import replay
from ctxfold.cli.sessions import import_transcript, sessions
from ctxfold.cli.validate import validate
from ctxfold.cli.watch import watch


@click.group(cls=CtxfoldGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ctxfold", prog_name="ctxfold")
def cli() -> None:
    """Keep long-running LLM agent conversations inside the model's context window.

    \b
    Examples:
      ctxfold demo
      ctxfold compact run.jsonl -o run.small.jsonl --window 16000
      ctxfold replay run.jsonl --window 16000 --report report.html
      ctxfold validate run.jsonl --provider anthropic
    """


for command in (compact, replay, validate, sessions, import_transcript, demo):
    cli.add_command(command)
sessions.add_command(recall)
sessions.add_command(watch)


def main() -> None:
    """Entry point of the ``ctxfold`` console script."""
    cli.main(prog_name="ctxfold")


__all__ = ["cli", "main"]
