"""The last rung, `CutToFit` (`oversized-output-cut`): a tool output too large to send, the
newest included, is cut to its head and tail so the request fits, instead of every retry being
refused by the provider."""

from __future__ import annotations

import asyncio
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxfold.compactor import Compactor
from ctxfold.messages import Message, ToolCall
from ctxfold.messages.validity import validate
from ctxfold.pipeline import CutToFit, Pipeline
from ctxfold.pipeline.fit import FIT_PHRASE, cut_to
from ctxfold.pipeline.user_messages import SHORTENED_PHRASE
from ctxfold.session import Session
from ctxfold.storage import MemoryStore
from ctxfold.tokens import Budget, counter

COUNTER = counter("auto")
BUDGET = Budget(window=4_000)


def log_lines(n: int, tag: str = "app") -> str:
    """`n` distinct lines of a service log, the first and last of which are told apart."""
    lines = [
        f"2026-12-01T10:{i // 60 % 60:02d}:{i % 60:02d} {tag} worker-{i % 7} ok id={i}"
        for i in range(n)
    ]
    lines[0] = f"START of {tag}.log"
    lines[-1] = f"ERROR {tag}: disk full at /var/lib/{tag}/data (errno 28)"
    return "\n".join(lines)


def stuck_session(output: str, *, calls: int = 1) -> Session:
    """A task whose newest step is one assistant call (or `calls` parallel ones) answered with
    `output`: nothing older to clear, summarize or drop."""
    session = MemoryStore().session("s")
    tool_calls = [
        ToolCall(id=f"call_{k}", name="read_log", arguments=f'{{"path": "/var/log/{k}.log"}}')
        for k in range(calls)
    ]
    session.append(
        [
            Message("system", "You are an operations agent."),
            Message("user", "Find out why the service stopped."),
            Message("assistant", "", tool_calls=tool_calls),
            *(Message("tool", output, tool_call_id=c.id) for c in tool_calls),
        ]
    )
    return session


def tool_texts(session: Session) -> list[str]:
    return [m.text for m in session.messages() if m.role == "tool"]


def errors(session: Session) -> list[object]:
    return [p for p in validate(session.messages()) if p.severity == "error"]


@pytest.mark.guarantee("oversized-output-cut")
def test_an_output_larger_than_the_window_is_cut_to_fit_under_the_trigger_point() -> None:
    output = log_lines(1_500)
    session = stuck_session(output)
    compactor = Compactor(BUDGET, counter=COUNTER)
    assert compactor.estimate(session) > BUDGET.window
    report = compactor.compact(session)
    assert report.landed and report.strategies[-1].name == "cut_to_fit"
    assert compactor.estimate(session) <= BUDGET.trigger_tokens
    [text] = tool_texts(session)
    # Its beginning and its end, where a log's header and its error are, with one marker.
    assert text.startswith("START of app.log") and text.endswith("(errno 28)")
    assert text.count(FIT_PHRASE) == 1
    assert "call call_0" in text and "read_log(/var/log/0.log)" in text
    assert errors(session) == []
    # A mask: the log keeps the output whole, and recall by the call id gives it back.
    assert [e.data["message"]["content"] for e in session.events() if e.seq == 4] == [output]
    recalled = session.recall(ref="call_0", max_tokens=50_000)
    assert recalled.seqs == (4,) and recalled.cut == ()
    assert "app worker-0 ok id=700" in recalled.text  # from the middle the view no longer shows


@pytest.mark.guarantee("oversized-output-cut")
def test_overflow_recovery_cuts_the_newest_output_to_the_target() -> None:
    """Before the rung, a first and a second overflow both declined here: no retry could go."""
    session = stuck_session(log_lines(1_500))
    compactor = Compactor(BUDGET, counter=COUNTER)
    first = compactor.recover_from_overflow(session)
    assert first.landed and first.tokens_after <= BUDGET.target_tokens
    second = compactor.recover_from_overflow(session)
    assert second.landed and second.tokens_after <= first.tokens_after // 2 + 1
    [text] = tool_texts(session)
    assert text.startswith("START") and text.endswith("(errno 28)")
    assert errors(session) == []


@pytest.mark.guarantee("oversized-output-cut")
def test_an_output_that_fits_under_the_trigger_point_stays_whole() -> None:
    """Over the target but under the trigger point the request can be sent: the newest output
    is what the agent reads now, and it stays whole."""
    output = log_lines(110)
    session = stuck_session(output)
    compactor = Compactor(BUDGET, counter=COUNTER)
    before = compactor.estimate(session)
    assert BUDGET.target_tokens < before <= BUDGET.trigger_tokens
    report = compactor.compact(session)
    assert not report.landed
    assert tool_texts(session) == [output]
    assert any("cut_to_fit stopped: the view is within the ceiling" in n for n in report.notes)


@pytest.mark.guarantee("oversized-output-cut")
def test_parallel_outputs_are_cut_to_one_level_largest_first() -> None:
    session = MemoryStore().session("p")
    calls = [ToolCall(id=f"c{k}", name="cat", arguments=f'{{"path": "f{k}"}}') for k in range(3)]
    outputs = [log_lines(900, "big"), log_lines(600, "mid"), log_lines(12, "small")]
    session.append(
        [
            Message("user", "Compare the three logs."),
            Message("assistant", "", tool_calls=calls),
            *(Message("tool", o, tool_call_id=c.id) for o, c in zip(outputs, calls, strict=True)),
        ]
    )
    compactor = Compactor(BUDGET, counter=COUNTER)
    assert compactor.compact(session).landed
    big, mid, small = tool_texts(session)
    assert small == outputs[2]  # under the level: untouched
    assert FIT_PHRASE in big and FIT_PHRASE in mid
    sizes = [COUNTER.count_text(big), COUNTER.count_text(mid)]
    assert max(sizes) - min(sizes) < 0.2 * max(sizes)  # one level, not one output to nothing
    assert compactor.estimate(session) <= BUDGET.trigger_tokens
    assert errors(session) == []


