"""``ctxfold sessions recall`` and ``ctxfold sessions watch`` against a real database."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _cli import WAYS, isolated_env, run_cli
from ctxfold.events import Compaction, NewEvent
from ctxfold.messages import Message, ToolCall
from ctxfold.storage import SQLiteStore


def seeded(path: Path) -> str:
    """A SQLite database whose session "run" has seqs 2-5 under a summary (seq 7)."""
    with SQLiteStore(path) as store:
        session = store.session("run")
        session.append(
            [
                Message("system", "You fix bugs."),
                Message("user", "Deploys to eu-west-3 fail with KeyError: region_map"),
                Message("assistant", None, (ToolCall("c1", "bash", '{"cmd": "cat r.py"}'),)),
                Message("tool", "REGIONS = {'eu-west-1': 1}", tool_call_id="c1"),
                Message("assistant", "Added eu-west-3 to r.py."),
                Message("user", "Now update the changelog."),
            ]
        )
        session.append(NewEvent.of(Compaction(2, 5, Message("user", "[summary of 2-5]"))))
    return f"sqlite:///{path}"


@pytest.mark.parametrize("how", WAYS)
def test_recall_by_query_and_by_ref(how: str, tmp_path: Path) -> None:
    """A query (several words are one query) and a --ref print the framed originals."""
    db = seeded(tmp_path / "agent.db")
    found = run_cli(["sessions", "recall", "run", "KeyError:", "region_map", "-d", db], how=how,
                    home=tmp_path)  # fmt: skip
    assert found.code == 0, found.stderr
    assert found.stdout.startswith('[ctxfold: recall of query "KeyError: region_map": 1 original')
    assert "  Deploys to eu-west-3 fail with KeyError: region_map" in found.stdout
    by_ref = run_cli(["sessions", "recall", "run", "--ref", "log items 2–5", "-d", db], how=how,
                     home=tmp_path)  # fmt: skip
    assert by_ref.code == 0 and "4 original messages" in by_ref.stdout


def test_recall_as_json(tmp_path: Path) -> None:
    """--json gives the seqs, the messages and the text, bounded by --max-tokens."""
    db = seeded(tmp_path / "agent.db")
    done = run_cli(["sessions", "recall", "run", "--ref", "2-5", "--max-tokens", "5000", "--json",
                    "-d", db], how="runner", home=tmp_path)  # fmt: skip
    data = json.loads(done.stdout)
    assert data["seqs"] == [2, 3, 4, 5] and data["ref"] == "2-5" and data["query"] is None
    assert [m["seq"] for m in data["messages"]] == [2, 3, 4, 5]
    assert data["messages"][2]["message"]["tool_call_id"] == "c1"
    assert data["tokens"] <= 5000 and data["text"].startswith("[ctxfold: recall of ref")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["run"], "needs a query"),
        (["run", "x", "--ref", "2-5"], "not both"),
        (["run", "x", "--max-tokens", "0"], "--max-tokens"),
        (["run", "--ref", "c99"], "'c99'"),
        (["nobody", "x"], "no session 'nobody'"),
    ],
)
def test_bad_recall_input_is_one_line_and_status_2(
    args: list[str], says: str, tmp_path: Path
) -> None:
    """No query or ref, both, a bad bound, an unknown ref or session: one error line, exit 2."""
    db = seeded(tmp_path / "agent.db")
    done = run_cli(["sessions", "recall", *args, "-d", db], how="runner", home=tmp_path)
    assert done.code == 2 and done.stdout == ""
    assert done.stderr.startswith("ctxfold: error: ") and says in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("how", WAYS)
def test_watch_prints_the_log_then_stops_when_idle(how: str, tmp_path: Path) -> None:
    """With --idle-timeout, watch prints each event as `sessions log` does, then exits 0."""
    db = seeded(tmp_path / "agent.db")
    logged = run_cli(["sessions", "log", "run", "-d", db], how=how, home=tmp_path)
    watched = run_cli(["sessions", "watch", "run", "--idle-timeout", "0.3", "-d", db], how=how,
                      home=tmp_path)  # fmt: skip
    assert watched.code == 0, watched.stderr
    assert watched.stdout == logged.stdout
    after = run_cli(["sessions", "watch", "run", "--after", "5", "--idle-timeout", "0.2", "-d", db],
                    how=how, home=tmp_path)  # fmt: skip
    assert after.stdout.splitlines() == logged.stdout.splitlines()[5:]


def test_watch_json_prints_one_event_object_a_line_as_log_json_does(tmp_path: Path) -> None:
    """`watch --json` is JSON Lines: one object per event, the objects `log --json` lists."""
    db = seeded(tmp_path / "agent.db")
    logged = run_cli(["sessions", "log", "run", "--json", "-d", db], how="runner", home=tmp_path)
    watched = run_cli(
        ["sessions", "watch", "run", "--json", "--idle-timeout", "0.3", "-d", db],
        how="runner",
        home=tmp_path,
    )
    assert watched.code == 0, watched.stderr
    lines = [json.loads(line) for line in watched.stdout.splitlines()]
    assert lines == json.loads(logged.stdout)["events"]


def test_watch_follows_new_events_until_ctrl_c(tmp_path: Path) -> None:
    """A watch running in its own process prints events another process appends, as they land,
    and Ctrl-C ends it with status 0 and no traceback."""
    path = tmp_path / "agent.db"
    db = seeded(path)
    environ = {k: v for k, v in os.environ.items() if k != "CTXFOLD_DATABASE_URL"}
    environ.update(isolated_env(tmp_path))
    watch = subprocess.Popen(
        [sys.executable, "-m", "ctxfold", "sessions", "watch", "run", "--after", "7", "-d", db],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environ,
    )
    try:
        with SQLiteStore(path) as store:
            session = store.session("run")
            lines = []
            for n in range(3):
                session.append(Message("assistant", f"live message {n}"))
                assert watch.stdout is not None
                lines.append(watch.stdout.readline())  # blocks until the watch prints it
        assert [line.split()[0] for line in lines] == ["8", "9", "10"]
        assert "live message 2" in lines[2]
    finally:
        time.sleep(0.1)
        watch.send_signal(signal.SIGINT)
        _, err = watch.communicate(timeout=30)
    assert watch.returncode == 0, err
    assert "Traceback" not in err


def test_watch_waits_for_a_missing_sqlite_file_and_makes_none(tmp_path: Path) -> None:
    """A mistyped path is not turned into an empty database: the watch says which file it waits
    for, makes no file or folder, and --idle-timeout ends the wait with status 0."""
    missing = tmp_path / "typo" / "agnet.db"
    done = run_cli(["sessions", "watch", "run", "--idle-timeout", "0.3", "-d", f"sqlite:///{missing}"],
                   how="runner", home=tmp_path)  # fmt: skip
    assert done.code == 0, done.stderr
    assert f"waiting for {missing}: no database there yet" in done.stderr
    assert done.stdout == ""
    assert not missing.parent.exists()


def test_watch_started_before_the_first_write_follows_the_session(tmp_path: Path) -> None:
    """Started before any writer made the database, the watch follows the session once an agent
    in another process makes the file and appends."""
    path = tmp_path / "later" / "agent.db"
    environ = {k: v for k, v in os.environ.items() if k != "CTXFOLD_DATABASE_URL"}
    environ.update(isolated_env(tmp_path))
    watch = subprocess.Popen(
        [sys.executable, "-m", "ctxfold", "sessions", "watch", "run", "-d", f"sqlite:///{path}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environ,
    )
    try:
        assert watch.stderr is not None and watch.stdout is not None
        assert "no database there yet" in watch.stderr.readline()  # it waits, having made none
        assert not path.parent.exists()
        with SQLiteStore(path) as store:
            store.session("run").append(Message("user", "first words"))
            line = watch.stdout.readline()  # blocks until the watch prints it
        assert line.split()[:2] == ["1", "message"] and "first words" in line
    finally:
        watch.send_signal(signal.SIGINT)
        _, err = watch.communicate(timeout=30)
    assert watch.returncode == 0, err
    assert "Traceback" not in err
