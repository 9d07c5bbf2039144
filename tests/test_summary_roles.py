"""Summaries and notes in every role are accepted by every provider: wherever a summary lands
(first after the system prompt, or after the task), the projection passes `validate` for OpenAI
and Anthropic, and both adapters send it and read it back as ctxfold's own summary."""

from __future__ import annotations

from typing import Any

import pytest

from ctxfold.compactor import Compactor
from ctxfold.messages import (
    Message,
    from_anthropic,
    from_openai,
    to_anthropic,
    to_openai,
    validate,
)
from ctxfold.messages.frames import frame_kind
from ctxfold.pipeline import Pipeline, SlidingWindow, Summarize
from ctxfold.storage import MemoryStore
from ctxfold.testing.counters import FixedCounter
from ctxfold.testing.doubles import FunctionSummarizer
from ctxfold.tokens import Budget
from tests._histories import agent_history

COUNTER = FixedCounter()
SHORT = "## Objective\n- fix the bugs\n## Work done\n- read the modules"
ROLES = ["user", "assistant", "system"]
PLACES = {
    # Finished turns before the task: the first summary lands right after the system prompt.
    "first": lambda: agent_history(3, output_words=150, task_steps=3),
    # One long task: the summary of its old steps lands after the user's request.
    "after-task": lambda: agent_history(0, output_words=300, task_steps=8),
}


def compacted(role: str, place: str, pipeline: Pipeline | None = None) -> list[Message]:
    session = MemoryStore().session("s")
    session.append(PLACES[place]())
    compactor = Compactor(
        # No protection for the user's words: the first turns are summarized whole, so that a
        # summary lands right after the system prompt.
        Budget(window=3000, keep_recent_tokens=0, keep_user_tokens=0),
        pipeline=pipeline or Pipeline([Summarize()]),
        summarizer=FunctionSummarizer.returning(SHORT),
        counter=COUNTER,
        summary_role=role,  # type: ignore[arg-type]
    )
    assert compactor.compact(session).landed
    return session.messages()


def errors(messages: list[Message], provider: str) -> list[str]:
    return [str(p) for p in validate(messages, provider) if p.severity == "error"]  # type: ignore[arg-type]


@pytest.mark.parametrize("place", list(PLACES))
@pytest.mark.parametrize("role", ROLES)
@pytest.mark.guarantee("summary-roles-accepted")
def test_every_summary_role_validates_for_every_provider(role: str, place: str) -> None:
    """The projection passes the validity checker for OpenAI and for Anthropic."""
    messages = compacted(role, place)
    assert any(frame_kind(m) == "summary" and m.role == role for m in messages)
    assert errors(messages, "openai") == []
    assert errors(messages, "anthropic") == []


@pytest.mark.parametrize("place", list(PLACES))
@pytest.mark.parametrize("role", ROLES)
@pytest.mark.guarantee("summary-roles-accepted")
def test_the_anthropic_adapter_sends_every_summary_role(role: str, place: str) -> None:
    """`to_anthropic` accepts the projection: the system parameter holds only the system prompt,
    a summary is never a system message after the conversation started, the first message is
    from the user; read back, the summary is still recognised as one."""
    messages = compacted(role, place)
    system, rows = to_anthropic(messages)
    assert system == messages[0].text
    assert rows[0]["role"] == "user"
    back = from_anthropic(rows, system)
    assert [frame_kind(m) for m in back].count("summary") == 1
    assert errors(back, "anthropic") == []


@pytest.mark.parametrize("place", list(PLACES))
@pytest.mark.parametrize("role", ROLES)
@pytest.mark.guarantee("summary-roles-accepted")
def test_the_openai_adapter_keeps_the_summary_role(role: str, place: str) -> None:
    """OpenAI takes every role anywhere: the summary goes in the role asked for and reads back
    as the same messages."""
    messages = compacted(role, place)
    rows: list[dict[str, Any]] = to_openai(messages)
    assert any(r["role"] == role and str(r["content"]).startswith("[ctxfold") for r in rows)
    assert from_openai(rows) == messages


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.guarantee("summary-roles-accepted")
def test_a_note_in_every_role_is_accepted_too(role: str) -> None:
    """A sliding-window note is placed like a summary."""
    messages = compacted(role, "first", Pipeline([SlidingWindow()]))
    assert any(frame_kind(m) == "note" for m in messages)
    assert errors(messages, "anthropic") == []
    system, rows = to_anthropic(messages)
    assert system == messages[0].text and rows[0]["role"] == "user"


def test_a_real_system_message_after_the_start_is_still_refused_for_anthropic() -> None:
    """Only ctxfold's own frames are moved; an application's late system message is still an
    error the validator reports and the adapter refuses."""
    messages = [
        Message("system", "Be brief."),
        Message("user", "hi"),
        Message("system", "New rule: answer in French."),
    ]
    assert [p.code for p in validate(messages, "anthropic")] == ["system-not-first"]
    with pytest.raises(Exception, match="system message after the conversation started"):
        to_anthropic(messages)
