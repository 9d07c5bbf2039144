"""The command line is consistent: one database option, one reading rule, --json where a command
prints a result, and every documented command in docs/cli.md and the README exists."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from ctxfold.cli import cli

ROOT = Path(__file__).resolve().parents[1]


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> dict[str, click.Command]:
    out: dict[str, click.Command] = {}
    for name, command in group.commands.items():
        out[" ".join((*path, name))] = command
        if isinstance(command, click.Group):
            out.update(_commands(command, (*path, name)))
    return out


COMMANDS = _commands(cli)


def _options(command: click.Command) -> dict[str, click.Option]:
    return {
        opt: param
        for param in command.params
        if isinstance(param, click.Option)
        for opt in param.opts
    }


def test_the_command_tree() -> None:
    """The commands are these; a new one is a conscious change to this list and to docs/cli.md."""
    assert sorted(COMMANDS) == [
        "compact", "demo", "replay", "sessions", "sessions export", "sessions import",
        "sessions list", "sessions log", "sessions recall", "sessions show", "sessions watch",
        "validate",
    ]  # fmt: skip


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_store_is_always_named_by_dash_d_database(name: str) -> None:
    """Every command that opens a store takes -d/--database URL, and no command has another
    option for it (no --db, no --store)."""
    options = _options(COMMANDS[name])
    takes_store = name.startswith(("sessions", "replay"))
    assert ("-d" in options and "--database" in options) == takes_store
    if takes_store:
        assert options["-d"] is options["--database"]
        assert options["-d"].metavar == "URL"
    assert not {"--db", "--store", "--sqlite"} & set(options)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_that_reads_a_transcript_can_repair_it(name: str) -> None:
    """The commands that take a transcript INPUT all take --repair, so the one reading rule
    (refuse an invalid history, or repair it when asked) applies everywhere."""
    command = COMMANDS[name]
    reads = any(isinstance(p, click.Argument) and p.name == "input" for p in command.params)
    assert reads == (name in {"compact", "replay", "validate", "sessions import"})
    if reads:
        assert "--repair" in _options(command)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_json_wherever_a_command_prints_a_result(name: str) -> None:
    """--json on every command that prints a result; not on export (its output is JSONL
    already) nor on demo (it writes files for people to open)."""
    has_json = "--json" in _options(COMMANDS[name])
    assert has_json == (name not in {"sessions export", "demo"})


def test_docs_and_readme_name_only_commands_that_exist() -> None:
    """Every ``ctxfold ...`` command line in the code of docs/cli.md and the README starts with
    a real command (no stale ``ctxfold import``), and every command is documented."""
    text = (ROOT / "docs" / "cli.md").read_text() + (ROOT / "README.md").read_text()
    shell = [b for b in re.findall(r"```.*?```", text, flags=re.S) if not b.startswith("```py")]
    code = shell + re.findall(r"`[^`\n]+`", text)
    used = set()
    for span in code:
        for first, second in re.findall(r"(?<![\w.-])ctxfold ([a-z][a-z-]*)(?: ([a-z]+))?", span):
            subcommands = {"list", "show", "log", "export", "import", "recall", "watch"}
            if first == "sessions" and second in subcommands:
                used.add(f"sessions {second}")
            else:
                used.add(first)
    assert used <= set(COMMANDS), used - set(COMMANDS)
    assert set(COMMANDS) <= used, set(COMMANDS) - used
