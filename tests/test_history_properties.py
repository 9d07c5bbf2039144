"""Property: any sequence of appends and compactions projects to a valid history, and reopening
the store gives the identical projection (`reopen-same-projection`)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxfold.compactor import Compactor
from ctxfold.events import MESSAGE
from ctxfold.messages import Message, ToolCall
from ctxfold.messages.validity import validate
from ctxfold.pipeline import ClearToolResults, Pipeline, SlidingWindow, Summarize
from ctxfold.session import Session
from ctxfold.storage import SQLiteStore
from ctxfold.testing.counters import FixedCounter
from ctxfold.tokens import Budget

COUNTER = FixedCounter()
STRATEGIES = {
    "clear": ClearToolResults,
    "window": SlidingWindow,
    "summarize": Summarize,
}

user_op = st.tuples(st.just("user"), st.integers(1, 60))
step_op = st.tuples(st.just("step"), st.lists(st.integers(0, 150), min_size=1, max_size=3))
pending_op = st.tuples(st.just("pending"), st.integers(1, 3))
compact_op = st.tuples(
    st.just("compact"),
    st.tuples(
        st.integers(20, 600),  # target, in tokens
        st.permutations(sorted(STRATEGIES)).flatmap(
            lambda order: st.integers(1, 3).map(lambda n: tuple(order[:n]))
        ),
        st.sampled_from([0, 100, 400]),  # keep_recent_tokens
    ),
)
operations = st.lists(
    st.one_of(user_op, step_op, step_op, step_op, pending_op, compact_op),
    min_size=1,
    max_size=30,
)


class Agent:
    """Turns operations into appends, answering a pending call before anything else follows."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.calls = 0
        self.pending: list[ToolCall] = []

    def call(self) -> ToolCall:
        self.calls += 1
        arguments = json.dumps({"command": f"cat src/file{self.calls}.py"})
        return ToolCall(f"call_{self.calls}", "bash", arguments)

    def answer_pending(self) -> None:
        if self.pending:
            self.session.append([self.result(c, 20) for c in self.pending])
            self.pending = []

    @staticmethod
    def result(call: ToolCall, size: int) -> Message:
        output = " ".join(f"{call.id}-line{i}" for i in range(size)) or "ok"
        return Message("tool", output, tool_call_id=call.id)

    def apply(self, op: str, arg: Any) -> None:
        if op == "compact":
            return
        self.answer_pending()
        if op == "user":
            self.session.append(Message("user", " ".join(f"ask{i}" for i in range(arg))))
        elif op == "step":
            calls = tuple(self.call() for _ in arg)
            self.session.append(
                [
                    Message("assistant", "Looking at the files.", calls),
                    *(self.result(c, size) for c, size in zip(calls, arg, strict=True)),
                ]
            )
        elif op == "pending":
            self.pending = [self.call() for _ in range(arg)]
            self.session.append(Message("assistant", None, tuple(self.pending)))


def errors(messages: list[Message]) -> list[str]:
    return [str(p) for p in validate(messages) if p.severity == "error"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations)
@pytest.mark.guarantee("reopen-same-projection")
def test_any_appends_and_compactions_project_validly_and_reopen_identically(
    ops: list[tuple[str, Any]],
) -> None:
    """Appends of user messages, steps of one to three parallel calls and pending calls,
    interleaved with compactions by any order of the three strategies at any small target, always
    project to a history with no error-severity problem; every original stays in the log; and a
    fresh store on the same file projects the identical history (`reopen-same-projection`)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "log.db"
        store = SQLiteStore(path)
        session = store.session("p")
        session.append(
            [Message("system", "You are a careful agent."), Message("user", "Start the task.")]
        )
        agent = Agent(session)
        for op, arg in ops:
            if op == "compact":
                target, names, keep_recent = arg
                compactor = Compactor(
                    Budget(window=100_000, keep_recent_tokens=keep_recent),
                    pipeline=Pipeline([STRATEGIES[n]() for n in names]),
                    counter=COUNTER,
                )
                report = compactor.compact(session, target=target)
                assert report.error is None
            else:
                agent.apply(op, arg)
            assert errors(session.messages()) == [], (op, arg)
        projected = session.items()
        originals = [e for e in session.events() if e.type == MESSAGE]
        store.close()

        with SQLiteStore(path) as reopened:
            again = reopened.session("p")
            assert again.items() == projected
            assert [e for e in again.events() if e.type == MESSAGE] == originals
