"""The integrations benchmark runs end to end on a small history (not timed)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_quick_run_gives_one_row_per_framework(monkeypatch: pytest.MonkeyPatch) -> None:
    """run(quick=True) times each framework with and without ctxfold on a 100-item history."""
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import bench_integrations

    result = bench_integrations.run(quick=True)
    assert [row[0] for row in result["rows"]] == ["openai-agents", "langchain", "pydantic-ai"]
    for row in result["rows"]:
        assert len(row) == len(result["columns"])
        assert row[1] == bench_integrations.QUICK_SIZES[0]
        assert row[2] > 0 and row[4] > 0
    assert result["notes"]
