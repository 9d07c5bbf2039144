"""Every message is counted once: the session's tally counts what is appended, takes the counts of
summaries, notes and masked results from the compaction that wrote them, and a replay sizes its
requests from that tally.

A `Recording` counter (a real counter that remembers what it was asked) shows who counted what;
every estimate is also checked against a plain recount, so counting less never means counting
wrong.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ctxfold.compactor import Compactor
from ctxfold.events import COMPACTION, MASK
from ctxfold.messages import Message
from ctxfold.pipeline import ClearToolResults, Pipeline, Summarize
from ctxfold.replay import replay
from ctxfold.storage import MemoryStore, SQLiteStore
from ctxfold.testing.counters import FixedCounter
from ctxfold.testing.transcripts import generate
from ctxfold.tokens import Budget, count_messages
from tests._histories import agent_history


class Recording:
    """`FixedCounter`'s counts, and a tally of the messages it was asked to count."""

    exact = False

    def __init__(self, name: str = FixedCounter.name) -> None:
        self.inner = FixedCounter()
        self.name = name
        self.seen: Counter[str] = Counter()

    def count_text(self, text: str) -> int:
        return self.inner.count_text(text)

    def count_message(self, message: Message) -> int:
        self.seen[message.to_json()] += 1
        return self.inner.count_message(message)

    def count_tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        return self.inner.count_tools(tools)


def summary_text(request: Any) -> str:
    return "## Objective\n- fix the bugs\n## Work done\n- read the modules"


def compacted_session(counter: Recording, store: Any = None) -> tuple[Any, Compactor]:
    session = (store or MemoryStore()).session("once", counter=counter)
    session.append(agent_history(turns=4, output_words=120))
    pipeline = Pipeline([ClearToolResults(min_tokens=50, keep_tail=False), Summarize()])
    compactor = Compactor(
        # The user's words unprotected: the short old turns are summarized whole.
        Budget(window=3000, keep_recent_tokens=0, keep_user_tokens=0),
        pipeline,
        summarizer=summary_text,
        counter=counter,
    )
    report = compactor.compact(session, target=400)
    assert report.landed
    kinds = {e.type for e in session.events() if e.type in (COMPACTION, MASK)}
    assert kinds == {COMPACTION, MASK}
    return session, compactor


def test_what_a_compaction_lands_is_counted_by_the_run_alone() -> None:
    """The summary and the masked results are counted once, while the run plans them; the
    session's estimate takes those counts and still equals a recount."""
    counter = Recording()
    session, compactor = compacted_session(counter)
    originals = {m.to_json() for m in agent_history(turns=4, output_words=120)}
    new = [m for m in session.messages() if m.to_json() not in originals]
    assert len(new) >= 2  # a summary and at least one masked result
    assert [counter.seen[m.to_json()] for m in new] == [1] * len(new)
    assert compactor.estimate(session) == count_messages(FixedCounter(), session.messages())


def test_a_reopened_session_takes_recorded_counts_and_a_different_counter_recounts(
    tmp_path: object,
) -> None:
    """Reading the log again with a counter of the same name counts no summary or mask again;
    a counter with another name counts everything itself. Both estimates are exact."""
    path = f"{tmp_path}/once.db"
    with SQLiteStore(path) as store:
        compacted_session(Recording(), store)
    with SQLiteStore(path) as store:
        same = Recording()
        session = store.session("once", counter=same)
        expected = count_messages(FixedCounter(), session.messages())
        assert session.estimate() == expected
        summaries = [i.message for i in session.items() if i.kind != "message"]
        assert summaries and all(same.seen[m.to_json()] == 0 for m in summaries)

        other = Recording(name="another counter")
        assert store.session("once", counter=other).estimate() == expected
        assert all(other.seen[m.to_json()] == 1 for m in summaries)


def test_a_replay_counts_each_transcript_message_once() -> None:
    """Replaying with the compactor's counter: every original message is counted once however
    many requests it was part of, and every summary the replay landed at most once."""
    messages = generate(seed=3, steps=60)
    counter = Recording()
    session = MemoryStore().session("replay", counter=counter)
    compactor = Compactor(Budget(window=2500), counter=counter)
    result = replay(session, messages, compactor, counter=counter)
    assert result.compactions, "the replay should compact"
    occurrences = Counter(m.to_json() for m in messages)
    for text, times in occurrences.items():
        # The system prompt is also counted up front, to refuse a window it alone exceeds.
        up_front = 1 if json.loads(text)["role"] == "system" else 0
        assert counter.seen[text] == times + up_front
    landed = [i.message for i in session.items() if i.kind != "message"]
    assert landed and all(counter.seen[m.to_json()] <= 1 for m in landed)

    # Sized with a counter of its own, the replay counts every request itself: same figures.
    apart = replay(
        MemoryStore().session("apart"),
        messages,
        Compactor(Budget(window=2500), counter=FixedCounter()),
        counter=FixedCounter(),
    )
    assert result.original_tokens == apart.original_tokens
    assert [r.to_dict() for r in result.requests] == [r.to_dict() for r in apart.requests]
