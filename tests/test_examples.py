"""Every script in examples/ runs offline, as written, and shows the history being compacted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests._frameworks import EXAMPLE_FRAMEWORKS, missing

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("script", sorted(EXAMPLES.glob("*.py")), ids=lambda p: p.stem)
def test_example_runs_offline(script: Path, tmp_path: Path) -> None:
    """The script exits 0 in an empty working directory and reports what it compacted."""
    framework = EXAMPLE_FRAMEWORKS.get(script.stem)
    reason = missing(framework) if framework is not None else None
    if reason is not None:
        pytest.skip(reason)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "compaction" in done.stdout
