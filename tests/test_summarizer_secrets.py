"""LLM summarizers redact what they send: a secret in the history never reaches the provider.

The real SDK clients talk to `FakeLLMServer`, which records every request body; the secrets are
made up here for the test.
"""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from ctxfold.compactor import Compactor
from ctxfold.messages import Message, ToolCall
from ctxfold.pipeline import Pipeline, Summarize
from ctxfold.storage import MemoryStore
from ctxfold.summarizers._llm import LLMSummarizer
from ctxfold.summarizers.anthropic import AnthropicSummarizer
from ctxfold.summarizers.litellm import LiteLLMSummarizer
from ctxfold.summarizers.openai import OpenAISummarizer
from ctxfold.summarizers.prompt import build_request
from ctxfold.testing.fake_llm import FakeLLMServer
from ctxfold.tokens import Budget

SECRETS = {
    "aws": "wJalrXUtnFEMI/K7MDENG/bPxRfiCY0EXAMPLE9",
    "db": "Pa55w0rd-for-prod!",
    "github": "ghp_" + "Z9y8X7w6V5u4T3s2R1q0" * 2,
    "openai": "sk-proj-" + "aB3dE5fG7hJ9kL1mN3pQ5rS7" * 2,
}


def history(steps: int = 12) -> list[Message]:
    """An agent at work, with a secret in a user message, a command and tool outputs."""
    messages = [
        Message(
            "user",
            f"Deploy the app. The database is postgresql://app:{SECRETS['db']}@db:5432/prod",
        )
    ]
    for n in range(steps):
        command = f"export GITHUB_TOKEN={SECRETS['github']} && ./deploy.sh --step {n}"
        call = ToolCall(f"c{n}", "bash", json.dumps({"command": command}))
        messages.append(Message("assistant", f"Running deploy step {n} of {steps}.", (call,)))
        output = (
            f"step {n}: uploading build artefacts to s3://releases/app/{n}/ ...\n"
            f"aws_secret_access_key = {SECRETS['aws']}\n"
            f"OPENAI_API_KEY={SECRETS['openai']}\n" + "ok\n" * 40
        )
        messages.append(Message("tool", output, tool_call_id=f"c{n}"))
    return messages


def leaked(server: FakeLLMServer) -> list[str]:
    """The secrets found in any request body the server received."""
    bodies = [json.dumps(sent.body) for sent in server.requests]
    assert bodies, "no request was sent"
    return [
        name
        for name, secret in SECRETS.items()
        if any(secret in body or json.dumps(secret)[1:-1] in body for body in bodies)
    ]


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


def openai_summarizer(server: FakeLLMServer, **options: Any) -> OpenAISummarizer:
    client = openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
    return OpenAISummarizer("gpt-4o-mini", client=client, **options)


def anthropic_summarizer(server: FakeLLMServer, **options: Any) -> AnthropicSummarizer:
    client = anthropic.Anthropic(base_url=server.anthropic_base_url, api_key="test", max_retries=0)
    return AnthropicSummarizer("claude-haiku-4-5", client=client, **options)


@pytest.mark.guarantee("secrets-not-sent")
@pytest.mark.parametrize("make", [openai_summarizer, anthropic_summarizer])
async def test_no_secret_in_the_history_reaches_the_provider(
    server: FakeLLMServer, make: Any
) -> None:
    """By default, sync and async, in one call and read in pieces, every body sent to the API
    is free of the secrets in the history, and says where they were."""
    request = build_request(history(), max_tokens=400)
    summarizer: LLMSummarizer = make(server)
    assert summarizer(request).text
    assert (await summarizer.acall(request)).text
    await summarizer.aclose()  # type: ignore[attr-defined]
    small = make(server, window=1_600, max_output_tokens=400)
    assert small(request).text
    assert len(server.requests) > 3  # the small window read the stretch in pieces
    assert leaked(server) == []
    assert all("[redacted]" in json.dumps(sent.body) for sent in server.requests[:2])


