"""Bad input to any command: exit status 2, one sentence on stderr naming the line or value, no
traceback, and no output file (or session) left behind."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from _cli import WAYS, run_cli
from ctxfold.demo_session import generate
from ctxfold.messages import write_jsonl


def _write(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _good(d: Path) -> Path:
    path = d / "good.jsonl"
    write_jsonl(path, generate(seed=0, steps=12))
    return path


def _malformed(d: Path) -> Path:
    path = d / "malformed.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": \n')
    return path


def _unknown_role(d: Path) -> Path:
    return _write(d / "role.jsonl", [{"role": "user", "content": "hi"}, {"role": "robot"}])


def _pinned(d: Path) -> Path:
    rules = " ".join(f"rule {i}: never touch migrations/{i:04d}.sql" for i in range(2500))
    rows = [
        {"role": "system", "content": rules},
        {"role": "user", "content": "tidy the repo"},
        {"role": "assistant", "content": "done"},
    ]
    return _write(d / "pinned.jsonl", rows)


# (name, args built from the input folder and the output folder, what the message must name)
Case = tuple[str, Callable[[Path, Path], list[str]], list[str]]
CASES: list[Case] = [
    ("malformed-line", lambda i, o: ["compact", str(_malformed(i)), "--window", "8000",
                                     "-o", str(o / "out.jsonl")], ["line 2", "not valid JSON"]),
    ("unknown-role", lambda i, o: ["validate", str(_unknown_role(i))], ["line 2", "'robot'"]),
    ("unknown-role-replay", lambda i, o: ["replay", str(_unknown_role(i)), "--window", "8000",
                                          "--report", str(o / "r.html")], ["line 2", "'robot'"]),
    ("missing-file", lambda i, o: ["replay", str(i / "nope.jsonl"), "--window", "8000"],
     ["nope.jsonl", "does not exist"]),
    ("missing-file-import", lambda i, o: ["import", str(i / "nope.jsonl"), "--session", "s"],
     ["nope.jsonl", "does not exist"]),
    ("pinned-over-window", lambda i, o: ["compact", str(_pinned(i)), "--window", "8000",
                                         "-o", str(o / "out.jsonl")], ["8,000-token window"]),
    ("pinned-over-window-replay", lambda i, o: ["replay", str(_pinned(i)), "--window", "8000",
                                                "--report", str(o / "r.html")], ["8,000"]),
    ("target-not-a-number", lambda i, o: ["compact", str(_good(i)), "--window", "8000",
                                          "--target", "lots", "-o", str(o / "out.jsonl")],
     ["--target", "'lots'"]),
    ("target-fraction-of-a-token", lambda i, o: ["compact", str(_good(i)), "--window", "8000",
                                                 "--target", "1.5", "-o", str(o / "o.jsonl")],
     ["--target", "'1.5'"]),
    ("target-above-trigger", lambda i, o: ["compact", str(_good(i)), "--window", "8000",
                                           "--target", "0.95", "-o", str(o / "o.jsonl")],
     ["--target 0.95", "trigger"]),
    ("window-zero", lambda i, o: ["compact", str(_good(i)), "--window", "0",
                                  "-o", str(o / "out.jsonl")], ["--window", "0"]),
    ("no-window", lambda i, o: ["compact", str(_good(i)), "-o", str(o / "out.jsonl")],
     ["--window", "--model"]),
    ("unknown-model", lambda i, o: ["compact", str(_good(i)), "--model", "gpt-nope",
                                    "-o", str(o / "out.jsonl")], ["'gpt-nope'"]),
    ("unknown-summarizer", lambda i, o: ["compact", str(_good(i)), "--window", "8000",
                                         "--summarizer", "magic", "-o", str(o / "out.jsonl")],
     ["'magic'"]),
    ("output-folder-missing", lambda i, o: ["compact", str(_good(i)), "--window", "8000",
                                            "-o", str(o / "no" / "out.jsonl")], ["does not exist"]),
    ("repair-without-output", lambda i, o: ["validate", str(_good(i)), "--repair"], ["-o"]),
    ("bad-database-url", lambda i, o: ["sessions", "list", "-d", "mysql://x"], ["'mysql://x'"]),
]  # fmt: skip


@pytest.mark.parametrize("how", WAYS)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(
    case: Case,
    how: str,
    tmp_path: Path,
) -> None:
    """Each bad input gets exit status 2 and one line on stderr that names the line or value;
    nothing goes to stdout and no file is left in the output folder."""
    _, make_args, named = case
    inputs, outputs = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    outputs.mkdir()
    outcome = run_cli(make_args(inputs, outputs), how=how, home=tmp_path)
    assert outcome.code == 2, outcome
    lines = outcome.stderr.splitlines()
    assert len(lines) == 1, outcome.stderr
    assert lines[0].startswith("ctxfold: error: ")
    assert "Traceback" not in outcome.stderr
    for part in named:
        assert part in lines[0]
    assert outcome.stdout == ""
    assert list(outputs.iterdir()) == []


@pytest.mark.parametrize("how", WAYS)
def test_a_bad_import_creates_no_session(how: str, tmp_path: Path) -> None:
    """A transcript with a bad line is not half imported: the session does not exist afterwards."""
    db = f"sqlite:///{tmp_path / 'agent.db'}"
    bad = _unknown_role(tmp_path)
    outcome = run_cli(["import", str(bad), "--session", "s1", "-d", db], how=how, home=tmp_path)
    assert outcome.code == 2 and "line 2" in outcome.stderr
    listed = run_cli(["sessions", "list", "-d", db], how=how, home=tmp_path)
    assert listed.code == 0 and "s1" not in listed.stdout
