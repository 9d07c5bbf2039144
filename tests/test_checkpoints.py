"""Checkpoints: a new process starts from the store's checkpoint of a session and folds only what
came after it; the checkpoint is derived data, so losing or breaking it changes no result.

`Recording` (from test_count_once) shows what was counted; a wrapper around `store.stream`
shows what was read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ctxfold.compactor import Compactor
from ctxfold.events import COMPACTION, Event, NewEvent, Retraction
from ctxfold.messages import Message
from ctxfold.pipeline import ClearToolResults, Pipeline, Summarize
from ctxfold.session import Session
from ctxfold.session.checkpoint import FORMAT
from ctxfold.storage import SQLiteStore
from ctxfold.storage.base import StoreBase
from ctxfold.testing.counters import FixedCounter
from ctxfold.tokens import Budget, count_messages
from tests._histories import agent_history, step
from tests.test_count_once import Recording

T = TypeVar("T")

SHORT = "## Objective\n- fix the bugs\n## Work done\n- read the modules"


def build(path: Path, *, turns: int = 5) -> dict[str, Any]:
    """A compacted, pinned, anchored session in a SQLite file; returns what it projects."""
    with SQLiteStore(path) as store:
        session = store.session("cp", counter=Recording())
        session.append(agent_history(turns=turns, output_words=120))
        compactor = Compactor(
            # The user's words unprotected: the short old turns are summarized whole.
            Budget(window=3000, keep_recent_tokens=0, keep_user_tokens=0),
            Pipeline([ClearToolResults(min_tokens=50, keep_tail=False), Summarize()]),
            summarizer=lambda request: SHORT,
            counter=session.tally().counter,
        )
        assert compactor.compact(session, target=600).landed
        session.append(step("after", 40))
        session.pin(session.items()[-2].id)
        session.record_usage(900)
        session.append(Message("user", "and the docs?"))
        session.record_overflow()
        return seen(session)


def seen(session: Session) -> dict[str, Any]:
    return {
        "messages": list(session.messages()),
        "items": list(session.items()),
        "pinned": session.pinned,
        "estimate": session.estimate(),
        "overflows": session.overflows(),
        "last_seq": session.last_seq,
    }


class Reads:
    """Counts the events a store's `stream`, `stream_data` and `_read_text_page` hand out."""

    def __init__(self, store: StoreBase) -> None:
        self.count = 0
        original = store.stream
        original_data = store.stream_data

        def stream(session_id: str, after: int = 0) -> Iterator[Event]:
            for event in original(session_id, after):
                self.count += 1
                yield event

        def stream_data(session_id: str, after: int = 0) -> Iterator[tuple[int, str, Any]]:
            for row in original_data(session_id, after):
                self.count += 1
                yield row

        original_text = store._read_text_page

        def read_text_page(
            session_id: str, after: int, limit: int | None
        ) -> list[tuple[int, str, str | bytes]] | None:
            page = original_text(session_id, after, limit)
            self.count += len(page or ())
            return page

        store.stream = stream  # type: ignore[method-assign]
        store.stream_data = stream_data  # type: ignore[method-assign]
        store._read_text_page = read_text_page  # type: ignore[method-assign]


def reopened(path: Path, counter: Any = None) -> tuple[dict[str, Any], Recording, int]:
    counter = counter or Recording()
    with SQLiteStore(path) as store:
        reads = Reads(store)
        session = store.session("cp", counter=counter)
        return seen(session), counter, reads.count


@pytest.mark.guarantee("checkpoints-are-derived")
def test_a_new_process_folds_only_what_came_after_the_checkpoint(tmp_path: Path) -> None:
    """Reopened, the session reads the checkpoint, the few events it refers to and the later
    ones, and counts nothing it had counted already: same projection, pins, usage figure and
    overflows as the session that wrote it."""
    path = tmp_path / "cp.db"
    before = build(path, turns=300)  # more than a page of events before the kept tail
    after, counter, read = reopened(path)
    assert after == before
    assert read < before["last_seq"] // 2
    with SQLiteStore(path) as store:
        (at, _) = store.load_snapshot("cp")  # type: ignore[misc]
        later = [e.message.to_json() for e in store.read("cp", after=at) if e.type == "message"]
    assert 0 < at < before["last_seq"]
    assert set(counter.seen) == set(later)  # only what came after the checkpoint is counted


