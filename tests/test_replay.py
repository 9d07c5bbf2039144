"""`ctxfold.replay.replay`: a transcript played into a session as a live agent would."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ctxfold.compactor import Compactor
from ctxfold.errors import BudgetError, InvalidHistoryError
from ctxfold.events import MESSAGE
from ctxfold.messages import Message, validate
from ctxfold.replay import (
    Request,
    compact_transcript,
    fresh_session_id,
    replay,
    replay_transcript,
)
from ctxfold.storage import MemoryStore, SQLiteStore
from ctxfold.testing.transcripts import generate
from ctxfold.tokens import Budget, counter

COUNTER = counter("auto")


def _replay(messages: list[Message], window: int, **budget: object):  # type: ignore[no-untyped-def]
    session = MemoryStore().session("r", counter=COUNTER)
    compactor = Compactor(Budget(window=window, **budget), counter=COUNTER)  # type: ignore[arg-type]
    return session, replay(session, messages, compactor, counter=COUNTER)


def test_one_request_before_each_assistant_message() -> None:
    """The model is asked once per assistant message, after the tool results it answers are in."""
    messages = generate(seed=1, steps=20)
    _, result = _replay(messages, 200_000)
    assistants = [i for i, m in enumerate(messages) if m.role == "assistant"]
    assert [r.message for r in result.requests] == assistants
    assert [r.turn for r in result.requests] == list(range(1, len(assistants) + 1))


def test_a_transcript_ending_on_a_tool_result_still_gets_its_last_request() -> None:
    """A transcript that stops before the model answered counts the request it was waiting for."""
    messages = generate(seed=1, steps=5)[:-1]
    assert messages[-1].role == "tool"
    _, result = _replay(messages, 200_000)
    assert result.requests[-1].message == len(messages)


def test_without_compaction_every_request_extends_the_previous_one() -> None:
    """Under the trigger nothing is rewritten: each request starts with the whole previous one,
    no summarizer is called, and the last request is the whole transcript."""
    messages = generate(seed=2, steps=30)
    _, result = _replay(messages, 500_000)
    assert result.compactions == () and result.summarizer_calls == 0
    for previous, request in zip(result.requests, result.requests[1:], strict=False):
        assert request.prefix_tokens == previous.request_tokens
        assert request.request_tokens > previous.request_tokens
    assert result.requests[0].prefix_tokens == 0
    assert result.reused_tokens == sum(r.request_tokens for r in result.requests[:-1])
    assert 0 < result.cache_reuse < 1


def test_request_sizes_from_the_tally_are_those_a_recount_gives() -> None:
    """Sized from the session's tally (the compactor's own counter) or counted afresh (another
    counter object of the same encoding), every request and the transcript total come out the
    same, compactions or not."""
    messages = generate(seed=6, steps=30)
    for window in (10_000, 500_000):
        compactor = Compactor(Budget(window=window), counter=COUNTER)
        tallied = replay(MemoryStore().session("t", counter=COUNTER), messages, compactor)
        compactor = Compactor(Budget(window=window), counter=COUNTER)
        session = MemoryStore().session("c", counter=COUNTER)
        recounted = replay(session, messages, compactor, counter=counter("auto"))
        assert (window > 100_000) == (tallied.compactions == ())
        assert tallied.requests == recounted.requests
        assert tallied.original_tokens == recounted.original_tokens


def test_each_request_is_a_request_value() -> None:
    """The requests a replay reports are `Request` values like any other: equal to the one the
    constructor builds from the same fields, hashable, and frozen."""
    _, result = _replay(generate(seed=2, steps=5), 500_000)
    for request in result.requests:
        built = Request(**request.to_dict())
        assert request == built and hash(request) == hash(built) and repr(request) == repr(built)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.requests[0].tokens = 0  # type: ignore[misc]


def test_a_small_window_compacts_several_times_and_keeps_every_request_inside_it() -> None:
    """At 16,000 tokens the demo session compacts several times; every request fits the window,
    each compaction ran at the trigger, and the request after it shares less than a full prefix."""
    messages = generate(seed=0, steps=60)
    session, result = _replay(messages, 16_000)
    assert result.original_tokens > 2 * 16_000
    assert len(result.compactions) >= 3
    assert all(r.tokens <= result.window for r in result.requests)
    for c in result.compactions:
        request = result.requests[c.turn - 1]
        assert request.compaction is not None
        assert request.tokens_before >= result.trigger
        assert request.tokens < request.tokens_before
        assert request.prefix_tokens < result.requests[c.turn - 2].request_tokens
    assert result.summarizer_calls == sum(c.report.summarizer_calls for c in result.compactions)
    assert [p for p in validate(session.messages()) if p.severity == "error"] == []


@pytest.mark.guarantee("log-keeps-originals")
def test_the_log_keeps_every_replayed_message() -> None:
    """Compactions are events beside the originals: every transcript message is still in the log."""
    messages = generate(seed=3, steps=40)
    session, result = _replay(messages, 12_000)
    assert result.compactions
    logged = [e.message for e in session.events() if e.type == MESSAGE]
    assert logged == messages


@pytest.mark.guarantee("reopen-same-projection")
def test_a_replay_into_sqlite_reopens_to_the_same_projection(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Replayed into a SQLite file, the session reads back the same from a new store object."""
    messages = generate(seed=4, steps=40)
    path = tmp_path / "replay.db"
    with SQLiteStore(str(path)) as store:
        session = store.session("r", counter=COUNTER)
        replay(session, messages, Compactor(Budget(window=12_000), counter=COUNTER))
        projected = session.messages()
    with SQLiteStore(str(path)) as store:
        assert store.session("r").messages() == projected


