"""What a replay kept, as ``ctxfold replay`` reports it: the task and the user's messages
verbatim, identifiers in view, probes derived from the whole transcript, the size of summaries,
and what recall finds of what the view no longer shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _cli import run_cli
from ctxfold.messages import Message, ToolCall, write_jsonl
from ctxfold.replay import replay_transcript
from ctxfold.replay.fidelity import Probe, measure, probes_of
from ctxfold.session import Item
from ctxfold.testing.counters import FixedCounter
from ctxfold.testing.transcripts import generate
from ctxfold.tokens import Budget

COUNTER = FixedCounter()
FIDELITY_KEYS = {
    "user_bound", "task_tokens", "task_fits", "task_kept", "user_messages", "user_within_bound",
    "user_kept_within_bound", "user_kept", "identifiers", "identifiers_in_view", "commands",
    "commands_in_view", "probes", "probes_answered", "probes_missed", "summary_tokens",
    "largest_summary_tokens", "read_tokens", "history_tokens", "not_in_view", "recalled",
}  # fmt: skip


def bash(call_id: str, command: str) -> Message:
    return Message(
        "assistant", None, (ToolCall(call_id, "bash", json.dumps({"command": command})),)
    )


def transcript() -> list[Message]:
    return [
        Message("system", "agent"),
        Message("user", "Here is a demonstration of how to correctly accomplish this task."),
        Message("user", "<pr_description>\nMake the reader accept bytes.\nSee src/io.py.\n"),
        bash("c1", "sed -i 's/str/bytes/' src/io.py"),
        Message("tool", "<returncode>0</returncode>", tool_call_id="c1"),
        bash("c2", "python -m pytest tests/test_io.py"),
        Message(
            "tool",
            "<returncode>1</returncode>\nTypeError: expected bytes\n"
            "===== 1 failed, 4 passed in 0.2s =====",
            tool_call_id="c2",
        ),
        bash("c3", "make lint"),
        Message("tool", "<returncode>2</returncode>", tool_call_id="c3"),
        bash("c4", "python -m pytest tests/test_io.py"),
        Message(
            "tool", "<returncode>0</returncode>\n===== 5 passed in 0.2s =====", tool_call_id="c4"
        ),
    ]


@pytest.mark.guarantee("replay-fidelity-reported")
def test_probes_are_derived_from_the_work_ledger_of_the_whole_transcript() -> None:
    """The task's first line (markup and a demonstration skipped), every file modified, the last
    error of each failing command (its line, or the command when the output names none), and
    the last test run with its outcome."""
    probes = list(probes_of(transcript()))
    assert probes == [
        Probe("task", ("Make the reader accept bytes.",)),
        Probe("file", ("src/io.py",)),
        Probe("error", ("TypeError: expected bytes",)),
        Probe("error", ("make lint",)),
        Probe("test", ("python -m pytest tests/test_io.py", "5 passed")),
    ]


@pytest.mark.guarantee("replay-fidelity-reported")
def test_an_untouched_view_keeps_everything() -> None:
    """Measured on the transcript itself, every figure is whole: the task, every user message,
    every identifier and command, every probe; nothing is out of view."""
    messages = transcript()
    items = [Item(seq, m, "message", seq) for seq, m in enumerate(messages, 1)]
    fid = measure(messages, items, COUNTER.count_message, user_bound=1_000, target=2_000)
    assert fid.task_kept and fid.task_fits
    assert fid.user_kept == fid.user_within == fid.user_messages == 2
    assert fid.identifiers_in_view == fid.identifiers > 0
    assert fid.commands_in_view == fid.commands == 3
    assert fid.probes_answered == len(fid.probes) == 5
    assert fid.lost == 0 and fid.missed == ()


@pytest.mark.guarantee("replay-fidelity-reported")
def test_a_replay_measures_its_final_view_and_recall_finds_what_it_lost() -> None:
    """A replay that compacts reports the figures of its final view; every identifier the view
    no longer shows is found by one recall."""
    result = replay_transcript(generate(seed=3, steps=60), Budget(window=8_000))
    fid = result.fidelity
    assert fid is not None and result.compactions
    assert fid.task_kept and fid.user_kept == fid.user_within
    assert fid.lost > 0 and fid.recalled == fid.lost
    assert fid.read_tokens == sum(c.report.stretch_tokens for c in result.compactions)
    assert fid.largest_summary <= fid.target
    assert result.to_dict()["fidelity"] == fid.to_dict()


@pytest.mark.guarantee("replay-fidelity-reported")
def test_ctxfold_replay_shows_the_figures_in_text_json_and_html(tmp_path: Path) -> None:
    """`ctxfold replay` prints what the final view kept, --json carries it under "fidelity",
    and the HTML page has a section for it."""
    path = tmp_path / "session.jsonl"
    write_jsonl(path, generate(seed=0, steps=60))
    page = tmp_path / "replay.html"
    text = run_cli(
        ["replay", str(path), "--window", "16000", "--html", str(page)], how="runner", home=tmp_path
    )
    assert text.code == 0, text.stderr
    for phrase in ("what the final view kept:", "task: verbatim", "probes answered:", "recall:"):
        assert phrase in text.stdout
    data = json.loads(
        run_cli(
            ["replay", str(path), "--window", "16000", "--json"], how="runner", home=tmp_path
        ).stdout
    )
    assert set(data["fidelity"]) == FIDELITY_KEYS
    assert data["fidelity"]["task_kept"] is True
    html = page.read_text(encoding="utf-8")
    assert "What the final view kept" in html and "probes answered" in html