@pytest.mark.guarantee("checkpoints-are-derived")
def test_checkpoints_are_written_at_compactions_and_every_n_events(tmp_path: Path) -> None:
    """A compaction leaves a checkpoint at its seq; so does every `checkpoint_every` events."""
    with SQLiteStore(tmp_path / "n.db") as store:
        session = store.session("n", checkpoint_every=5)
        # A request, then the agent's replies: what a summary may stand for.
        said = [Message("assistant" if i else "user", f"m{i} " + "word " * 60) for i in range(6)]
        session.append(said[:3])
        assert store.load_snapshot("n") is None
        session.append(said[3:])
        assert store.load_snapshot("n") is not None
        assert store.load_snapshot("n")[0] == 6  # type: ignore[index]
        Compactor(None, Pipeline([Summarize()]), summarizer=lambda r: SHORT).compact(
            session, target=5
        )
        (seq, _) = store.load_snapshot("n")  # type: ignore[misc]
        assert seq == session.last_seq and session.events()[-1].type == COMPACTION
        quiet = store.session("q", checkpoint_every=None)
        quiet.append([Message("user", f"m{i}") for i in range(2000)])
        assert store.load_snapshot("q") is None


def corrupt(store: SQLiteStore, kind: str) -> None:
    found = store.load_snapshot("cp")
    assert found is not None
    seq, data = found
    raw = json.loads(data)
    if kind == "not json":
        store.save_snapshot("cp", seq, data[: len(data) // 2])
    elif kind == "older format":
        store.save_snapshot("cp", seq, json.dumps({**raw, "format": FORMAT - 1}))
    elif kind == "other counter":
        store.save_snapshot("cp", seq, json.dumps({**raw, "counter": "another counter"}))
    elif kind == "wrong counts, other counter":
        items = [
            [i[0], [1] * len(i[1]) if isinstance(i[1], list) else 1, *i[2:]] for i in raw["items"]
        ]
        store.save_snapshot("cp", seq, json.dumps({**raw, "items": items, "counter": "x"}))
    elif kind == "seq beyond the log":
        # The public call refuses this; a log restored from an older backup could still leave it.
        store._save_snapshot("cp", store.last_seq("cp") + 5, json.dumps({**raw, "seq": seq + 5}))
    elif kind == "reference to a non-message":
        compaction = next(e.seq for e in store.read("cp") if e.type == COMPACTION)
        items = [[compaction, None], *raw["items"]]
        store.save_snapshot("cp", seq, json.dumps({**raw, "items": items}))
    elif kind == "reference beyond its seq":
        later = next(e.seq for e in store.read("cp", after=seq) if e.type == "message")
        store.save_snapshot("cp", seq, json.dumps({**raw, "items": [*raw["items"], [later, 5]]}))
    elif kind == "reference to seq 0":
        store.save_snapshot("cp", seq, json.dumps({**raw, "items": [[0, 5], *raw["items"]]}))
    elif kind == "same reference twice":
        first = next(i for i in raw["items"] if len(i) == 2)
        at = raw["items"].index(first)
        items = [*raw["items"][: at + 1], first, *raw["items"][at + 1 :]]
        store.save_snapshot("cp", seq, json.dumps({**raw, "items": items}))
    elif kind == "items out of order":
        store.save_snapshot("cp", seq, json.dumps({**raw, "items": raw["items"][::-1]}))
    elif kind == "not an object":
        store.save_snapshot("cp", seq, "[1, 2, 3]")
    elif kind == "nested too deep":
        store.save_snapshot("cp", seq, "[" * 100_000 + "]" * 100_000)
    elif kind == "deleted":
        store.drop_snapshots("cp")
    else:
        raise AssertionError(kind)


@pytest.mark.guarantee("checkpoints-are-derived")
@pytest.mark.parametrize(
    "kind",
    [
        "deleted",
        "not json",
        "not an object",
        "nested too deep",
        "older format",
        "other counter",
        "wrong counts, other counter",
        "seq beyond the log",
        "reference to a non-message",
        "reference beyond its seq",
        "reference to seq 0",
        "same reference twice",
        "items out of order",
    ],
)
def test_a_lost_or_broken_checkpoint_changes_no_result(tmp_path: Path, kind: str) -> None:
    """Whatever is wrong with the checkpoint, the reopened session projects, pins, counts and
    estimates exactly as the session that wrote it."""
    path = tmp_path / "cp.db"
    before = build(path)
    with SQLiteStore(path) as store:
        corrupt(store, kind)
    after, _, _ = reopened(path)
    assert after == before


@pytest.mark.guarantee("checkpoints-are-derived")
def test_a_checkpoint_counted_by_another_counter_is_counted_again(tmp_path: Path) -> None:
    """A new process with a counter of another name keeps the projection but counts every item
    itself; its estimate is its own counter's."""
    path = tmp_path / "cp.db"
    before = build(path)
    other = Recording(name="another counter")
    after, counter, _ = reopened(path, other)
    assert after["messages"] == before["messages"]
    assert len(counter.seen) >= len(after["messages"]) - 1
    with SQLiteStore(path) as store:
        session = store.session("cp", counter=FixedCounter())
        session.append(NewEvent.of(Retraction(session.items()[-1].id)))
        assert session.estimate() == count_messages(FixedCounter(), session.messages())


@pytest.mark.guarantee("checkpoints-are-derived")
def test_later_edits_fold_over_a_checkpoint(tmp_path: Path) -> None:
    """After a reopen from a checkpoint, a retraction and further appends project as in a
    session that never had one."""
    build(tmp_path / "cp.db")
    (tmp_path / "copy.db").write_bytes((tmp_path / "cp.db").read_bytes())
    results = []
    for use_checkpoint in (True, False):
        with SQLiteStore(tmp_path / ("cp.db" if use_checkpoint else "copy.db")) as store:
            if not use_checkpoint:
                store.drop_snapshots("cp")
            session = store.session("cp", checkpoint_every=None)
            results.append(seen(session))
            session.append(NewEvent.of(Retraction(session.items()[-1].id)))
            session.append(Message("user", f"again {use_checkpoint}"))
            results.append([m.text for m in session.messages()[:-1]])
    assert results[0] == results[2] and results[1] == results[3]


@pytest.mark.guarantee("checkpoints-are-derived")
def test_a_checkpoint_written_from_the_last_one_is_the_checkpoint_written_afresh() -> None:
    """The session's encoder reuses the items it encoded last time while the projection only
    grew; after each kind of change (appends, a tally attached, a compaction, a mask, a pin,
    usage, a retraction, a reset) its text is exactly what encoding the state afresh gives."""
    from ctxfold.events import Mask, MaskedItem, Reset
    from ctxfold.session.checkpoint import Encoder, encode
    from ctxfold.storage import MemoryStore

    session = MemoryStore().session("e", checkpoint_every=None)
    encoder = Encoder()
    texts: list[str] = []

    def same() -> None:
        state = session._state
        text = encoder.encode(state)
        assert text == encode(state)
        assert json.loads(text)["seq"] == session.last_seq
        texts.append(text)

    history = agent_history(turns=4, output_words=30)
    session.append(history[:5])
    same()
    session.append(history[5:9])
    same()
    session.tally()  # a tally attached: every item now has a count
    same()
    session.append(history[9:])
    same()
    items = session.items()
    session.append(
        NewEvent(
            COMPACTION,
            {
                "first": items[1].id,
                "last": items[6].id,
                "message": Message("user", SHORT).to_dict(),
                "kind": "summary",
            },
        )
    )
    same()
    result = next(i for i in session.items() if i.message.role == "tool")
    session.append(NewEvent.of(Mask((MaskedItem(result.id, "[cleared]"),))))
    same()
    session.pin(session.items()[-1].id)
    session.record_usage(500)
    same()
    session.append(step("late", 10))
    same()
    session.append(NewEvent.of(Retraction(session.items()[-2].id)))
    same()
    session.append(NewEvent.of(Reset()))
    session.append(Message("user", "start over"))
    same()
    assert len(set(texts)) == len(texts)


@pytest.mark.guarantee("checkpoints-are-derived")
def test_recorded_counts_stand_only_for_items_still_projected(tmp_path: Path) -> None:
    """A checkpoint's counts are taken for the items still projected and no others: after
    another writer retracts the newest item and appends a longer one, a reopened session's
    first estimate counts the new message, as a session folding the log from the start does."""
    path = tmp_path / "r.db"
    with SQLiteStore(path) as store:
        session = store.session("r", counter=FixedCounter(), checkpoint_every=1)
        session.append([Message("user", "one two three"), Message("assistant", "four")])
        session.estimate()  # from here on, each checkpoint records every item's count
        session.append(Message("user", "five"))
    with SQLiteStore(path) as store:
        writer = store.session("r", checkpoint_every=None)
        writer.append(NewEvent.of(Retraction(writer.items()[-1].id)))
        writer.append(Message("user", "a longer message than the one it stands in for"))

    def kept(store: SQLiteStore) -> None:
        entries = json.loads(store.load_snapshot("r")[1])["items"]  # type: ignore[index]
        assert sum(len(e[1]) if isinstance(e[1], list) else 1 for e in entries) == 3

    def first_estimate(session: Session) -> int:
        estimate = session.estimate()
        assert estimate == count_messages(FixedCounter(), session.messages())
        return estimate

    with_checkpoint, without = _with_and_without_checkpoint(path, "r", kept, first_estimate)
    assert with_checkpoint == without


@pytest.mark.guarantee("checkpoints-are-derived")
def test_a_checkpoint_anchored_to_a_report_estimates_as_the_log_does(tmp_path: Path) -> None:
    """A checkpoint holding every item's count and a provider report, with messages after the
    report, gives the first estimate of a session folding the log from the start: the report
    plus what came after it, and the counted total beside it."""
    path = tmp_path / "a.db"
    with SQLiteStore(path) as store:
        session = store.session("a", counter=FixedCounter(), checkpoint_every=1)
        session.append([Message("user", "one two three"), Message("assistant", "four five")])
        session.estimate()
        session.record_usage(40)
        session.append([Message("user", "six seven eight nine"), Message("assistant", "ten")])
        wrote = session.estimate(), session.tally().total
        after_report = sum(FixedCounter().count_message(m) for m in session.messages()[2:])

    def kept(store: SQLiteStore) -> None:
        (at, data) = store.load_snapshot("a")  # type: ignore[misc]
        assert at == store.last_seq("a") and json.loads(data)["anchor"] is not None

    results = _with_and_without_checkpoint(
        path, "a", kept, lambda session: (session.estimate(), session.tally().total)
    )
    assert results[0] == results[1] == wrote
    assert wrote[0] == 40 + after_report


def _with_and_without_checkpoint(
    path: Path,
    session_id: str,
    kept: Callable[[SQLiteStore], None],
    measure: Callable[[Session], T],
) -> tuple[T, T]:
    """`measure` of a session reopened from `path` with its checkpoint (after `kept` checks the
    checkpoint is the one the test means), then again with every checkpoint dropped."""
    results = []
    for drop in (False, True):
        with SQLiteStore(path) as store:
            if drop:
                store.drop_snapshots(session_id)
            else:
                kept(store)
            results.append(
                measure(store.session(session_id, counter=FixedCounter(), checkpoint_every=None))
            )
    return results[0], results[1]
