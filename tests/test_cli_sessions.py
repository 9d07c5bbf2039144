"""``ctxfold sessions [list|show|log|export|import]`` against a database."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _cli import WAYS, run_cli
from ctxfold import __version__
from ctxfold.cli import cli
from ctxfold.messages import read_jsonl, write_jsonl
from ctxfold.storage import SQLiteStore
from ctxfold.testing.transcripts import generate


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
    args = ["sessions", "import", str(transcript), "--session", "run-1", "-d", db]
    imported = run_cli(args, how=how, home=tmp_path)
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
    run_cli(
        ["sessions", "import", str(transcript), "--session", "s", "-d", db],
        how="runner",
        home=tmp_path,
    )
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
    run_cli(
        ["sessions", "import", str(transcript), "--session", "from-env"],
        how=how,
        home=tmp_path,
        env=env,
    )
    assert (tmp_path / "env.db").is_file()
    listed = run_cli(["sessions", "list", "-d", url], how=how, home=tmp_path)
    assert listed.stdout.startswith("from-env\t")
    run_cli(["sessions", "import", str(transcript), "--session", "default"], how=how, home=tmp_path)
    assert (tmp_path / "xdg" / "ctxfold" / "ctxfold.db").is_file()
    listed = run_cli(["sessions", "list"], how=how, home=tmp_path)
    assert listed.stdout.startswith("default\t")


def test_importing_into_an_existing_session_is_refused(transcript: Path, tmp_path: Path) -> None:
    """A second import under the same id would mix two runs; it exits 2 and names the session."""
    db = f"sqlite:///{tmp_path / 'agent.db'}"
    args = ["sessions", "import", str(transcript), "--session", "s", "-d", db]
    assert run_cli(args, how="runner", home=tmp_path).code == 0
    again = run_cli(args, how="runner", home=tmp_path)
    assert again.code == 2 and "'s' already has" in again.stderr


@pytest.mark.parametrize("command", ["show", "log", "export"])
def test_an_unknown_session_is_a_clear_error(command: str, tmp_path: Path) -> None:
    """Asking for a session that is not there exits 2 and names it."""
    SQLiteStore(tmp_path / "agent.db").close()
    db = f"sqlite:///{tmp_path / 'agent.db'}"
    outcome = run_cli(["sessions", command, "nope", "-d", db], how="runner", home=tmp_path)
    assert outcome.code == 2 and "'nope'" in outcome.stderr


READERS = [["list"], ["show", "s"], ["log", "s"], ["export", "s"], ["recall", "s", "error"]]


@pytest.mark.parametrize("how", WAYS)
@pytest.mark.parametrize("command", READERS, ids=lambda c: c[0])
def test_a_reader_given_a_missing_database_says_so_and_makes_none(
    how: str, command: list[str], tmp_path: Path
) -> None:
    """A command that only reads, given a SQLite path where there is no database (a typo, say),
    exits 2 naming the path, and leaves no new file or folder behind: it does not answer from a
    new empty database it just made."""
    missing = tmp_path / "no-such-folder" / "agnet.db"
    outcome = run_cli(["sessions", *command, "-d", f"sqlite:///{missing}"], how=how,
                      home=tmp_path)  # fmt: skip
    assert outcome.code == 2
    assert f"no SQLite database at '{missing}'" in outcome.stderr
    assert not missing.parent.exists()


def test_a_failure_of_the_embedded_database_is_not_called_nothing_stored(
    transcript: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the embedded database is there but cannot be opened (a full disk, say), a reader
    reports that failure as the store gave it, not as "no sessions stored yet"."""
    import ctxfold.storage.url
    from ctxfold.errors import StoreUnavailableError

    import_args = ["sessions", "import", str(transcript), "--session", "s"]
    assert run_cli(import_args, how="runner", home=tmp_path).code == 0

    def full(*args: object, **kwargs: object) -> None:
        raise StoreUnavailableError("the SQLite database failed: database or disk is full")

    monkeypatch.setattr(ctxfold.storage.url, "SQLiteStore", full)
    outcome = run_cli(["sessions", "list"], how="runner", home=tmp_path)
    assert outcome.code == 2 and "database or disk is full" in outcome.stderr
    assert "no sessions stored yet" not in outcome.stderr