@pytest.mark.guarantee("oversized-output-cut")
def test_an_output_the_application_pinned_is_never_cut() -> None:
    session = stuck_session(log_lines(1_500))
    [result] = [item for item in session.items() if item.message.role == "tool"]
    session.pin(result.id)
    report = Compactor(BUDGET, counter=COUNTER).compact(session)
    assert not report.landed
    assert FIT_PHRASE not in tool_texts(session)[0]


@pytest.mark.guarantee("oversized-output-cut")
def test_async_compaction_cuts_the_same_way() -> None:
    sync, other = stuck_session(log_lines(1_500)), stuck_session(log_lines(1_500))
    Compactor(BUDGET, counter=COUNTER).compact(sync)
    asyncio.run(Compactor(BUDGET, counter=COUNTER).acompact(other))
    assert tool_texts(sync) == tool_texts(other)


def test_the_default_ladder_ends_with_the_cut() -> None:
    assert Pipeline.default().strategies[-1].name == CutToFit.name


@settings(max_examples=150, deadline=None)
@given(
    text=st.text(alphabet=string.printable + "éλ中🙂", min_size=0, max_size=3_000),
    limit=st.integers(min_value=0, max_value=800),
)
def test_a_cut_is_within_its_limit_and_keeps_both_ends(text: str, limit: int) -> None:
    def marker(cut: int) -> str:
        return f"§{cut}§"  # "§" is not in the texts drawn: the marker is found unambiguously

    cut = cut_to(text, limit, COUNTER.count_text, marker)
    if COUNTER.count_text(text) <= limit:
        assert cut is None
        return
    assert cut is not None
    if cut == marker(len(text)):
        return  # the smallest there is: even a marker alone may not fit a tiny limit
    assert COUNTER.count_text(cut) <= limit
    before, told, after = cut.split("§")
    head = before[:-1] if before else ""  # joined to the marker by one line break
    tail = after[1:] if after else ""
    assert text.startswith(head) and text.endswith(tail)
    assert int(told) == len(text) - len(head) - len(tail) > 0


def pasted_session(lines: int) -> tuple[Session, str]:
    """A request that pastes a whole log: the user's own words, larger than the window."""
    request = "Why did the service stop? Here is the log:\n" + log_lines(lines)
    session = MemoryStore().session("u")
    session.append([Message("system", "You are an operations agent."), Message("user", request)])
    return session, request


@pytest.mark.guarantee("oversized-output-cut")
def test_a_request_larger_than_the_window_keeps_its_head_and_tail() -> None:
    """No request could ever send it whole; before the rung every compaction declined. It is
    cut to the window, not to the trigger point: the user's words give up only what the
    request cannot hold at all."""
    session, request = pasted_session(1_500)
    compactor = Compactor(BUDGET, counter=COUNTER)
    assert compactor.compact(session).landed
    assert BUDGET.trigger_tokens < compactor.estimate(session) <= BUDGET.window
    [shown] = [m.text for m in session.messages() if m.role == "user"]
    assert shown.startswith("Why did the service stop?") and shown.endswith("(errno 28)")
    assert SHORTENED_PHRASE in shown and "log item 2;" in shown
    recalled = session.recall(ref="log item 2", max_tokens=50_000)
    assert recalled.seqs == (2,) and "app worker-0 ok id=700" in recalled.text
    assert [e.data["message"]["content"] for e in session.events() if e.seq == 2] == [request]


@pytest.mark.guarantee("oversized-output-cut")
def test_the_users_words_are_cut_only_when_tool_output_cannot_make_room() -> None:
    request = "Compare these two logs, line by line:\n" + log_lines(120, "web")
    session = MemoryStore().session("b")
    call = ToolCall(id="c1", name="cat", arguments='{"path": "db.log"}')
    session.append(
        [
            Message("user", request),
            Message("assistant", "", tool_calls=[call]),
            Message("tool", log_lines(1_500, "db"), tool_call_id="c1"),
        ]
    )
    compactor = Compactor(BUDGET, counter=COUNTER)
    assert compactor.compact(session).landed
    user, _, tool = session.messages()
    assert user.text == request  # tool output alone made room
    assert FIT_PHRASE in tool.text
    assert compactor.estimate(session) <= BUDGET.trigger_tokens


@pytest.mark.guarantee("oversized-output-cut")
def test_a_request_within_the_window_stays_whole() -> None:
    """Over the trigger point but within the window the request can be sent (its reply has
    less room): the user's words stay whole."""
    session, request = pasted_session(130)
    compactor = Compactor(BUDGET, counter=COUNTER)
    assert BUDGET.trigger_tokens < compactor.estimate(session) <= BUDGET.window
    assert not compactor.compact(session).landed
    assert [m.text for m in session.messages() if m.role == "user"] == [request]


@pytest.mark.guarantee("oversized-output-cut")
def test_overflow_recovery_cuts_a_pasted_request() -> None:
    session, _ = pasted_session(1_500)
    report = Compactor(BUDGET, counter=COUNTER).recover_from_overflow(session)
    assert report.landed and report.tokens_after <= BUDGET.target_tokens
    assert errors(session) == []
