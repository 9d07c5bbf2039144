"""``ctxfold validate``: exit 0 for a valid history, 1 with a line per problem, and --repair."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _cli import WAYS, run_cli
from ctxfold.messages import read_jsonl, write_jsonl
from ctxfold.testing.transcripts import generate


def _rows(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


BROKEN = [
    {"role": "user", "content": "list the files"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
    {"role": "user", "content": "and then?"},
    {"role": "tool", "tool_call_id": "call_9", "content": "a.py"},
]  # fmt: skip


@pytest.mark.parametrize("how", WAYS)
def test_a_valid_history_exits_0(how: str, tmp_path: Path) -> None:
    """A valid transcript exits 0 and says so."""
    path = tmp_path / "ok.jsonl"
    write_jsonl(path, generate(seed=0, steps=10))
    outcome = run_cli(["validate", str(path)], how=how, home=tmp_path)
    assert outcome.code == 0 and "valid for openai" in outcome.stdout


@pytest.mark.parametrize("how", WAYS)
def test_an_invalid_history_exits_1_with_one_line_per_problem(how: str, tmp_path: Path) -> None:
    """Each problem is one line naming the file line, the problem and the call id."""
    path = _rows(tmp_path / "broken.jsonl", BROKEN)
    outcome = run_cli(["validate", str(path)], how=how, home=tmp_path)
    assert outcome.code == 1
    lines = outcome.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"{path}: line 2: missing-result:") and "'call_1'" in lines[0]
    assert lines[1].startswith(f"{path}: line 4: orphan-result:") and "'call_9'" in lines[1]


def test_a_pending_last_call_is_a_note_not_a_failure(tmp_path: Path) -> None:
    """A final call still waiting for its result is fine for a provider: exit 0, a note."""
    path = _rows(tmp_path / "pending.jsonl", BROKEN[:2])
    outcome = run_cli(["validate", str(path)], how="runner", home=tmp_path)
    assert outcome.code == 0 and "note: pending-call" in outcome.stderr


@pytest.mark.parametrize("how", WAYS)
def test_repair_writes_a_valid_history(how: str, tmp_path: Path) -> None:
    """--repair -o OUT drops the orphan result and answers the unanswered call; OUT validates."""
    path = _rows(tmp_path / "broken.jsonl", BROKEN)
    out = tmp_path / "fixed.jsonl"
    outcome = run_cli(["validate", str(path), "--repair", "-o", str(out)], how=how, home=tmp_path)
    assert outcome.code == 0, outcome.stdout + outcome.stderr
    assert "2 changes" in outcome.stdout
    changes = outcome.stderr.splitlines()
    assert len(changes) == 2
    assert "line 2: added a placeholder result for call 'call_1'" in changes[0]
    assert "line 4: dropped the tool result for call 'call_9'" in changes[1]
    fixed = read_jsonl(out)
    assert [m.role for m in fixed] == ["user", "assistant", "tool", "user"]
    assert run_cli(["validate", str(out)], how="runner", home=tmp_path).code == 0


def test_provider_rules_differ(tmp_path: Path) -> None:
    """--provider picks the rules: a reused call id is a note for OpenAI and an error for
    Anthropic."""
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    rows = [{"role": "user", "content": "go"}]
    for _ in range(2):
        rows += [{"role": "assistant", "content": None, "tool_calls": [call]},
                 {"role": "tool", "tool_call_id": "c1", "content": "a.py"}]  # fmt: skip
    path = _rows(tmp_path / "dup.jsonl", rows)
    assert run_cli(["validate", str(path)], how="runner", home=tmp_path).code == 0
    strict = run_cli(
        ["validate", str(path), "--provider", "anthropic"], how="runner", home=tmp_path
    )
    assert strict.code == 1 and "duplicate-call-id" in strict.stdout
