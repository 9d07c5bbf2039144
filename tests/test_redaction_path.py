"""With a redactor configured, a secret in the history reaches neither the summarizer nor a
stored summary, by any path: the request, identifier restoration, the callback's ranges."""

from __future__ import annotations

import pytest

from ctxfold import Budget, Compactor, Message, ToolCall, redact_secrets
from ctxfold.events import COMPACTION
from ctxfold.storage import MemoryStore
from ctxfold.testing import FunctionSummarizer

# Made up: shaped like a real credential, valid for nothing.
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY9"


def leaky_session():  # type: ignore[no-untyped-def]
    session = MemoryStore().session("leaky")
    session.append([Message("system", "You fix builds."), Message("user", "Fix the deploy.")])
    for step in range(12):
        call = ToolCall(f"call_{step}", "bash", f'{{"command": "cat deploy/env_{step}.sh"}}')
        said = f"Step {step}: the key is AWS_SECRET_ACCESS_KEY={SECRET} in deploy/env_{step}.sh."
        session.append(
            [
                Message("assistant", said + " Checking more. " * 20, (call,)),
                Message("tool", "ok " * 50, tool_call_id=call.id),
            ]
        )
    return session


@pytest.mark.guarantee("summaries-redacted")
def test_a_secret_reaches_neither_the_summarizer_nor_the_stored_summary() -> None:
    """The summarizer answers with a bare summary, so identifier restoration adds back what it
    left out; the secret (which reads like a path) is not among what is restored."""
    session = leaky_session()
    summarizer = FunctionSummarizer(lambda request: "## Objective\n- fix the deploy")
    compactor = Compactor(Budget(window=4_000), summarizer=summarizer, redact=redact_secrets)
    report = compactor.compact(session)
    assert report.landed
    sent = "\n".join(r.record + "\n".join(r.identifiers) for r in summarizer.requests)
    assert summarizer.requests and SECRET not in sent
    stored = [e.payload.message.text for e in session.events() if e.type == COMPACTION]
    assert stored and not [text for text in stored if SECRET in text]


def test_without_a_redactor_the_history_goes_to_the_summarizer_as_it_is() -> None:
    """The contrast: with no redactor the same run sends the secret, so the test above shows
    the redactor at work and not a history that never reached the summarizer."""
    session = leaky_session()
    summarizer = FunctionSummarizer(lambda request: "## Objective\n- fix the deploy")
    Compactor(Budget(window=4_000), summarizer=summarizer).compact(session)
    assert any(SECRET in r.record for r in summarizer.requests)