@pytest.mark.guarantee("secrets-not-sent")
def test_a_compactor_with_an_llm_summarizer_sends_no_secret(server: FakeLLMServer) -> None:
    """Through the whole engine (trigger, ladder, summarize), what the summarizer sends to the
    provider holds none of the session's secrets."""
    session = MemoryStore().session("deploy-run")
    session.append(history(steps=30))
    compactor = Compactor(
        Budget(window=6_000), Pipeline([Summarize()]), summarizer=openai_summarizer(server)
    )
    compactor.compact(session)
    assert leaked(server) == []


def test_redact_none_sends_the_history_as_it_is(server: FakeLLMServer) -> None:
    """`redact=None` turns redaction off: the record goes out unchanged."""
    request = build_request(history(steps=2), max_tokens=400)
    openai_summarizer(server, redact=None)(request)
    assert server.requests[0].user == request.record
    assert set(leaked(server)) == set(SECRETS)


def test_a_custom_redactor_sees_every_piece_sent(server: FakeLLMServer) -> None:
    """A redactor of the caller's own replaces the default one, for every call."""
    seen: list[str] = []

    def scrub(text: str) -> str:
        seen.append(text)
        return text.replace("deploy", "[step]")

    openai_summarizer(server, redact=scrub)(build_request(history(steps=2), max_tokens=400))
    assert seen and "deploy" not in server.requests[0].user
    assert "[step]" in server.requests[0].user


@pytest.mark.guarantee("secrets-not-sent")
def test_litellm_redacts_too(server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """LiteLLMSummarizer shares the base: what reaches `litellm.completion` is redacted."""
    client = openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
    stand_in = types.ModuleType("litellm")

    def completion(model: str, **params: Any) -> Any:
        return client.chat.completions.create(model=model.removeprefix("openai/"), **params)

    stand_in.completion = completion  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "litellm", stand_in)
    LiteLLMSummarizer("openai/gpt-4o-mini")(build_request(history(steps=3), max_tokens=400))
    assert leaked(server) == []


KEY = "sk-proj-" + "Qw3rTy7uIo9pAs1dFg5hJk2l" * 2


@pytest.mark.guarantee("secrets-not-sent")
@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_an_api_error_that_quotes_the_key_is_passed_on_redacted(
    server: FakeLLMServer, api: str, caplog: pytest.LogCaptureFixture
) -> None:
    """When the API (or a proxy) answers with the key it was sent, the summarizer's error, the
    report and the log lines carry it redacted."""
    server.mode = "unauthorized"
    if api == "openai":
        client: Any = openai.OpenAI(base_url=server.openai_base_url, api_key=KEY, max_retries=0)
        summarizer: Any = OpenAISummarizer("gpt-4o-mini", client=client)
    else:
        client = anthropic.Anthropic(base_url=server.anthropic_base_url, api_key=KEY, max_retries=0)
        summarizer = AnthropicSummarizer("claude-haiku-4-5", client=client)
    session = MemoryStore().session("s")
    session.append(history())
    compactor = Compactor(Budget(window=4_000), Pipeline([Summarize()]), summarizer=summarizer)
    report = compactor.maybe_compact(session)
    assert server.requests, "no request was sent"
    assert report is not None and report.error is not None and "[redacted]" in report.error
    assert KEY not in report.error
    assert KEY not in caplog.text


def test_a_summarizer_error_that_quotes_a_secret_is_reported_redacted() -> None:
    """Whatever summarizer raised it, an error's text is redacted before it reaches the report
    of compact_messages (and the CLI that prints it)."""
    from ctxfold import compact_messages

    def leaky(request: Any) -> str:
        raise RuntimeError(f"upstream refused OPENAI_API_KEY={KEY}")

    done = compact_messages(history(), Budget(window=4_000), summarizer=leaky)
    assert done.report.error is not None and KEY not in done.report.error
    assert "OPENAI_API_KEY=[redacted]" in done.report.error
