"""The README's Python examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)


def test_readme_has_a_python_example() -> None:
    """The README shows at least one Python example (and the tests below run it)."""
    assert python_blocks()


@pytest.mark.parametrize("block", python_blocks())
def test_readme_python_block_runs(
    block: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each Python block in the README runs without error (its own asserts included) in a
    fresh namespace and an empty working directory."""
    monkeypatch.chdir(tmp_path)
    exec(compile(block, str(README), "exec"), {"__name__": "__readme__"})


def test_readme_shows_the_two_commands() -> None:
    """The front door names `make demo` and `make test`."""
    text = README.read_text(encoding="utf-8")
    assert "make demo" in text and "make test" in text
