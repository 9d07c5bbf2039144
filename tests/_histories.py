"""Small hand-shaped agent histories for engine tests, sized for `FixedCounter` (a token a word).

Real transcripts live in ../shared/data and the demo generator makes large ones; these are for
tests that need exact, round token figures.
"""

from __future__ import annotations

import json

from ctxfold.events import COMPACTION, NewEvent
from ctxfold.messages import Message, ToolCall

SYSTEM_PROMPT = "You are a careful coding agent."


def words(n: int, tag: str) -> str:
    """`n` distinct words, `tag-0 tag-1 ...`: n tokens by FixedCounter."""
    return " ".join(f"{tag}-{i}" for i in range(n))


def step(call_id: str, output_words: int = 200, name: str = "bash") -> list[Message]:
    """One step: a call reading `src/<call_id>.py` and an output of `output_words` words."""
    arguments = json.dumps({"command": f"cat src/{call_id}.py"})
    return [
        Message("assistant", None, (ToolCall(call_id, name, arguments),)),
        Message("tool", words(output_words, call_id), tool_call_id=call_id),
    ]


def agent_history(
    turns: int = 4,
    steps: int = 2,
    output_words: int = 200,
    task_steps: int = 2,
    *,
    task: str = "Task {t}: fix the bug in src/mod{t}.py",
    request: str = "Now run the test suite and report.",
    step_ids: str = "t{t}{letter}",
) -> list[Message]:
    """A system prompt, `turns` finished turns of `steps` steps each, then the current request
    and `task_steps` steps of work on it."""
    messages = [Message("system", SYSTEM_PROMPT)]
    for t in range(turns):
        messages.append(Message("user", task.format(t=t)))
        for s in range(steps):
            call_id = step_ids.format(t=t, s=s, letter="abcdefghijklmnop"[s])
            messages += step(call_id, output_words)
        messages.append(Message("assistant", f"Done with task {t}."))
    messages.append(Message("user", request))
    for s in range(task_steps):
        messages += step(f"now{s}", output_words)
    return messages


def coding_conversation() -> list[Message]:
    """A short coding-agent exchange: a task, a failing test run, a fix, a second request and
    an edit. Eight messages, two tool calls (`c1`, `c2`)."""
    return [
        Message("system", "You are a coding agent."),
        Message("user", "Fix the failing test in tests/test_io.py"),
        Message("assistant", None, (ToolCall("c1", "bash", '{"cmd": "pytest -x"}'),)),
        Message("tool", "FAILED tests/test_io.py::test_read - KeyError: 'mode'", tool_call_id="c1"),
        Message("assistant", "The reader ignores the mode argument; patching src/io.py."),
        Message("user", "Also update the changelog."),
        Message("assistant", None, (ToolCall("c2", "edit", '{"path": "CHANGES.md"}'),)),
        Message("tool", "edited CHANGES.md", tool_call_id="c2"),
    ]


def summary_event(first: int, last: int, text: str = "Summary of earlier work.") -> NewEvent:
    """A compaction event written by hand: a summary standing for seqs `first`..`last`."""
    return NewEvent(
        COMPACTION,
        {
            "first": first,
            "last": last,
            "message": Message("user", text).to_dict(),
            "kind": "summary",
        },
    )