@pytest.mark.parametrize("command", READERS, ids=lambda c: c[0])
def test_a_reader_before_anything_was_stored_says_so(command: list[str], tmp_path: Path) -> None:
    """With no store named and the embedded database not made yet, a reader says that nothing
    was stored yet and how to name a store, and makes no data folder."""
    outcome = run_cli(["sessions", *command], how="runner", home=tmp_path)
    assert outcome.code == 2
    assert "no sessions stored yet" in outcome.stderr and "-d URL" in outcome.stderr
    assert not (tmp_path / "xdg").exists() and not (tmp_path / ".local").exists()


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


@pytest.mark.parametrize("how", WAYS)
def test_sessions_alone_lists_and_takes_the_database_option(
    how: str, transcript: Path, tmp_path: Path
) -> None:
    """``ctxfold sessions`` with no subcommand lists, like ``sessions list``; -d works on the group
    and is inherited by a subcommand given after it."""
    db = f"sqlite:///{tmp_path / 'agent.db'}"
    run_cli(["sessions", "import", str(transcript), "--session", "a", "-d", db], how=how,
            home=tmp_path)  # fmt: skip
    bare = run_cli(["sessions", "-d", db], how=how, home=tmp_path)
    listed = run_cli(["sessions", "list", "-d", db], how=how, home=tmp_path)
    assert bare.code == 0 and bare.stdout == listed.stdout and bare.stdout.startswith("a\t")
    inherited = run_cli(["sessions", "-d", db, "show", "a"], how=how, home=tmp_path)
    assert inherited.code == 0 and len(inherited.stdout.splitlines()) > 1


def test_json_output_of_every_sessions_command(transcript: Path, tmp_path: Path) -> None:
    """--json gives one JSON object for import, list, show and log, with the documented keys and
    figures that agree with each other."""
    db = f"sqlite:///{tmp_path / 'agent.db'}"
    messages = read_jsonl(transcript)

    def run(*args: str) -> dict[str, object]:
        outcome = run_cli([*args, "-d", db, "--json"], how="runner", home=tmp_path)
        assert outcome.code == 0, outcome.stderr
        data = json.loads(outcome.stdout)
        assert isinstance(data, dict)
        return data

    imported = run("sessions", "import", str(transcript), "--session", "run-1")
    assert imported == {"input": str(transcript), "session": "run-1",
                        "messages": len(messages), "first_seq": 1,
                        "last_seq": len(messages), "repaired": 0}  # fmt: skip
    assert run("sessions", "list") == {"sessions": [{"id": "run-1", "events": len(messages)}]}
    assert run("sessions") == run("sessions", "list")
    shown = run("sessions", "show", "run-1")
    assert shown["session"] == "run-1"
    assert shown["messages"] == [m.to_dict() for m in messages]
    logged = run("sessions", "log", "run-1")
    events = logged["events"]
    assert isinstance(events, list) and [e["seq"] for e in events] == list(
        range(1, len(messages) + 1)
    )
    assert {e["type"] for e in events} == {"message"}
    assert set(events[0]) == {"seq", "type", "data", "created_at"}


def test_the_old_import_command_points_to_the_new_one(transcript: Path, tmp_path: Path) -> None:
    """``ctxfold import`` moved under ``sessions``; the old spelling says where, with exit 2."""
    outcome = run_cli(["import", str(transcript), "--session", "s"], how="runner", home=tmp_path)
    assert outcome.code == 2
    assert "'ctxfold import' is now 'ctxfold sessions import'" in outcome.stderr