def test_progress_is_told_about_every_message() -> None:
    """The progress callback hears of each appended message, so a bar reaches its end."""
    messages = generate(seed=5, steps=10)
    seen: list[int] = []
    session = MemoryStore().session("r")
    replay(session, messages, Compactor(Budget(window=100_000)), progress=seen.append)
    assert sum(seen) == len(messages)


def test_a_compactor_without_a_budget_is_refused() -> None:
    """Replaying needs a trigger; a compactor with no budget is a clear error, not a silent run."""
    with pytest.raises(BudgetError, match="budget"):
        replay(MemoryStore().session("r"), generate(steps=3), Compactor(None))


def test_the_result_is_json_ready() -> None:
    """`to_dict` has the documented keys and survives json.dumps."""
    _, result = _replay(generate(seed=6, steps=30), 10_000)
    data = json.loads(json.dumps(result.to_dict()))
    for key in ("window", "trigger", "target", "requests", "compactions", "summarizer_calls",
                "cache_reuse", "reused_tokens", "requested_tokens", "turns"):  # fmt: skip
        assert key in data
    assert len(data["turns"]) == data["requests"] == len(result.requests)
    assert data["compactions"][0]["tokens_before"] == result.compactions[0].report.tokens_before


@pytest.mark.slow
def test_a_long_session_replays_within_the_window() -> None:
    """A 2,000-step session (over a million characters) replays with every request in the window."""
    messages = generate(seed=7, steps=2000)
    _, result = _replay(messages, 32_000)
    assert len(result.requests) == 2001
    assert result.peak_tokens <= 32_000
    assert len(result.compactions) > 20


def test_a_system_prompt_larger_than_the_window_is_refused_before_anything_lands() -> None:
    """No compaction can shrink the system prompt: replay refuses at once, naming both sizes,
    and the session stays empty."""
    messages = [Message("system", "rule " * 3_000), *generate(seed=2, steps=3)[1:]]
    session = MemoryStore().session("r")
    with pytest.raises(BudgetError, match=r"system prompt alone takes [\d,]+ tokens.*2,000"):
        replay(session, messages, Compactor(Budget(window=2_000)))
    assert session.events() == []


def test_replay_transcript_never_appends_to_an_earlier_session(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """replay_transcript takes the name given, then name-2, name-3...: each replay has a session
    of its own, holding exactly the transcript."""
    messages = generate(seed=3, steps=8)
    with SQLiteStore(str(tmp_path / "r.db")) as store:
        for _ in range(3):
            replay_transcript(messages, Budget(window=100_000), store=store, name="run")
        assert store.sessions() == ["run", "run-2", "run-3"]
        assert all(store.last_seq(s) == len(messages) for s in store.sessions())
    assert fresh_session_id(MemoryStore(), "run") == "run"


def test_compact_transcript_refuses_what_no_compaction_can_make_fit() -> None:
    """When the messages that must stay exceed the window, compact_transcript raises BudgetError
    naming the sizes, instead of returning a history that cannot be sent."""
    messages = [Message("system", "rule " * 3_000), Message("user", "tidy the repo"),
                Message("assistant", "done")]  # fmt: skip
    with pytest.raises(BudgetError, match=r"must stay.*2,000-token window"):
        compact_transcript(messages, Budget(window=2_000), counter=COUNTER)


@pytest.mark.guarantee("history-always-valid")
def test_compact_transcript_never_returns_a_history_the_provider_rejects() -> None:
    """The result is checked against the provider's rules: a history Anthropic would reject
    raises InvalidHistoryError rather than being returned."""
    messages = [Message("assistant", "hello"), Message("user", "hi")]
    done = compact_transcript(messages, Budget(window=8_000), counter=COUNTER)
    assert done.messages == messages
    with pytest.raises(InvalidHistoryError, match=r"anthropic.*role-order"):
        compact_transcript(messages, Budget(window=8_000), provider="anthropic", counter=COUNTER)
