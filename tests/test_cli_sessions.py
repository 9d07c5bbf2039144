"""``ctxfold import`` and ``ctxfold sessions list|show|log|export`` against a database."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _cli import WAYS, run_cli
from ctxfold import __version__
from ctxfold.cli import cli
from ctxfold.demo_session import generate
from ctxfold.messages import read_jsonl, write_jsonl


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    path = tmp_path / "run.jsonl"
    write_jsonl(path, generate(seed=1, steps=8))
    return path


@pytest.mark.parametrize("how", WAYS)
def test_import_then_list_show_log_and_export(how: str, transcript: Path, tmp_path: Path) -> None:
    """An imported transcript is listed, shown message by message, logged event by event, and
    exported back as the same messages."""
    db = f"sqlite:///{tmp_path / 'agent.db'}"
    messages = read_jsonl(transcript)
    imported = run_cli(["import", str(transcript), "--session", "run-1", "-d", db], how=how,
                       home=tmp_path)  # fmt: skip
    assert imported.code == 0 and f"imported {len(messages)} messages" in imported.stdout
    listed = run_cli(["sessions", "list", "-d", db], how=how, home=tmp_path)
    assert listed.stdout == f"run-1\t{len(messages)} events\n"
    shown = run_cli(["sessions", "show", "run-1", "-d", db], how=how, home=tmp_path)
    assert len(shown.stdout.splitlines()) == len(messages)
    assert shown.stdout.splitlines()[0].split()[1] == "system"
    logged = run_cli(["sessions", "log", "run-1", "-d", db], how=how, home=tmp_path)
    assert len(logged.stdout.splitlines()) == len(messages)
    exported = run_cli(["sessions", "export", "run-1", "-d", db], how=how, home=tmp_path)
    assert read_jsonl(exported.stdout.splitlines()) == messages


def test_export_to_a_file_in_anthropic_format(transcript: Path, tmp_path: Path) -> None:
    """export -o writes a file in the format asked for."""
    db = f"sqlite:///{tmp_path / 'agent.db'}"
    run_cli(["import", str(transcript), "--session", "s", "-d", db], how="runner", home=tmp_path)
    out = tmp_path / "s.jsonl"
    done = run_cli(["sessions", "export", "s", "-d", db, "--format", "anthropic", "-o", str(out)],
                   how="runner", home=tmp_path)  # fmt: skip
    assert done.code == 0
    assert set(json.loads(out.read_text().splitlines()[0])) == {"system"}
    assert [m.text for m in read_jsonl(out)] == [m.text for m in read_jsonl(transcript)]


@pytest.mark.parametrize("how", WAYS)
def test_the_database_comes_from_the_environment_or_the_default_file(
    how: str, transcript: Path, tmp_path: Path
) -> None:
    """Without -d, CTXFOLD_DATABASE_URL names the store; without that, the embedded SQLite file
    in the user's data folder is used."""
    url = f"sqlite:///{tmp_path / 'env.db'}"
    env = {"CTXFOLD_DATABASE_URL": url}
    run_cli(["import", str(transcript), "--session", "from-env"], how=how, home=tmp_path, env=env)
    assert (tmp_path / "env.db").is_file()
    listed = run_cli(["sessions", "list", "-d", url], how=how, home=tmp_path)
    assert listed.stdout.startswith("from-env\t")
    run_cli(["import", str(transcript), "--session", "default"], how=how, home=tmp_path)
    assert (tmp_path / "xdg" / "ctxfold" / "ctxfold.db").is_file()
    listed = run_cli(["sessions", "list"], how=how, home=tmp_path)
    assert listed.stdout.startswith("default\t")


def test_importing_into_an_existing_session_is_refused(transcript: Path, tmp_path: Path) -> None:
    """A second import under the same id would mix two runs; it exits 2 and names the session."""
    db = f"sqlite:///{tmp_path / 'agent.db'}"
    args = ["import", str(transcript), "--session", "s", "-d", db]
    assert run_cli(args, how="runner", home=tmp_path).code == 0
    again = run_cli(args, how="runner", home=tmp_path)
    assert again.code == 2 and "'s' already has" in again.stderr


@pytest.mark.parametrize("command", ["show", "log", "export"])
def test_an_unknown_session_is_a_clear_error(command: str, tmp_path: Path) -> None:
    """Asking for a session that is not there exits 2 and names it."""
    db = f"sqlite:///{tmp_path / 'agent.db'}"
    outcome = run_cli(["sessions", command, "nope", "-d", db], how="runner", home=tmp_path)
    assert outcome.code == 2 and "'nope'" in outcome.stderr


def _commands(group, path=()):  # type: ignore[no-untyped-def]
    for name, command in getattr(group, "commands", {}).items():
        yield (*path, name)
        yield from _commands(command, (*path, name))


@pytest.mark.parametrize("how", WAYS)
@pytest.mark.parametrize("path", [(), *_commands(cli)], ids=lambda p: " ".join(p) or "ctxfold")
def test_every_command_has_help_with_an_example(how: str, path: tuple[str, ...],
                                                tmp_path: Path) -> None:  # fmt: skip
    """--help works on every command and shows at least one example invocation."""
    outcome = run_cli([*path, "--help"], how=how, home=tmp_path)
    assert outcome.code == 0
    assert "Example" in outcome.stdout and "ctxfold " in outcome.stdout


@pytest.mark.parametrize("how", WAYS)
def test_version(how: str, tmp_path: Path) -> None:
    """--version prints the package version."""
    outcome = run_cli(["--version"], how=how, home=tmp_path)
    assert outcome.code == 0 and __version__ in outcome.stdout
