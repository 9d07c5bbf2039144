"""What the commands do with the files they write, and the edges of their command lines."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from _cli import isolated_env, run_cli
from ctxfold._files import write_text_atomic
from ctxfold.errors import InvalidInputError
from ctxfold.messages import Message, write_jsonl
from ctxfold.session import Session
from ctxfold.storage import SQLiteStore
from ctxfold.testing.transcripts import generate

ROOT = os.geteuid() == 0


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    path = tmp_path / "run.jsonl"
    write_jsonl(path, generate(seed=0, steps=12))
    return path


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def compact_to(transcript: Path, output: str | Path, window: int = 8000) -> list[str]:
    return ["compact", str(transcript), "--window", str(window), "-o", str(output)]


def temporary_files(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def seeded(path: Path, *ids: str) -> str:
    with SQLiteStore(path) as store:
        for session_id in ids:
            store.session(session_id).append(
                [Message("user", "Fix the build."), Message("assistant", "Fixed.")]
            )
    return f"sqlite:///{path}"


def test_an_output_through_a_symlink_updates_the_file_it_points_to(
    transcript: Path, tmp_path: Path
) -> None:
    """Writing through a symbolic link replaces the file it names, and the link stays a link."""
    real = tmp_path / "kept" / "real.jsonl"
    real.parent.mkdir()
    real.write_text("old\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    done = run_cli(compact_to(transcript, link), how="runner", home=tmp_path)
    assert done.code == 0, done.stderr
    assert link.is_symlink() and link.resolve() == real
    assert real.read_text().startswith('{"role": "system"')
    assert temporary_files(tmp_path) == temporary_files(real.parent) == []


def test_an_output_fifo_is_written_into_and_stays_a_fifo(transcript: Path, tmp_path: Path) -> None:
    """A FIFO given as the output gets the history through it and is still a FIFO afterwards."""
    fifo = tmp_path / "history.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    done = run_cli(compact_to(transcript, fifo), how="runner", home=tmp_path)
    reader.join()
    assert done.code == 0, done.stderr
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert received[0].startswith(b'{"role": "system"')


@pytest.mark.skipif(not ROOT, reason="making a device file needs root")
def test_a_device_output_is_written_and_stays_a_device(transcript: Path, tmp_path: Path) -> None:
    """A character device given as the output (a null device made in the test's folder) is
    written to, not replaced by a regular file."""
    device = tmp_path / "null"
    os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    done = run_cli(compact_to(transcript, device), how="runner", home=tmp_path)
    assert done.code == 0, done.stderr
    assert stat.S_ISCHR(device.stat().st_mode)
    assert temporary_files(tmp_path) == []


def test_an_output_to_a_descriptor_path_goes_down_the_pipe(
    transcript: Path, tmp_path: Path
) -> None:
    """``-o /dev/fd/N`` (what a shell's ``>(...)`` passes) writes into that pipe."""
    if not Path("/dev/fd").is_dir():
        pytest.skip("no /dev/fd on this system")
    read_end, write_end = os.pipe()
    environ = {**os.environ, **isolated_env(tmp_path)}
    args = [sys.executable, "-m", "ctxfold", *compact_to(transcript, f"/dev/fd/{write_end}")]
    with subprocess.Popen(
        args, pass_fds=[write_end], env=environ, stdout=subprocess.DEVNULL
    ) as run:
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            received = pipe.read()
    assert run.returncode == 0
    assert received.startswith(b'{"role": "system"')


def test_a_new_output_file_gets_the_mode_the_umask_allows(
    transcript: Path, tmp_path: Path, umask_022: None
) -> None:
    """A file the command creates is 0644 under a 022 umask, as any tool would make it."""
    out = tmp_path / "new.jsonl"
    assert run_cli(compact_to(transcript, out), how="runner", home=tmp_path).code == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o644


def test_a_replaced_output_file_keeps_its_mode(transcript: Path, tmp_path: Path) -> None:
    """Writing over an existing 0664 file leaves it 0664, with the new content."""
    out = tmp_path / "shared.jsonl"
    out.write_text("old\n")
    out.chmod(0o664)
    assert run_cli(compact_to(transcript, out), how="runner", home=tmp_path).code == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o664
    assert out.read_text() != "old\n"


def _unwritable(folder: Path) -> tuple[list[str], str]:
    folder.mkdir()
    folder.chmod(0o555)
    # Root writes anywhere: drop its capabilities for this one run, as for any other user.
    prefix = ["setpriv", "--inh-caps=-all", "--bounding-set=-all"] if ROOT else []
    return prefix, str(folder / "out.jsonl")


@pytest.mark.parametrize("where", ["read-only folder", "/proc"])
def test_a_write_error_names_the_path_given_not_a_temporary_file(
    where: str, transcript: Path, tmp_path: Path
) -> None:
    """An output that cannot be written fails with exit 2 and one line naming the path the
    user gave; no temporary file is named or left."""
    if where == "/proc":
        if not Path("/proc/self").is_dir():
            pytest.skip("no /proc on this system")
        prefix, target = [], "/proc/ctxfold-test.jsonl"
    else:
        prefix, target = _unwritable(tmp_path / "locked")
    environ = {**os.environ, **isolated_env(tmp_path)}
    done = subprocess.run(
        [*prefix, sys.executable, "-m", "ctxfold", *compact_to(transcript, target)],
        capture_output=True,
        text=True,
        env=environ,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"ctxfold: error: cannot write {target}: ")
    assert ".tmp" not in done.stderr and len(done.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    "args",
    [
        ["compact", "{t}", "--window", "8000", "-o", ""],
        ["validate", "{t}", "--repair", "-o", ""],
        ["sessions", "export", "s", "-o", ""],
        ["demo", "--out", ""],
    ],
    ids=["compact", "validate", "export", "demo"],
)
def test_an_empty_output_path_is_refused(args: list[str], transcript: Path, tmp_path: Path) -> None:
    """An empty output path is a usage error naming the option, and nothing is written."""
    db = seeded(tmp_path / "agent.db", "s")
    before = sorted(p.name for p in tmp_path.iterdir())
    args = [a.replace("{t}", str(transcript)) for a in args] + (
        ["-d", db] if "export" in args else []
    )
    done = run_cli(args, how="runner", home=tmp_path)
    assert done.code == 2 and done.stdout == ""
    assert "names no" in done.stderr and ("'-o'" in done.stderr or "'--out'" in done.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    with pytest.raises(InvalidInputError, match="empty path"):
        write_text_atomic("", "text")


_STALLED_WRITE = """
import os, sys, time
def stall(fd):
    sys.stderr.write("writing\\n")
    sys.stderr.flush()
    time.sleep(300)
os.fsync = stall
from ctxfold.cli import main
sys.argv = ["ctxfold", *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize(
    ("signum", "status", "says"),
    [
        (signal.SIGTERM, 143, "ctxfold: error: terminated\n"),
        # After Ctrl-C, a blank line first closes the "^C" the terminal echoed.
        (signal.SIGINT, 130, "\nctxfold: error: interrupted\n"),
    ],
    ids=["SIGTERM", "SIGINT"],
)
def test_a_signal_during_a_write_leaves_no_temporary_file(
    signum: int, status: int, says: str, transcript: Path, tmp_path: Path
) -> None:
    """SIGTERM (like Ctrl-C) in the middle of writing the output ends the command with one
    line, exit status 128+signal, the old file untouched, and no temporary file left."""
    out = tmp_path / "out" / "c.jsonl"
    out.parent.mkdir()
    out.write_text("old\n")
    environ = {**os.environ, **isolated_env(tmp_path)}
    args = [sys.executable, "-c", textwrap.dedent(_STALLED_WRITE)]
    with subprocess.Popen(
        [*args, *compact_to(transcript, out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=environ,
    ) as run:
        assert run.stderr is not None
        assert run.stderr.readline() == "writing\n"  # the temporary file exists now
        assert temporary_files(out.parent) != []
        run.send_signal(signum)
        rest = run.stderr.read()
    assert run.returncode == status
    assert rest == says
    assert out.read_text() == "old\n" and temporary_files(out.parent) == []


@pytest.mark.parametrize("spelling", ["same path", "symlink", "other spelling"])
def test_compact_refuses_to_write_over_its_input(
    spelling: str, transcript: Path, tmp_path: Path
) -> None:
    """``compact X -o X`` (or a link to X, or another way of writing X) is a usage error, and X
    is left as it was."""
    before = transcript.read_bytes()
    if spelling == "symlink":
        output: str | Path = tmp_path / "alias.jsonl"
        Path(output).symlink_to(transcript)
    elif spelling == "other spelling":
        output = f"{tmp_path}/./{transcript.name}"
    else:
        output = transcript
    done = run_cli(compact_to(transcript, output), how="runner", home=tmp_path)
    assert done.code == 2 and done.stdout == ""
    assert "is the input transcript" in done.stderr and "'-o'" in done.stderr
    assert transcript.read_bytes() == before


def test_replay_refuses_to_write_its_page_over_its_input(transcript: Path, tmp_path: Path) -> None:
    """``replay X --html X`` is a usage error, and X is left as it was (it became the HTML page,
    which then no longer read as a transcript); an empty --html names no file."""
    before = transcript.read_bytes()
    done = run_cli(["replay", str(transcript), "--window", "8000", "--html", str(transcript)],
                   how="runner", home=tmp_path)  # fmt: skip
    assert done.code == 2 and "is the input transcript" in done.stderr and "--html" in done.stderr
    assert transcript.read_bytes() == before
    empty = run_cli(["replay", str(transcript), "--window", "8000", "--html", ""],
                    how="runner", home=tmp_path)  # fmt: skip
    assert empty.code == 2 and "names no file" in empty.stderr


@pytest.mark.parametrize("command", ["export", "validate"])
def test_a_dash_output_goes_to_stdout(command: str, transcript: Path, tmp_path: Path) -> None:
    """``-o -`` writes the history to stdout for ``sessions export`` and ``validate --repair``
    too, and makes no file named '-'."""
    db = seeded(tmp_path / "agent.db", "s")
    if command == "export":
        args = ["sessions", "export", "s", "-o", "-", "-d", db]
    else:
        args = ["validate", str(transcript), "--repair", "-o", "-"]
    done = run_cli(args, how="runner", home=tmp_path)
    assert done.code == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines and all(json.loads(line)["role"] for line in lines)
    assert not (tmp_path / "-").exists() and not Path("-").exists()


def test_ctxfold_alone_prints_the_help_as_a_usage_error(tmp_path: Path) -> None:
    """``ctxfold`` with no command prints the formatted help on stderr, with exit status 2."""
    done = run_cli([], how="subprocess", home=tmp_path)
    assert done.code == 2 and done.stdout == ""
    assert done.stderr.startswith("Usage: ctxfold [OPTIONS] COMMAND")
    assert "\nCommands:\n" in done.stderr and "ctxfold: error" not in done.stderr


@pytest.mark.parametrize("url", ["memory://", "sqlite:///:memory:"])
def test_watching_a_store_in_memory_is_refused(url: str, tmp_path: Path) -> None:
    """A watch of a store no other process can write to is refused instead of waiting for ever."""
    # --idle-timeout only bounds a regression; the refusal comes before any wait.
    done = run_cli(
        ["sessions", "watch", "x", "--idle-timeout", "5", "-d", url], how="runner", home=tmp_path
    )
    assert done.code == 2 and done.stdout == ""
    assert done.stderr.startswith(f"ctxfold: error: cannot watch {url}: ")


@pytest.mark.parametrize("target", ["1", "7990"])
def test_a_target_error_names_the_flag_as_typed(
    target: str, transcript: Path, tmp_path: Path
) -> None:
    """A --target at or above the trigger point is echoed as typed, in command-line words."""
    args = [*compact_to(transcript, tmp_path / "o.jsonl"), "--target", target]
    done = run_cli(args, how="runner", home=tmp_path)
    assert done.code == 2
    assert f"--target {target} is " in done.stderr and "give a smaller --target" in done.stderr
    assert "target=" not in done.stderr and "1.0" not in done.stderr


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["recall", "s", "build", "--max-tokens", "0"], "--max-tokens"),
        (["watch", "s", "--idle-timeout", "nan"], "--idle-timeout"),
    ],
)
def test_a_bad_bound_names_its_flag(args: list[str], flag: str, tmp_path: Path) -> None:
    """A bad --max-tokens or --idle-timeout is refused naming the flag, not a Python argument."""
    db = seeded(tmp_path / "agent.db", "s")
    done = run_cli(["sessions", *args, "-d", db], how="runner", home=tmp_path)
    assert done.code == 2 and flag in done.stderr
    assert "max_tokens" not in done.stderr and "idle_timeout" not in done.stderr


@pytest.mark.parametrize(("value", "shown"), [("0", False), ("false", False), ("yes", True)])
def test_only_a_yes_value_turns_tracebacks_on(
    value: str, shown: bool, transcript: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CTXFOLD_TRACEBACK=0 or false keeps an unexpected error to one line; 1, true or yes shows
    the traceback."""
    import ctxfold.replay

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the planner lost its place")

    monkeypatch.setattr(ctxfold.replay, "compact_transcript", broken)
    args = compact_to(transcript, tmp_path / "o.jsonl")
    if shown:
        with pytest.raises(RuntimeError):
            run_cli(args, how="runner", home=tmp_path, env={"CTXFOLD_TRACEBACK": value})
        return
    done = run_cli(args, how="runner", home=tmp_path, env={"CTXFOLD_TRACEBACK": value})
    assert done.code == 1 and len(done.stderr.splitlines()) == 1


def test_a_sqlite_url_password_is_masked_in_errors(tmp_path: Path) -> None:
    """A password in a SQLite URL never shows in the error line."""
    done = run_cli(
        ["sessions", "-d", "sqlite://user:hunter2@host/x.db"], how="runner", home=tmp_path
    )
    assert done.code == 2
    assert "hunter2" not in done.stderr and "user:***@host" in done.stderr


def test_sessions_list_prints_each_id_on_one_line(tmp_path: Path) -> None:
    """Ids holding newlines or terminal escapes are listed escaped, one session per line, and
    as they are in --json."""
    ids = ["plain", "two\nlines", "red\x1b[31m"]
    db = seeded(tmp_path / "agent.db", *ids)
    text = run_cli(["sessions", "list", "-d", db], how="runner", home=tmp_path)
    assert sorted(line.split("\t")[0] for line in text.stdout.splitlines()) == sorted(
        ["plain", "two\\nlines", "red\\x1b[31m"]
    )
    listed = run_cli(["sessions", "list", "--json", "-d", db], how="runner", home=tmp_path)
    assert sorted(s["id"] for s in json.loads(listed.stdout)["sessions"]) == sorted(ids)


def test_a_compaction_that_ran_nothing_never_claims_to_fit(tmp_path: Path) -> None:
    """When no strategy could run and the result is over the target, the report says why
    instead of saying the transcript already fits."""
    path = tmp_path / "long-request.jsonl"
    request = " ".join(f"word{i}" for i in range(600))
    write_jsonl(path, [Message("system", "You are helpful."), Message("user", request)])
    done = run_cli(compact_to(path, tmp_path / "o.jsonl", window=2000), how="runner", home=tmp_path)
    assert done.code == 0, done.stderr
    assert "does NOT fit the target" in done.stdout
    assert "already fits" not in done.stdout and "must stay" in done.stdout


@pytest.mark.parametrize("landed", [False, True], ids=["mid-append", "after-append"])
def test_an_interrupted_import_says_what_it_left(
    landed: bool, transcript: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C during the append says the import is all or nothing and how to tell which; Ctrl-C
    once the store has confirmed it says that it was stored."""
    if landed:
        close = SQLiteStore.close

        def interrupted_close(self: SQLiteStore) -> None:
            close(self)
            raise KeyboardInterrupt

        monkeypatch.setattr(SQLiteStore, "close", interrupted_close)
    else:

        def interrupted_append(self: Session, *args: object, **kwargs: object) -> None:
            raise KeyboardInterrupt

        monkeypatch.setattr(Session, "append", interrupted_append)
    db = f"sqlite:///{tmp_path / 'agent.db'}"
    args = ["sessions", "import", str(transcript), "--session", "run 42", "-d", db]
    done = run_cli(args, how="runner", home=tmp_path)
    assert done.code == 130 and len(done.stderr.strip().splitlines()) == 1
    if landed:
        assert "after the import was stored" in done.stderr
    else:
        assert "all or nothing" in done.stderr
        assert "run ctxfold sessions show 'run 42' to tell which" in done.stderr
