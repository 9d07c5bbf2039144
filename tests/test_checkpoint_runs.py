"""Checkpoints write a run of originals as one entry (format 4); a checkpoint of format 3, which
wrote each apart, is still read, and a run that does not hold is ignored like any other broken
checkpoint: the session then folds the log, to the same result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxfold.session import checkpoint
from ctxfold.storage import SQLiteStore
from tests.test_checkpoints import build, reopened

SID = "cp"


def _runs_as_references(entries: list[Any]) -> list[Any]:
    """The entries as format 3 wrote them: ``[seq, tokens]`` for each original."""
    out: list[Any] = []
    for entry in entries:
        if len(entry) == 2 and isinstance(entry[1], list):
            out.extend([entry[0] + i, tokens] for i, tokens in enumerate(entry[1]))
        else:
            out.append(entry)
    return out


def _rewrite(path: Path, change: Any) -> None:
    with SQLiteStore(path) as store:
        found = store.load_snapshot(SID)
        assert found is not None
        seq, data = found
        store.save_snapshot(SID, seq, json.dumps(change(json.loads(data))))


def test_the_checkpoint_writes_runs_of_originals(tmp_path: Path) -> None:
    """Originals with consecutive seqs share one entry, and a checkpoint holds fewer entries
    than items."""
    path = tmp_path / "cp.db"
    before = build(path)
    with SQLiteStore(path) as store:
        found = store.load_snapshot(SID)
    assert found is not None
    raw = json.loads(found[1])
    assert raw["format"] == checkpoint.FORMAT == 4
    runs = [e for e in raw["items"] if len(e) == 2 and isinstance(e[1], list)]
    assert runs and len(raw["items"]) < len(_runs_as_references(raw["items"]))
    assert len(_runs_as_references(raw["items"])) <= len(before["items"])


def test_a_format_3_checkpoint_is_still_used(tmp_path: Path) -> None:
    """A checkpoint an earlier version wrote (format 3) is read, and the session projects,
    pins, counts and estimates as the session that wrote it."""
    path = tmp_path / "cp.db"
    before = build(path)

    def as_format_3(raw: dict[str, Any]) -> dict[str, Any]:
        return {**raw, "format": 3, "items": _runs_as_references(raw["items"])}

    _rewrite(path, as_format_3)
    with SQLiteStore(path) as store:
        assert checkpoint.load(store, SID) is not None
    after, counter, _ = reopened(path)
    assert after == before
    assert len(counter.seen) < len(before["messages"])  # the recorded counts were used


def _first_run(raw: dict[str, Any]) -> int:
    return next(i for i, e in enumerate(raw["items"]) if isinstance(e[1], list))


def _broken(kind: str) -> Any:
    def change(raw: dict[str, Any]) -> dict[str, Any]:
        items = list(raw["items"])
        at = _first_run(raw)
        first, counts = items[at]
        if kind == "empty run":
            items.insert(at, [first - 1 if first > 1 else first, []])
        elif kind == "negative count":
            items[at] = [first, [-1, *counts[1:]]]
        elif kind == "count not an integer":
            items[at] = [first, [1.5, *counts[1:]]]
        elif kind == "count a boolean":
            items[at] = [first, [True, *counts[1:]]]
        elif kind == "run from seq 0":
            items[at] = [0, counts]
        elif kind == "runs overlapping":
            items.insert(at + 1, [first, counts])
        elif kind == "run beyond the checkpoint's seq":
            items.append([raw["seq"] + 1, [1]])
        elif kind == "run longer than the log":
            items[at] = [first, counts + [1] * 10_000]
        else:
            raise AssertionError(kind)
        return {**raw, "items": items}

    return change


@pytest.mark.guarantee("checkpoints-are-derived")
@pytest.mark.parametrize(
    "kind",
    [
        "empty run",
        "negative count",
        "count not an integer",
        "count a boolean",
        "run from seq 0",
        "runs overlapping",
        "run beyond the checkpoint's seq",
        "run longer than the log",
    ],
)
def test_a_broken_run_is_ignored_and_changes_no_result(tmp_path: Path, kind: str) -> None:
    """Whatever is wrong with a run, the checkpoint is not used and the reopened session
    projects, pins, counts and estimates exactly as the session that wrote it."""
    path = tmp_path / "cp.db"
    before = build(path)
    _rewrite(path, _broken(kind))
    with SQLiteStore(path) as store:
        assert checkpoint.load(store, SID) is None
    after, _, _ = reopened(path)
    assert after == before
