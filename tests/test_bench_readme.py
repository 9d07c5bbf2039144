"""The README's figures are the committed benchmark results, rendered, not copied by hand."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks import readme


def test_readme_figures_match_the_committed_results() -> None:
    current = readme.README.read_text(encoding="utf-8")
    assert readme.splice(current, readme.render()) == current, (
        "README figures are stale: run `python -m benchmarks.readme`"
    )


def test_a_changed_result_changes_the_rendered_figures(tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(readme.RESULTS, results)
    path = results / "replay.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    column = data["columns"].index("replay / tiktoken pass")
    for row in data["rows"]:
        if row[0] == "all (7)" and row[1] == "default" and row[2] == 16000:
            row[column] = 3.21
    path.write_text(json.dumps(data), encoding="utf-8")
    # Counted, not just found: another figure of the committed tables may read the same.
    cell = "| 3.21× |"
    assert readme.render(results).count(cell) == readme.render().count(cell) + 1


def test_a_renamed_column_fails_loudly(tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(readme.RESULTS, results)
    path = results / "writes.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["columns"][data["columns"].index("messages/s")] = "msg per s"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(KeyError, match="messages/s"):
        readme.render(results)


def test_a_readme_without_the_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="no figures block"):
        readme.splice("# a README\n", readme.render())


def test_the_figures_say_the_load_they_were_measured_under(tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(readme.RESULTS, results)
    path = results / "turn.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["notes"] = [n for n in data["notes"] if "1-minute load" not in n]
    data["notes"].append("Machine: 2 cores, 1-minute load 7.5 when this table was finished.")
    path.write_text(json.dumps(data), encoding="utf-8")
    assert "to 7.50 (" in readme.render(results)
