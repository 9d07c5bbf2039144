"""The replay benchmark runs end to end on a small selection and reports sane figures (not timed).

It replays the shared transcripts when present (a generated session otherwise), so it never
skips; `run(quick=True)` keeps it to one window and the two shortest transcripts.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    """The replay benchmark module, importable however pytest was started."""
    import sys

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from benchmarks import bench_replay

    return bench_replay


@pytest.fixture(scope="module")
def result(bench: ModuleType) -> dict[str, Any]:
    """One quick run, shared by the checks below."""
    outcome: dict[str, Any] = bench.run(quick=True)
    return outcome


def _column(result: dict[str, Any], name: str) -> list[Any]:
    index = result["columns"].index(name)
    return [row[index] for row in result["rows"]]


def test_quick_run_returns_the_agreed_shape(result: dict[str, Any]) -> None:
    """run(quick=True) gives a title, notes, and rows as wide as the columns, each set closed by
    a totals row, for both the default and the reference ladder."""
    assert isinstance(result["title"], str) and result["title"]
    assert result["notes"] and all(isinstance(n, str) for n in result["notes"])
    assert result["rows"]
    for row in result["rows"]:
        assert len(row) == len(result["columns"])
    names = _column(result, "transcript")
    assert str(names[-1]).startswith("all (")
    assert set(_column(result, "ladder")) == {"default", "reference"}


@pytest.mark.guarantee("under-target-no-op")
def test_no_request_of_the_replay_is_invalid(result: dict[str, Any]) -> None:
    """Every request the replayed agent would send passes the validity checker
    (`under-target-no-op`)."""
    assert _column(result, "invalid") == [0] * len(result["rows"])


def test_requests_stay_inside_the_window_and_reading_stays_under_the_bound(
    result: dict[str, Any], bench: ModuleType
) -> None:
    """No request is bigger than the window, a compacted run ends smaller than its history, and
    the summarizer reads less than 1.5x the history."""
    for row in result["rows"]:
        cells = dict(zip(result["columns"], row, strict=True))
        assert 0 < cells["peak tok"] <= cells["window"]
        if cells["compactions"]:
            assert cells["final tok"] < cells["history tok"]
        assert cells["tokens read"] < bench.READ_TARGET * cells["history tok"]
        assert cells["trigger"] < cells["window"] and cells["target"] < cells["trigger"]


def test_identifier_counts_add_up(result: dict[str, Any]) -> None:
    """Summarized and dropped identifiers are subsets of all identifiers; shares are percentages."""
    for row in result["rows"]:
        cells = dict(zip(result["columns"], row, strict=True))
        assert cells["ids summarized"] + cells["ids dropped"] <= cells["ids u/a"]
        for share in ("summarized kept %", "ids in final %", "cache reuse %"):
            value = cells[share]
            assert value == "—" or 0 <= value <= 100


def test_compacting_a_transcript_calls_the_summarizer_and_times_each_turn(
    bench: ModuleType,
) -> None:
    """A replay that must compact reports compactions, summarizer reading and turn times."""
    from ctxfold.testing.transcripts import generate
    from ctxfold.tokens import counter

    figures = bench.replay_one(
        "demo", generate(seed=3, steps=60), 8_000, "default", counter("auto")
    )
    assert figures.compactions > 0 and figures.calls > 0
    assert figures.read > 0 and figures.record > 0
    assert figures.invalid == 0
    assert len(figures.turn_ms) == figures.requests and min(figures.turn_ms) > 0
    assert figures.peak <= 8_000 < figures.history
