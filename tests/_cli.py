"""Running the ``ctxfold`` command in tests: in-process through click's runner, or as a real
subprocess (``python -m ctxfold``), with the database and data folder kept inside the test."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from ctxfold.cli import cli

WAYS = ["runner", "subprocess"]


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str


def isolated_env(home: Path) -> dict[str, str]:
    """Environment for one test: its own data folder, no database URL from the outside."""
    return {"XDG_DATA_HOME": str(home / "xdg"), "HOME": str(home)}


def run_cli(args: list[str], *, how: str, home: Path, env: dict[str, str] | None = None) -> Outcome:
    """Run ``ctxfold ARGS`` one of two ways and return exit status, stdout and stderr."""
    extra = {**isolated_env(home), **(env or {})}
    if how == "runner":
        try:
            runner = CliRunner(mix_stderr=False)  # type: ignore[call-arg]  # click 8.1
        except TypeError:
            runner = CliRunner()  # click >= 8.2 keeps stderr apart already
        # CTXFOLD_DATABASE_URL is removed (None) unless the test sets it.
        result = runner.invoke(cli, args, env={"CTXFOLD_DATABASE_URL": None, **extra})
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return Outcome(result.exit_code, result.stdout, result.stderr)
    environ = {k: v for k, v in os.environ.items() if k != "CTXFOLD_DATABASE_URL"}
    environ.update(extra)
    done = subprocess.run(
        [sys.executable, "-m", "ctxfold", *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=300,
        check=False,
    )
    return Outcome(done.returncode, done.stdout, done.stderr)
