"""``ctxfold replay`` and ``ctxfold demo``: a transcript played as a live agent would, reported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from _cli import WAYS, isolated_env, run_cli
from ctxfold.messages import Message, ToolCall, write_jsonl
from ctxfold.testing.transcripts import generate

REPLAY_KEYS = {
    "input", "html", "window", "trigger", "target", "messages", "requests", "original_tokens",
    "peak_tokens", "final_tokens", "over_window", "compactions", "failed_compactions",
    "summarizer_calls",
    "requested_tokens", "reused_tokens", "cache_reuse", "duration_s", "counter", "turns",
    "fidelity",
}  # fmt: skip


@pytest.fixture
def demo_file(tmp_path: Path) -> Path:
    path = tmp_path / "session.jsonl"
    write_jsonl(path, generate(seed=0, steps=60))
    return path


@pytest.mark.parametrize("how", WAYS)
def test_replay_json_reports_every_request_and_compaction(
    how: str, demo_file: Path, tmp_path: Path
) -> None:
    """--json gives the documented keys: a size per request, each compaction with its strategies,
    summarizer calls, and the prompt-cache reuse share."""
    outcome = run_cli(["replay", str(demo_file), "--window", "16000", "--json"], how=how,
                      home=tmp_path)  # fmt: skip
    assert outcome.code == 0, outcome.stderr
    data = json.loads(outcome.stdout)
    assert set(data) == REPLAY_KEYS
    assert data["requests"] == len(data["turns"]) == 61
    assert len(data["compactions"]) >= 3
    assert all(t["tokens"] <= 16_000 for t in data["turns"])
    assert data["over_window"] == []
    assert data["summarizer_calls"] == sum(c["summarizer_calls"] for c in data["compactions"])
    assert 0 < data["cache_reuse"] < 1
    assert data["reused_tokens"] == sum(t["prefix_tokens"] for t in data["turns"])
    for c in data["compactions"]:
        assert c["strategies"] and c["tokens_after"] < c["tokens_before"]


@pytest.mark.parametrize("how", WAYS)
def test_replay_text_and_html_page(how: str, demo_file: Path, tmp_path: Path) -> None:
    """The text output lists compactions, cache reuse and sizes; --html writes the HTML page;
    with no terminal there is no progress bar on stderr."""
    page_path = tmp_path / "replay.html"
    outcome = run_cli(
        ["replay", str(demo_file), "--window", "16000", "--html", str(page_path)],
        how=how,
        home=tmp_path,
    )
    assert outcome.code == 0, outcome.stderr
    assert outcome.stderr == ""
    for phrase in ("compactions:", "summarizer calls:", "prompt-cache reuse:", "#1 before request",
                   "context per request", f"html: {page_path}"):  # fmt: skip
        assert phrase in outcome.stdout
    assert "over the window" not in outcome.stdout  # every request fit 16,000 tokens
    page = page_path.read_text(encoding="utf-8")
    assert 'id="replay-data"' in page and "compaction-row" in page


def test_requests_over_the_window_are_named(tmp_path: Path) -> None:
    """When the newest step alone is larger than the window (a call writing a whole file: no
    rung cuts what the model itself sent), the requests that took more than the window (a
    provider would refuse each) are listed: in --json, on their own line of the text report, and
    as a figure on the HTML page."""
    path = tmp_path / "written.jsonl"
    body = "\n".join(f"def handler_{i}(event):\n    return route(event, {i})" for i in range(150))
    call = ToolCall("w1", "write_file", json.dumps({"path": "src/handlers.py", "content": body}))
    write_jsonl(
        path,
        [
            *generate(seed=0, steps=60),
            Message("assistant", "", tool_calls=(call,)),
            Message("tool", "written", tool_call_id="w1"),
            Message("assistant", "Done."),
        ],
    )
    argv = ["replay", str(path), "--window", "1200"]
    data = json.loads(run_cli([*argv, "--json"], how="runner", home=tmp_path).stdout)
    over = [t["turn"] for t in data["turns"] if t["tokens"] > 1_200]
    assert over and data["over_window"] == over
    page_path = tmp_path / "small.html"
    text = run_cli([*argv, "--html", str(page_path)], how="runner", home=tmp_path).stdout
    line = next(x for x in text.splitlines() if "over the window" in x)
    assert line.strip().startswith(f"over the window: {len(over)} of {data['requests']} requests")
    more = ", ..." if len(over) > 8 else ""
    assert f"(requests {', '.join(map(str, over[:8]))}{more})" in line
    page = page_path.read_text(encoding="utf-8")
    assert f"<b>{len(over)}</b><span>requests over the window</span>" in page


def test_replay_into_a_database_keeps_the_session(demo_file: Path, tmp_path: Path) -> None:
    """-d URL keeps the replayed session in that store, where ``ctxfold sessions`` finds its log
    with the compactions; a second replay gets a fresh session instead of appending to the
    first."""
    url = f"sqlite:///{tmp_path / 'replay.db'}"
    for _ in range(2):
        outcome = run_cli(["replay", str(demo_file), "--window", "16000", "-d", url],
                          how="runner", home=tmp_path)  # fmt: skip
        assert outcome.code == 0, outcome.stderr
    listed = run_cli(["sessions", "list", "-d", url], how="runner", home=tmp_path).stdout
    assert [line.split("\t")[0] for line in listed.splitlines()] == [
        "replay-session",
        "replay-session-2",
    ]
    log = run_cli(["sessions", "log", "replay-session", "-d", url], how="runner", home=tmp_path)
    assert " compaction " in log.stdout and " message " in log.stdout


def test_a_file_name_that_is_not_utf8_still_names_the_session(
    demo_file: Path, tmp_path: Path
) -> None:
    """A transcript whose file name holds bytes that are not UTF-8 replays, its session named
    with U+FFFD in their place (the id held lone surrogates, which the store refused)."""
    odd = Path(os.fsdecode(bytes(tmp_path / "ok") + b"\xff.jsonl"))
    odd.write_bytes(demo_file.read_bytes())
    url = f"sqlite:///{tmp_path / 'replay.db'}"
    # In a process of its own, as from a shell: the name reaches it as bytes, and its report
    # prints them back as they are (so the output is read as bytes here).
    environ = {k: v for k, v in os.environ.items() if k != "CTXFOLD_DATABASE_URL"}
    environ.update(isolated_env(tmp_path))
    done = subprocess.run(
        [sys.executable, "-m", "ctxfold", "replay", str(odd), "--window", "16000", "-d", url],
        capture_output=True,
        env=environ,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    listed = run_cli(["sessions", "list", "-d", url], how="runner", home=tmp_path).stdout
    assert listed.split("\t")[0] == "replay-ok\ufffd"


@pytest.mark.parametrize("how", WAYS)
def test_demo_runs_offline_and_writes_session_and_page(how: str, tmp_path: Path) -> None:
    """``ctxfold demo`` needs no key and no network: it writes the session and its HTML page
    and prints a replay summary with several compactions."""
    out = tmp_path / "demo"
    # Any attempt to reach the network would go to a closed local port and fail.
    offline = {"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9",
               "OPENAI_API_KEY": "", "ANTHROPIC_API_KEY": ""}  # fmt: skip
    outcome = run_cli(["demo", "--out", str(out)], how=how, home=tmp_path, env=offline)
    assert outcome.code == 0, outcome.stderr
    assert (out / "session.jsonl").is_file() and (out / "replay.html").is_file()
    line = next(x for x in outcome.stdout.splitlines() if x.strip().startswith("compactions:"))
    assert int(line.split(":")[1].split()[0].rstrip(";")) >= 3
    assert "prompt-cache reuse:" in outcome.stdout
    checked = run_cli(["validate", str(out / "session.jsonl")], how="runner", home=tmp_path)
    assert checked.code == 0


def test_a_terminal_gets_a_progress_bar(demo_file: Path, tmp_path: Path) -> None:
    """With stderr on a terminal, replay draws a progress bar there; stdout stays the report."""
    pty = pytest.importorskip("pty")
    import os
    import subprocess
    import sys
    import threading

    leader, follower = pty.openpty()
    drawn = bytearray()

    def drain() -> None:
        # Read while the command runs: a full terminal buffer would block its writes.
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed: everything has been read
                return
            if not chunk:
                return
            drawn.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "ctxfold", "replay", str(demo_file), "--window", "16000"],
            stdout=subprocess.PIPE,
            stderr=follower,
            env={**os.environ, "HOME": str(tmp_path), "TERM": "xterm"},
            timeout=300,
            check=False,
        )
    finally:
        os.close(follower)
        reader.join(timeout=30)
        os.close(leader)
    assert done.returncode == 0
    assert b"replaying" in drawn and b"100%" in drawn
    assert b"replaying" not in done.stdout
