"""The benchmark runner and the token benchmark work end to end on small sizes (not timed)."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The benchmarks package, importable however pytest was started."""
    monkeypatch.syspath_prepend(str(ROOT))
    import benchmarks.__main__ as runner

    return runner


def test_token_benchmark_returns_the_agreed_shape(bench: ModuleType) -> None:
    """run(quick=True) gives a title, columns, notes, and one full row per counter and size,
    with the Tally cheaper than a recount of the history."""
    from benchmarks import bench_tokens

    result = bench_tokens.run(quick=True)
    assert isinstance(result["title"], str) and result["title"]
    assert result["notes"]
    assert result["rows"]
    sizes = {row[1] for row in result["rows"]}
    assert sizes == set(bench_tokens.QUICK_SIZES)
    for row in result["rows"]:
        assert len(row) == len(result["columns"])
        tally_us, recount_us = row[2], row[3]
        assert 0 < tally_us < recount_us


def test_runner_writes_json_and_markdown(bench: ModuleType, tmp_path: Path) -> None:
    """`python -m benchmarks tokens --quick --out DIR` writes <topic>.json and a markdown table."""
    assert "tokens" in bench.topics()
    assert bench.main(["tokens", "--quick", "--out", str(tmp_path)]) == 0
    record = json.loads((tmp_path / "tokens.json").read_text(encoding="utf-8"))
    assert record["columns"][0] == "counter"
    table = (tmp_path / "tokens.md").read_text(encoding="utf-8")
    assert table.startswith("## ") and "| counter |" in table


def test_runner_refuses_an_unknown_topic(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown topic exits with status 2 and lists the topics there are."""
    assert bench.main(["no-such-topic", "--quick"]) == 2
    assert "tokens" in capsys.readouterr().err


def test_quick_run_without_out_writes_nothing(bench: ModuleType, tmp_path: Path) -> None:
    """A quick run only prints, so committed full results are never overwritten by it."""
    before = {p: p.stat().st_mtime_ns for p in bench.RESULTS.glob("*")}
    assert bench.main(["tokens", "--quick"]) == 0
    after = {p: p.stat().st_mtime_ns for p in bench.RESULTS.glob("*")}
    assert before == after
