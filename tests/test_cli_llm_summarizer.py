"""`ctxfold compact --summarizer openai:MODEL|anthropic:MODEL` reaches the API through the SDKs'
own environment variables (keys and base URLs), here pointed at a local fake API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctxfold.messages import validate, write_jsonl
from ctxfold.messages.jsonl import read_jsonl
from ctxfold.testing import FakeLLMServer
from ctxfold.testing.transcripts import generate


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    path = tmp_path / "run.jsonl"
    write_jsonl(path, generate(seed=3, steps=30), format="openai")
    return path


def run_cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    return subprocess.run(
        [sys.executable, "-m", "ctxfold", *args],
        env={**base, "HOME": str(cwd), "XDG_DATA_HOME": str(cwd), **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_cli_llm_summarizer_uses_sdk_environment(
    provider: str, transcript: Path, tmp_path: Path
) -> None:
    """With only the SDK's usual environment variables set, the CLI's LLM summarizer sends its
    requests to that base URL with that key, and reports the model's usage."""
    out = tmp_path / "small.jsonl"
    with FakeLLMServer() as server:
        if provider == "openai":
            env = {"OPENAI_API_KEY": "sk-test-env", "OPENAI_BASE_URL": server.openai_base_url}
            model = "gpt-4o-mini"
        else:
            env = {"ANTHROPIC_API_KEY": "test-env", "ANTHROPIC_BASE_URL": server.anthropic_base_url}
            model = "claude-haiku-4-5"
        # A generous target: one summary of the old steps is what it takes.
        done = run_cli(
            [
                "compact", str(transcript), "--window", "16000", "--summarizer",
                f"{provider}:{model}", "--json", "-o", str(out),
            ],
            env,
            tmp_path,
        )  # fmt: skip
        requests = list(server.requests)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert requests, "the summarizer never reached the fake API"
    key = env["OPENAI_API_KEY" if provider == "openai" else "ANTHROPIC_API_KEY"]
    for request in requests:
        headers = {name.lower(): value for name, value in request.headers.items()}
        # Depending on the SDK version the key travels as a bearer token or as x-api-key.
        assert key in headers.get("authorization", "") + headers.get("x-api-key", "")
    assert report["summarizer"]["model"]
    assert report["summarizer"]["calls"] == len(requests)
    assert report["summarizer"]["input_tokens"] > 0
    assert report["valid"] is True
    assert not [p for p in validate(read_jsonl(out)) if p.severity == "error"]


def test_a_summarizer_that_fails_is_reported_not_hidden(transcript: Path, tmp_path: Path) -> None:
    """An LLM summarizer that cannot run (here: no API key at all) does not stop the compaction,
    which goes on without it to a valid history; but the report says so, on a 'failed:' line and
    in the JSON's error, instead of printing only the strategies that stood in for it."""
    out = tmp_path / "small.jsonl"
    # No key, and a base URL nobody listens on: nothing can leave this machine.
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    args = ["compact", str(transcript), "--window", "16000", "--summarizer", "openai:gpt-4o-mini",
            "-o", str(out)]  # fmt: skip
    text = run_cli(args, env, tmp_path)
    assert text.returncode == 0, text.stderr
    failed = [line for line in text.stdout.splitlines() if line.startswith("  failed: ")]
    assert len(failed) == 1 and "OpenAIError" in failed[0], text.stdout
    assert "went on without it" in failed[0]
    data = json.loads(run_cli([*args, "--json"], env, tmp_path).stdout)
    assert data["error"] and "OpenAIError" in data["error"] and data["summarizer"]["calls"] == 0
    assert data["valid"] is True
    assert not [p for p in validate(read_jsonl(out)) if p.severity == "error"]


def test_a_summarizer_timeout_bounds_a_call_that_hangs(transcript: Path, tmp_path: Path) -> None:
    """--summarizer-timeout reaches the SDK: an API that answers only after 30 s makes each call
    fail after the timeout, and the compaction goes on without the summarizer and says so,
    instead of waiting on the SDK's own timeout of minutes."""
    out = tmp_path / "small.jsonl"
    with FakeLLMServer(mode="slow", slow_seconds=30) as server:
        env = {"OPENAI_API_KEY": "sk-test-env", "OPENAI_BASE_URL": server.openai_base_url}
        done = run_cli(
            [
                "compact", str(transcript), "--window", "16000", "--summarizer",
                "openai:gpt-4o-mini", "--summarizer-timeout", "0.5", "--json", "-o", str(out),
            ],
            env,
            tmp_path,
        )  # fmt: skip
        asked = len(server.requests)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert asked >= 1, "the summarizer never reached the fake API"
    assert report["error"] and "timed out" in report["error"].lower(), report["error"]
    assert report["valid"] is True


# Made up for this test: shaped like real credentials, valid for nothing.
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY9"
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def with_secrets(tmp_path: Path) -> Path:
    """A generated run whose oldest assistant message quotes two secrets (tool output could be
    cleared before any summary reads it; the agent's own words are not)."""
    messages = generate(seed=5, steps=30)
    leaky = next(i for i, m in enumerate(messages) if m.role == "assistant")
    messages[leaky] = messages[leaky].replace(
        content=f"I found export AWS_SECRET_ACCESS_KEY={AWS_SECRET} and "
        f"GITHUB_TOKEN={GITHUB_TOKEN} in the environment. {messages[leaky].text}"
    )
    path = tmp_path / "leaky.jsonl"
    write_jsonl(path, messages, format="openai")
    return path


@pytest.mark.guarantee("secrets-not-sent")
@pytest.mark.parametrize("command", ["compact", "replay"])
def test_cli_sends_no_secret_to_an_llm_summarizer_unless_told_to(
    command: str, tmp_path: Path
) -> None:
    """By default (`--redact`) no request the summarizer receives holds the secrets of the
    history, and no summary written holds them either; `--no-redact` sends the history as it
    is, which shows the flag is what keeps them out."""
    transcript = with_secrets(tmp_path)
    sent: dict[str, str] = {}
    for flag in ("--redact", "--no-redact"):
        out = tmp_path / f"out{flag}.jsonl"
        with FakeLLMServer() as server:
            env = {"OPENAI_API_KEY": "sk-test-env", "OPENAI_BASE_URL": server.openai_base_url}
            args = [command, str(transcript), "--window", "8000"]
            args += ["--summarizer", "openai:gpt-4o-mini", flag, "--json"]
            args += ["-o", str(out)] if command == "compact" else []
            done = run_cli(args, env, tmp_path)
            sent[flag] = "\n".join(json.dumps(r.body) for r in server.requests)
        assert done.returncode == 0, done.stderr
        assert sent[flag], f"{command} {flag}: the summarizer was never called"
        if command == "compact" and flag == "--redact":
            summaries = [m.text for m in read_jsonl(out) if m.text.startswith("[ctxfold: summ")]
            assert summaries
            assert not [s for s in summaries if AWS_SECRET in s or GITHUB_TOKEN in s]
    assert AWS_SECRET not in sent["--redact"] and GITHUB_TOKEN not in sent["--redact"]
    assert AWS_SECRET in sent["--no-redact"] or GITHUB_TOKEN in sent["--no-redact"]
