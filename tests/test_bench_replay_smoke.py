"""The replay benchmark runs end to end on a small selection, reports sane figures (not timed),
and counts exactly as ``ctxfold replay`` does, so its compaction counts are the CLI's.

It replays the shared transcripts when present (a generated session otherwise), so the shape
checks never skip; `run(quick=True)` keeps it to the two shortest transcripts and one
repetition. The agreement with the CLI is checked on every shared transcript at 8k and 16k.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests._cli import run_cli
from tests.conftest import transcript_params

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    """The replay benchmark module, importable however pytest was started."""
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


def _rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(zip(result["columns"], row, strict=True)) for row in result["rows"]]


def test_quick_run_returns_the_agreed_shape(result: dict[str, Any]) -> None:
    """run(quick=True) gives a title, notes, and rows as wide as the columns, each set closed by
    a totals row, for the default ladder, no compaction, and the reference ladder."""
    assert isinstance(result["title"], str) and result["title"]
    assert result["notes"] and all(isinstance(n, str) for n in result["notes"])
    assert result["rows"]
    for row in result["rows"]:
        assert len(row) == len(result["columns"])
    names = _column(result, "transcript")
    assert str(names[-1]).startswith("all (")
    assert set(_column(result, "ladder")) == {"default", "none", "reference"}
    assert {8_000, 16_000} <= set(_column(result, "window"))


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
    for cells in _rows(result):
        assert 0 < cells["peak tok"] <= cells["window"]
        if cells["compactions"]:
            assert cells["final tok"] < cells["history tok"]
        assert cells["tokens read"] < bench.READ_TARGET * cells["history tok"]
        assert cells["trigger"] < cells["window"] and cells["target"] < cells["trigger"]


def test_the_uncompacted_rows_never_compact(result: dict[str, Any]) -> None:
    """The 'none' ladder is the cost of replaying and counting alone: no compaction, no
    summarizer call, every identifier still in the final view."""
    for cells in _rows(result):
        if cells["ladder"] == "none":
            assert cells["compactions"] == 0 and cells["summarizer calls"] == 0
            assert cells["ids in final %"] in (100, 100.0, "—")


def test_speed_columns_are_ratios_of_their_own_medians(result: dict[str, Any]) -> None:
    """Every row has both tiktoken passes and a replay time, and each ratio column divides the
    replay by its own pass."""
    for cells in _rows(result):
        assert cells["tiktoken pass ms"] > 0 and cells["replay ms"] > 0
        assert cells["first tiktoken pass ms"] > 0
        assert cells["replay / tiktoken pass"] == pytest.approx(
            cells["replay ms"] / cells["tiktoken pass ms"], rel=0.06
        )
        assert cells["replay / first tiktoken pass"] == pytest.approx(
            cells["replay ms"] / cells["first tiktoken pass ms"], rel=0.06
        )


def test_identifier_counts_add_up(result: dict[str, Any]) -> None:
    """Summarized and dropped identifiers are subsets of all identifiers; shares are percentages."""
    for cells in _rows(result):
        assert cells["ids summarized"] + cells["ids dropped"] <= cells["ids u/a"]
        for share in ("summarized kept %", "ids in final %", "cache reuse %"):
            value = cells[share]
            assert value == "—" or 0 <= value <= 100


def test_compacting_a_transcript_calls_the_summarizer(bench: ModuleType) -> None:
    """A replay that must compact reports compactions, summarizer reading and what was sent."""
    from ctxfold.testing.transcripts import generate
    from ctxfold.tokens import counter

    figures = bench.replay_one(
        "demo", generate(seed=3, steps=60), 8_000, "default", counter("auto")
    )
    assert figures.compactions > 0 and figures.calls > 0
    assert figures.read > 0 and figures.record > 0
    assert figures.invalid == 0
    assert figures.peak <= 8_000 < figures.history


@pytest.mark.transcripts
@pytest.mark.parametrize("path", transcript_params())
@pytest.mark.parametrize("window", [8_000, 16_000])
def test_the_benchmark_compacts_exactly_as_the_cli_does(
    bench: ModuleType, path: Path, window: int, tmp_path: Path
) -> None:
    """For each shared transcript, `ctxfold replay FILE --window W --json` and the benchmark
    (its checked run and its plain timed run) make the same compactions at the same requests,
    with the same summarizer reading: both count exactly, the summarizer included."""
    from ctxfold.messages.jsonl import read_jsonl
    from ctxfold.tokens import counter

    outcome = run_cli(
        ["replay", str(path), "--window", str(window), "--json"], how="runner", home=tmp_path
    )
    assert outcome.code == 0, outcome.stderr
    cli = json.loads(outcome.stdout)
    messages = read_jsonl(path)
    count = counter("auto")
    checked = bench.replay_one(path.stem, messages, window, "default", count)
    plain, _ = bench.replay_plain(messages, window, "default", count)
    assert checked.compactions == len(cli["compactions"]) == len(plain.compactions)
    assert [c.turn for c in plain.compactions] == [c["turn"] for c in cli["compactions"]]
    assert checked.read == sum(c["stretch_tokens"] for c in cli["compactions"])
    assert checked.peak == cli["peak_tokens"] and checked.final == cli["final_tokens"]


def test_identifier_fates_follow_each_message_to_its_own_seq(bench: ModuleType) -> None:
    """Every compaction is an event of the log and takes a seq, so after the first one a
    message's seq is no longer its position plus one: the fates of the identifier columns are
    read at each message's own seq (`_message_seqs`): a message is kept exactly when its seq is
    an item of the final view, and an identifier is summarized when a summarized message holds
    it and no kept one does."""
    from ctxfold.storage import MemoryStore
    from ctxfold.testing.transcripts import generate
    from ctxfold.tokens import counter as make_counter

    counter = make_counter("heuristic")
    messages = generate(seed=3, steps=60)
    session = MemoryStore().session("fates", counter=counter)
    bench.replay(session, messages, bench.compactor_for(6_000, "default", counter), counter=counter)
    seqs = bench._message_seqs(session)
    compactions = [e.seq for e in session.events() if e.type == "compaction"]
    assert compactions and compactions[0] < seqs[-1]  # the shift this test is about happens
    assert seqs != list(range(1, len(messages) + 1))
    by_seq = {e.seq: e.data["message"] for e in session.events() if e.type == "message"}
    assert [by_seq[seq] for seq in seqs] == [m.to_dict() for m in messages]

    # Kept, read off the final view alone: an original still in it is an item with its seq.
    # `_fates` must name every other message, and none of these.
    in_view = {item.id for item in session.items()}
    fate = bench._fates(session)
    assert all((seq in in_view) is (seq not in fate) for seq in seqs)

    figures = bench.Figures("fates", "default", 6_000, 0, 0)
    bench._count_identifiers(figures, messages, session)
    kept: set[str] = set()
    summarized: set[str] = set()
    for seq, message in zip(seqs, messages, strict=True):
        if message.role in ("user", "assistant"):
            found = set(bench.extract_identifiers(message))
            if seq in in_view:
                kept |= found
            elif fate[seq] == "summarized":
                summarized |= found
    assert figures.summarized == len(summarized - kept) > 0


def test_reading_floor_is_its_parts_and_reads_what_summaries_replaced(
    result: dict[str, Any], bench: ModuleType
) -> None:
    """Each row's reading floor is timed and set against its own first tiktoken pass. The
    messages it reads beyond counting are the originals a summary replaced outright: none for
    the rows that never summarize, and for a compacting replay exactly the seqs its summary
    events name, each message at its own seq."""
    for cells in _rows(result):
        assert cells["reading floor ms"] > 0
        assert cells["reading floor / first tiktoken pass"] == pytest.approx(
            cells["reading floor ms"] / cells["first tiktoken pass ms"], rel=0.06
        )
    from ctxfold.testing.transcripts import generate
    from ctxfold.tokens import counter as make_counter

    counter = make_counter("auto")
    messages = generate(seed=3, steps=60)
    for ladder, window, summarizes in (
        ("none", bench.NO_COMPACTION, False),
        ("reference", 6_000, False),  # it drops turns before its summarizer is ever needed
        ("default", 6_000, True),
    ):
        figures = bench.replay_one("floor", messages, window, ladder, counter)
        assert bool(figures.read_once) is summarizes
    session = bench.MemoryStore().session("floor", counter=counter)
    bench.replay(session, messages, bench.compactor_for(6_000, "default", counter))
    read_once = bench._summarized_originals(session)
    named = {
        int(item)
        for e in session.events()
        if e.type == "compaction" and e.data.get("strategy") == "summarize"
        for item in e.data["replaced"]
    }
    seqs = bench._message_seqs(session)
    assert {seq for _, seq in read_once} == named & set(seqs)
    assert all(seqs[position] == seq for position, seq in read_once)
    parts = bench.reading_floor(messages, read_once, counter)
    assert list(parts) == list(bench.FLOOR_PARTS) and all(v >= 0 for v in parts.values())
