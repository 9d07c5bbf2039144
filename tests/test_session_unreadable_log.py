"""A log that holds an event the session cannot read, and provider reports that must not make one.

An event written past the session's checks (a raw `store.append`, another program) is named at
every read, never skipped; an append made meanwhile lands once and says so; and the session's own
`record_usage` / `record_overflow` refuse a report the fold could not read before writing it.
Arguments of the wrong kind (what AsyncSession wraps, a counter) are refused at once, and break
nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxfold.errors import ConfigurationError, InvalidHistoryError, InvalidInputError
from ctxfold.events import Compaction, NewEvent, Usage
from ctxfold.messages import Message
from ctxfold.session import AsyncSession, Session
from ctxfold.storage import MemoryStore, SQLiteStore
from ctxfold.storage.base import StoreBase

BAD = NewEvent("message", {"message": {"role": "assistant", "content": 5}})
SAYS = r"session 'a', event 3 \(message\) cannot be read"


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest) -> Iterator[StoreBase]:
    with MemoryStore() if request.param == "memory" else SQLiteStore(":memory:") as opened:
        yield opened


def started(store: StoreBase) -> Session:
    session = store.session("a")
    session.append([Message("system", "S"), Message("user", "U")])
    return session


@pytest.mark.guarantee("unreadable-event-named")
def test_every_read_names_the_unreadable_event_and_none_reads_past_it(store: StoreBase) -> None:
    """A read that meets an unreadable event fails, and so does every read after it, in this
    session and in a new one: the projection never goes on without that event."""
    session = started(store)
    store.append("a", [BAD])
    for reader in (session, session, store.session("a"), store.session("a")):
        with pytest.raises(InvalidInputError, match=SAYS):
            reader.messages()
    with pytest.raises(InvalidInputError, match=SAYS):
        session.estimate()


@pytest.mark.guarantee("unreadable-event-named")
def test_an_append_after_an_unreadable_event_lands_once_and_is_not_reported_failed(
    store: StoreBase, caplog: pytest.LogCaptureFixture
) -> None:
    """An append made while another writer's unreadable event waits in the log is written and
    returned (a raise would invite a retry that writes it twice); a warning names both, and the
    next read names the bad event."""
    session = started(store)
    store.append("a", [BAD])
    with caplog.at_level(logging.WARNING, logger="ctxfold.session.session"):
        (event,) = session.append(Message("user", "after"))
    assert event.seq == 4
    assert [e.seq for e in store.read("a")] == [1, 2, 3, 4]
    assert "the append landed (seqs 4 to 4)" in caplog.text and "event 3" in caplog.text
    with pytest.raises(InvalidInputError, match=SAYS):
        session.messages()


@pytest.mark.guarantee("unreadable-event-named")
@pytest.mark.parametrize(
    ("call", "says"),
    [
        (lambda s: s.record_usage(True), "prompt_tokens"),
        (lambda s: s.record_usage(10, completion_tokens="x"), "completion_tokens"),
        (lambda s: s.record_usage(10, completion_tokens=-1), "completion_tokens"),
        (lambda s: s.record_usage(10, model=3), "model"),
        (lambda s: s.record_usage(10, after_seq="x"), "after_seq"),
        (lambda s: s.record_usage(10, after_seq=999), r"after_seq must be a seq .* \(0 to 2\)"),
        (lambda s: s.record_usage(10, after_seq=-1), "after_seq"),
        (lambda s: s.record_overflow(after_seq=999), "after_seq"),
        (lambda s: s.record_overflow(after_seq=True), "after_seq"),
    ],
)
def test_a_provider_report_the_fold_could_not_read_is_refused_before_it_is_written(
    store: StoreBase, call: object, says: str
) -> None:
    """A usage or overflow report with a wrong-typed, negative or out-of-log field is refused with
    InvalidInputError naming the field, nothing is written, and the session reads on."""
    session = started(store)
    with pytest.raises(InvalidInputError, match=says):
        call(session)  # type: ignore[operator]
    assert store.last_seq("a") == 2
    assert len(store.session("a").messages()) == 2


@pytest.mark.guarantee("unreadable-event-named")
def test_a_negative_usage_event_appended_raw_is_refused() -> None:
    """A usage event whose counts are negative is no report a provider makes: appended raw, it
    is refused before it is written, rather than pull every later estimate down."""
    session = started(MemoryStore())
    with pytest.raises(InvalidInputError, match="'completion_tokens' must be 0 or more"):
        session.append(NewEvent.of(Usage(2, 10, -100)))
    with pytest.raises(InvalidInputError, match="'prompt_tokens' must be 0 or more"):
        session.append(NewEvent("usage", {"after_seq": 2, "prompt_tokens": -5}))
    assert session.last_seq == 2


def test_pinned_reads_the_log_as_messages_does(tmp_path: Path) -> None:
    """`pinned` on a session opened fresh, and after another writer's unpin, says what the log
    says, without another read first."""
    path = tmp_path / "p.db"
    with SQLiteStore(path) as store:
        started(store).pin(2)
        with SQLiteStore(path) as fresh:
            assert fresh.session("a").pinned == frozenset({2})
        other = store.session("a")
        watcher = store.session("a")
        assert watcher.pinned == frozenset({2})
        other.unpin(2)
        assert watcher.pinned == frozenset()


@pytest.mark.parametrize("wrapped", [None, "a", MemoryStore()])
def test_async_session_wraps_a_session_and_says_what_to_pass(wrapped: object) -> None:
    """AsyncSession given anything but a Session is refused at once, with what to pass."""
    with pytest.raises(InvalidInputError, match=r"AsyncSession wraps a Session.*store\.session"):
        AsyncSession(wrapped)  # type: ignore[arg-type]


def test_async_session_of_an_async_session_says_it_is_one_already() -> None:
    """Wrapping twice, whose appends would be coroutines never awaited (nothing written), is
    refused with a hint."""
    once = AsyncSession(MemoryStore().session("a"))
    with pytest.raises(InvalidInputError, match="it is one already"):
        AsyncSession(once)  # type: ignore[arg-type]


def test_a_counter_is_an_object_or_a_name_and_a_wrong_one_breaks_nothing() -> None:
    """`store.session(id, counter=...)` and `estimate(counter)` take a counter or a name that
    `ctxfold.tokens.counter` reads; anything else is refused at once and the session keeps
    counting with what it had."""
    store = MemoryStore()
    session = store.session("a", counter="heuristic")
    session.append([Message("system", "S"), Message("user", "hello there")])
    before = session.estimate()
    assert session.tally().counter.name.startswith("heuristic")
    with pytest.raises(ConfigurationError, match=r"counter must be a TokenCounter .* not 5"):
        session.estimate(5)  # type: ignore[arg-type]
    assert session.estimate() == before
    by_name = session.tally("heuristic")
    assert session.tally("heuristic") is by_name  # one counter per name: the tally is kept
    with pytest.raises(ConfigurationError, match="counter must be a TokenCounter"):
        store.session("b", counter=object())  # type: ignore[arg-type]


@pytest.mark.parametrize("content", [None, "", "   "])
def test_a_compaction_that_puts_no_text_in_place_is_refused(content: str | None) -> None:
    """A compaction event made by hand whose message has no text (which a provider refuses) is
    refused when it is appended, and nothing is written."""
    session = started(MemoryStore())
    session.append([Message("assistant", "A"), Message("user", "U2")])
    with pytest.raises(InvalidHistoryError, match="a message with text in place"):
        session.append(NewEvent.of(Compaction(2, 3, Message("user", content))))
    assert session.last_seq == 4
