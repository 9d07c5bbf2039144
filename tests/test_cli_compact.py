"""``ctxfold compact``: a transcript in, a compacted valid history out, and what was done."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _cli import WAYS, run_cli
from conftest import transcript_params
from ctxfold.messages import read_jsonl, validate, write_jsonl
from ctxfold.testing.transcripts import generate

DOCUMENTED_KEYS = {
    "input", "output", "format", "messages_before", "messages_after", "window", "tokens_before",
    "tokens_after", "target", "fits", "pinned_tokens", "reason", "strategies", "identifiers",
    "summarizer", "summaries", "error", "duration_s", "valid", "counter", "repaired",
}  # fmt: skip


@pytest.fixture
def demo_file(tmp_path: Path) -> Path:
    path = tmp_path / "session.jsonl"
    write_jsonl(path, generate(seed=0, steps=60))
    return path


@pytest.mark.transcripts
@pytest.mark.parametrize("window", [8_000, 16_000, 32_000])
@pytest.mark.parametrize("transcript", transcript_params())
@pytest.mark.guarantee("history-always-valid")
@pytest.mark.guarantee("fits-or-smallest")
def test_every_shared_transcript_compacts_to_a_valid_history_within_the_target(
    transcript: Path, window: int, tmp_path: Path
) -> None:
    """On every shared transcript at 8,000, 16,000 and 32,000 tokens, compact writes a history
    that ``ctxfold validate`` accepts and that is within the target (or, where the pinned
    messages alone exceed the target, says so)."""
    out = tmp_path / "out.jsonl"
    args = ["compact", str(transcript), "--window", str(window), "-o", str(out), "--json"]
    outcome = run_cli(args, how="runner", home=tmp_path)
    assert outcome.code == 0, outcome.stderr
    report = json.loads(outcome.stdout)
    assert report["valid"] is True
    assert report["fits"] == (report["tokens_after"] <= report["target"])
    assert report["fits"] or report["pinned_tokens"] > report["target"], report
    checked = run_cli(["validate", str(out)], how="runner", home=tmp_path)
    assert checked.code == 0, checked.stdout


@pytest.mark.parametrize("how", WAYS)
def test_json_output_has_the_documented_keys(how: str, demo_file: Path, tmp_path: Path) -> None:
    """--json prints one object with the keys docs/cli.md documents, figures that agree."""
    out = tmp_path / "small.jsonl"
    args = ["compact", str(demo_file), "--window", "16000", "-o", str(out), "--json"]
    outcome = run_cli(args, how=how, home=tmp_path)
    assert outcome.code == 0, outcome.stderr
    report = json.loads(outcome.stdout)
    assert set(report) == DOCUMENTED_KEYS
    assert report["tokens_after"] <= report["target"] < report["tokens_before"]
    assert report["target"] == round(16_000 * 0.4)
    assert report["error"] is None  # the extractive summarizer did not fail
    assert report["strategies"], "a 39,000-token session must take some strategy"
    first, last = report["strategies"][0], report["strategies"][-1]
    assert first["tokens_before"] == report["tokens_before"]
    assert last["tokens_after"] == report["tokens_after"]
    assert set(first) == {"name", "tokens_before", "tokens_after", "edits"}
    assert set(report["identifiers"]) == {"kept", "left_out"}
    assert report["messages_after"] == len(read_jsonl(out)) < report["messages_before"]


@pytest.mark.parametrize("how", WAYS)
def test_text_output_says_what_was_done(how: str, demo_file: Path, tmp_path: Path) -> None:
    """Without --json the summary names tokens before and after, each strategy, identifiers,
    and the file written."""
    out = tmp_path / "small.jsonl"
    args = ["compact", str(demo_file), "--window", "16000", "-o", str(out)]
    outcome = run_cli(args, how=how, home=tmp_path)
    assert outcome.code == 0, outcome.stderr
    text = outcome.stdout
    assert "target 6,400" in text and "window 16,000" in text
    assert "identifiers:" in text and f"wrote {out}" in text
    report = json.loads(run_cli([*args, "--json"], how="runner", home=tmp_path).stdout)
    for strategy in report["strategies"]:
        assert strategy["name"] in text


def test_the_output_keeps_the_input_format_unless_told(demo_file: Path, tmp_path: Path) -> None:
    """An Anthropic transcript compacts to an Anthropic file; --format converts."""
    anthropic = tmp_path / "anthropic.jsonl"
    write_jsonl(anthropic, read_jsonl(demo_file), format="anthropic")
    same = tmp_path / "same.jsonl"
    outcome = run_cli(
        ["compact", str(anthropic), "--window", "16000", "-o", str(same), "--json"],
        how="runner",
        home=tmp_path,
    )
    assert json.loads(outcome.stdout)["format"] == "anthropic"
    assert json.loads(same.read_text().splitlines()[0]).keys() == {"system"}
    assert [p for p in validate(read_jsonl(same), "anthropic") if p.severity == "error"] == []
    converted = tmp_path / "openai.jsonl"
    outcome = run_cli(
        ["compact", str(anthropic), "--window", "16000", "-o", str(converted), "--format",
         "openai"],
        how="runner",
        home=tmp_path,
    )  # fmt: skip
    assert outcome.code == 0
    assert json.loads(converted.read_text().splitlines()[0])["role"] == "system"


def test_dash_writes_the_history_to_stdout_and_the_summary_to_stderr(
    demo_file: Path, tmp_path: Path
) -> None:
    """With -o - the compacted JSONL goes to stdout, so it can be piped; the summary to stderr."""
    outcome = run_cli(
        ["compact", str(demo_file), "--window", "16000", "-o", "-"], how="subprocess", home=tmp_path
    )
    assert outcome.code == 0, outcome.stderr
    messages = read_jsonl(outcome.stdout.splitlines())
    assert messages[0].role == "system" and "tokens" in outcome.stderr


def test_the_default_output_sits_beside_the_input(demo_file: Path, tmp_path: Path) -> None:
    """Without -o the history is written next to INPUT as NAME.compacted.jsonl."""
    outcome = run_cli(["compact", str(demo_file), "--window", "16000"], how="runner", home=tmp_path)
    assert outcome.code == 0, outcome.stderr
    assert (demo_file.parent / "session.compacted.jsonl").is_file()


@pytest.mark.guarantee("under-target-no-op")
def test_under_the_target_nothing_changes(demo_file: Path, tmp_path: Path) -> None:
    """A transcript already under the target of a big model window comes back as it was."""
    out = tmp_path / "out.jsonl"
    outcome = run_cli(
        ["compact", str(demo_file), "--model", "gpt-4o", "-o", str(out), "--json"],
        how="runner",
        home=tmp_path,
    )
    report = json.loads(outcome.stdout)
    assert report["strategies"] == [] and report["tokens_after"] == report["tokens_before"]
    assert report["window"] == 128_000
    assert read_jsonl(out) == read_jsonl(demo_file)


def test_a_token_count_target_and_keep_recent_tokens_are_used(
    demo_file: Path, tmp_path: Path
) -> None:
    """--target above 1 is a token count; the report shows it as the target."""
    out = tmp_path / "out.jsonl"
    args = ["compact", str(demo_file), "--window", "20000", "--target", "5000",
            "--keep-recent-tokens", "2000", "-o", str(out), "--json"]  # fmt: skip
    report = json.loads(run_cli(args, how="runner", home=tmp_path).stdout)
    assert report["target"] == 5_000 and report["tokens_after"] <= 5_000
