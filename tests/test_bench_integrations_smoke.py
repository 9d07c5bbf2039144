"""The integrations benchmark runs end to end on a small history (not timed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._frameworks import missing

ROOT = Path(__file__).resolve().parents[1]


def test_quick_run_gives_one_row_per_framework(monkeypatch: pytest.MonkeyPatch) -> None:
    """run(quick=True) times each framework with and without ctxfold on a 100-item history."""
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import bench_integrations

    result = bench_integrations.run(quick=True)
    installed = [
        name
        for name, module in (
            ("openai-agents", "agents"),
            ("langchain", "langchain"),
            ("pydantic-ai", "pydantic_ai"),
        )
        if missing(module) is None
    ]
    assert [row[0] for row in result["rows"]] == installed
    # A framework left out is said so, with the reason ctxfold's import gave.
    left = [note for note in result["notes"] if note.startswith("Left out: ")]
    assert len(left) == 3 - len(installed)
    for row in result["rows"]:
        assert len(row) == len(result["columns"])
        assert row[1] == bench_integrations.QUICK_SIZES[0]
        assert row[2] > 0 and row[4] > 0
    assert result["notes"]
