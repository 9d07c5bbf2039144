"""The sliding window drops what dropping one stretch at a time would, reading the whole view
again before each drop; it only reads it less often.

`OneAtATime` below is that rule written out plainly: before each drop it reads what is
protected and the runs nothing protects, and drops from the oldest run that has a stretch worth
its note. The window must leave the same view (messages, counts, notes) and make the same
compactions, for histories with many runs (the user's words between them, pins, summaries,
earlier notes), a recent tail whose start moves as the history before it is dropped, and the
user's messages past their bound given up last.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from dataclasses import replace
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxfold.compactor.drivers import Edge, run_sync
from ctxfold.events import Compaction
from ctxfold.messages import Message, ToolCall
from ctxfold.messages.frames import NOTE_MARK
from ctxfold.messages.validity import validate
from ctxfold.pipeline import Pipeline, Rules, SlidingWindow, WorkingView
from ctxfold.pipeline.drops import with_identifiers
from ctxfold.pipeline.ledgers import holds_any_ledger, record_ledger, stretch_ledger
from ctxfold.pipeline.notes import note_for
from ctxfold.pipeline.proposals import Proposal, Replace
from ctxfold.pipeline.strategy import Flow
from ctxfold.pipeline.summaries import shrink_ledger
from ctxfold.session import Snapshot
from ctxfold.summarizers.record import frame_summary
from ctxfold.testing.counters import FixedCounter
from ctxfold.testing.doubles import FunctionSummarizer
from tests._histories import step, words

COUNTER = FixedCounter()
STAGES = ((True, True, True), (False, True, True), (False, False, True), (False, False, False))
"""(keep the recent tail, keep summaries, keep the user's messages past their bound)."""


class OneAtATime:
    """The sliding window's rule, one drop per reading of the view."""

    name = "sliding_window"

    def __init__(self, keep_steps: int | None = None) -> None:
        self.keep_steps = keep_steps

    def run(self, view: WorkingView) -> Flow:
        for stage in STAGES:
            if stage == STAGES[-1]:
                shrink = shrink_ledger(view, view.excess)
                if shrink is not None:
                    yield shrink
                if view.fits:
                    return None
            while not view.fits:
                dropped = yield from self._drop_once(view, *stage)
                if not dropped:
                    break
            if view.fits:
                return None
        return "nothing more may be dropped"

    def _drop_once(
        self, view: WorkingView, keep_tail: bool, keep_summaries: bool, keep_users: bool
    ) -> Generator[Proposal, Any, bool]:
        protected = view.protected(self.keep_steps, tail=keep_tail)
        summaries = {i for i, item in enumerate(view.items) if item.kind == "summary"}
        if keep_summaries:
            protected |= summaries
        if keep_users:
            protected |= view.user_words().protected
            protected |= {i for i in summaries if holds_any_ledger(view.items[i].message.text)}
        structure = view.structure()
        current = structure.current_turn
        task_start = current.start if current and current.user is not None else structure.size
        turn_starts = {t.start for t in structure.turns}
        want = view.excess + 64
        runs: list[list[Any]] = []
        for unit in structure.units:
            if any(i in protected for i in unit.indices):
                continue
            if runs and runs[-1][-1].end == unit.start:
                runs[-1].append(unit)
            else:
                runs.append([unit])
        for run in runs:
            start, tokens, chosen = run[0].start, 0, None
            for position, unit in enumerate(run):
                tokens += view.tokens(unit.start, unit.end)
                following = run[position + 1].start if position + 1 < len(run) else None
                boundary = following is None or following >= task_start or following in turn_starts
                if (tokens >= want and boundary) or following is None:
                    note = note_for(view.items, structure, start, unit.end, view.summary_role)
                    if 2 * view.count(note.message) <= tokens:
                        chosen = (unit.end, note)
                        break
            if chosen is None:
                continue
            end, note = chosen
            if end - start == 1 and view.items[start].kind == "note":
                continue
            message = with_identifiers(
                view, start, end, note.message, tokens=view.tokens(start, end)
            )
            applied = yield Replace(
                start,
                end,
                message,
                kind="note",
                protected=protected,
                dropped=note.dropped,
                turns=note.turns,
                ledger=record_ledger(view, start, end, stretch_ledger(view, start, end)),
            )
            if applied:
                return True
        return False


def view_of(
    messages: list[Message], rules: Rules, target: int, pins: frozenset[int]
) -> WorkingView:
    snapshot = Snapshot.of_messages(messages, COUNTER)
    return WorkingView(replace(snapshot, pinned_ids=pins), target, rules)


def dropped_by(strategy: Any, view: WorkingView) -> tuple[list[Any], str | None]:
    """Run `strategy` alone over `view`: its compactions (with their ledgers) and why it
    stopped."""
    accounts = run_sync(
        Pipeline([strategy]).plan(view), Edge(FunctionSummarizer.returning("x"), COUNTER)
    )
    edits = [(e, json.dumps(e.ledger, sort_keys=True)) for e in view.edits]
    return edits, "; ".join(accounts.notes) or None


def assert_same_drops(
    messages: list[Message],
    rules: Rules,
    target: int,
    pins: frozenset[int] = frozenset(),
    keep_steps: int | None = None,
) -> WorkingView:
    window = view_of(messages, rules, target, pins)
    reference = view_of(messages, rules, target, pins)
    assert dropped_by(SlidingWindow(keep_steps), window) == dropped_by(
        OneAtATime(keep_steps), reference
    )
    assert window.items == reference.items
    assert window.counts == reference.counts
    return window


def notes_of(view: WorkingView) -> list[str]:
    return [item.message.text for item in view.items if item.kind == "note"]


# -- examples ------------------------------------------------------------------------------
def chat(turns: int, steps: int = 2, output: int = 60) -> list[Message]:
    """`turns` short user requests with `steps` tool steps each, the last one being the current
    request."""
    messages = [Message("system", "You are a careful coding agent.")]
    for t in range(turns):
        messages.append(Message("user", f"Request {t}: look at src/m{t}.py"))
        for s in range(steps):
            messages += step(f"t{t}s{s}", output)
    return messages


@pytest.mark.guarantee("window-drops-oldest-whole")
def test_many_runs_between_the_users_words_each_get_their_own_note() -> None:
    """With the user's words protected between them, each turn's steps are a run of their own:
    the window drops them oldest first, one note per run, exactly as dropping one run at a time
    would, and stops at the first run that brings the view within the target."""
    messages = chat(40)
    rules = Rules(COUNTER, keep_user_tokens=10_000)
    target = sum(COUNTER.count_message(m) for m in messages) // 3
    view = assert_same_drops(messages, rules, target)
    notes = [item for item in view.items if item.kind == "note"]
    assert len(notes) > 20
    assert all(n.message.text.startswith(f"{NOTE_MARK}: 4 messages (") for n in notes[:-1])
    kinds = [item.kind for item in view.items]
    assert not any(a == b == "note" for a, b in pairwise(kinds))
    kept_steps = [item.id for item in view.items if item.message.role == "tool"]
    assert max(n.span[1] for n in notes) < min(kept_steps)  # the oldest runs went first
    assert all(m in view.messages for m in messages if m.role == "user")
    assert view.fits
    assert [str(p) for p in validate(view.messages) if p.severity == "error"] == []


@pytest.mark.guarantee("pins-respected")
def test_a_pinned_step_in_the_middle_of_a_task_splits_the_notes() -> None:
    """One long task with a pinned step in its middle: the steps before it go under one note,
    the steps after it under another, and the pinned step stays between them."""
    messages = [Message("system", "You are a careful coding agent."), Message("user", "Do it.")]
    for s in range(30):
        messages += step(f"s{s}", 80)
    pinned = messages.index(step("s14", 80)[0]) + 1  # the seq of its call
    rules = Rules(COUNTER)
    view = assert_same_drops(messages, rules, target=400, pins=frozenset({pinned}))
    kinds = [item.kind for item in view.items]
    assert kinds[2] == "note"
    middle = [i for i, item in enumerate(view.items) if item.id == pinned]
    assert middle and kinds[middle[0] - 1] == "note" and kinds[middle[0] + 2] == "note"
    assert len(notes_of(view)) == 2
    assert all(not item.synthetic or item.covers is not None for item in view.items)
    assert view.items[2].span[1] < pinned < view.items[middle[0] + 2].span[0]


@pytest.mark.guarantee("drops-worth-their-note")
def test_a_run_too_small_for_its_note_stays_while_later_runs_go() -> None:
    """A run whose note would take more than half of it is passed over, and the runs after it
    are still dropped, oldest first."""
    messages = chat(12, steps=1, output=60)
    messages[2:4] = step("tiny", 1)  # the first turn's one step: fewer tokens than a note
    rules = Rules(COUNTER, keep_user_tokens=10_000)
    view = assert_same_drops(messages, rules, target=300)
    assert view.messages[1:4] == messages[1:4]
    assert len(notes_of(view)) >= 5


def calls(call_id: str, *sizes: int, text: str | None = None) -> list[Message]:
    """A step whose calls (`call_id`_0, _1, ...) have results of `sizes` words."""
    ids = [f"{call_id}_{k}" for k in range(len(sizes))]
    call = Message("assistant", text, tuple(ToolCall(i, "bash", '{"cmd": "ls"}') for i in ids))
    return [
        call,
        *(Message("tool", words(n, i), tool_call_id=i) for i, n in zip(ids, sizes, strict=True)),
    ]


def test_a_run_passed_over_is_dropped_once_the_excess_is_small_enough() -> None:
    """A run whose whole is not worth its note (its last message begins a user turn, which
    lengthens the note) is passed over while the excess is large; once a later drop has made
    the excess small, its head alone is enough and worth its note, and it goes before the
    runs after it."""
    note = f"{NOTE_MARK}: 3 messages (log items 1–3) were removed to fit the context window."
    messages = [
        Message("system", "You are a careful coding agent."),
        Message("user", note + " " + words(17, "n")),  # an earlier note: 35 tokens
        *calls("a", 26),  # 36 tokens: with the note, 71, just worth a note of 35
        Message("user", "b"),
        Message("assistant", "ok"),
        Message("user", "Now the task."),
        *calls("s", 61),  # 71 tokens, alone between the task and a pinned step
        *calls("p", 11),
        *calls("t", 61),  # 71 tokens too
        *calls("n", 11),
    ]
    rules = Rules(COUNTER, keep_user_tokens=0)
    total = Snapshot.of_messages(messages, COUNTER).total
    pinned = frozenset({messages.index(calls("p", 11)[0]) + 1})
    view = assert_same_drops(messages, rules, target=total - 40, pins=pinned)
    first, second = (e for e in view.edits if isinstance(e, Compaction))
    assert first.covers == (8, 9)  # the step right after the task went first
    assert second.covers == (2, 4) and second.turns == 0  # then the earlier note and step "a"
    assert [m.text for m in view.messages[2:4]] == ["b", "ok"]
    assert calls("t", 61)[1] in view.messages
    assert view.fits


@pytest.mark.guarantee("user-words-kept")
def test_once_the_task_past_the_bound_is_dropped_the_next_request_is_kept() -> None:
    """The user's first request, past their bound, goes in the last stage; the next request
    then is the task, within the bound, and the window no longer drops it."""
    messages = [
        Message("system", "You are a careful coding agent."),
        Message("user", "Request 0: " + words(39, "w")),
        *calls("c0", 60, text="Let me look."),
        *calls("c3", 8, 60),
        *calls("c4", 60, text="Let me look."),
        Message("user", "Now fix the parser in src/p.py."),
        *calls("c8", 20, 30),
        *calls("c9", 90, text="Let me look."),
        *calls("c10", 60, 3),
        Message("user", "Request 3: " + words(44, "w")),
    ]
    rules = Rules(COUNTER, keep_steps=2, keep_recent_tokens=40, keep_count=7, keep_user_tokens=11)
    pinned = frozenset({5})  # the step c3, between the task and the next request
    view = assert_same_drops(messages, rules, target=174, pins=pinned)
    assert messages[1] not in view.messages
    assert "Now fix the parser in src/p.py." in [m.text for m in view.messages]
    assert not view.fits


@pytest.mark.guarantee("recent-tail-kept")
def test_a_tail_that_shrinks_as_older_history_goes_is_read_again() -> None:
    """The recent tail keeps `min_messages` messages only while the target allows: once the
    oldest run is dropped the tail is shorter, and the message that left it goes with the run
    before it, in one note."""
    messages = [
        Message("system", "You are a careful coding agent."),
        Message("user", "Request 0: " + words(30, "w")),
        *calls("c0", 90, 30, text="Let me look."),
        Message("user", "Now fix the parser in src/p.py."),
        *calls("c2", 1, 90),
        Message("assistant", "ok"),
        *calls("c5", 90),
    ]
    rules = Rules(COUNTER, keep_recent_tokens=100, keep_count=3, min_messages=6, keep_user_tokens=8)
    view = assert_same_drops(messages, rules, target=223)
    notes = [item for item in view.items if item.kind == "note"]
    assert [(n.span, n.message.text.split(" (")[0]) for n in notes] == [
        ((3, 5), f"{NOTE_MARK}: 3 messages"),
        ((7, 10), f"{NOTE_MARK}: 4 messages"),  # "ok" went with the step before it
    ]


# -- every history -------------------------------------------------------------------------
POOL = ["Please continue.", "Run the tests again.", "Now fix the parser in src/p.py."]


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[Message], frozenset[int]]:
    """A system prompt, earlier turns and the current task, with user messages that repeat,
    earlier notes and summaries between turns, steps of every size (some parallel, some with a
    word of text), answers, a call that may still wait for its result, and pinned items."""
    messages = [Message("system", "You are a careful coding agent.")]
    calls = 0

    def one_step() -> list[Message]:
        nonlocal calls
        ids = [f"c{calls}_{k}" for k in range(draw(st.integers(1, 2)))]
        calls += 1
        text = draw(st.sampled_from([None, "Let me look at src/a.py."]))
        call = Message("assistant", text, tuple(ToolCall(i, "bash", '{"cmd": "ls"}') for i in ids))
        sizes = [draw(st.sampled_from([1, 5, 30, 120, 400])) for _ in ids]
        results = [
            Message("tool", words(n, i), tool_call_id=i) for n, i in zip(sizes, ids, strict=True)
        ]
        return [call, *results]

    for turn in range(draw(st.integers(1, 9))):
        frame = draw(st.sampled_from([None, None, "note", "summary"]))
        if frame == "note":
            messages.append(Message("user", f"{NOTE_MARK}: 3 messages (log items 1–3) went.]"))
        elif frame == "summary":
            messages.append(Message("user", frame_summary(f"## Work done\n- turn {turn}")))
        text = draw(
            st.sampled_from([*POOL, f"Request {turn}: {words(draw(st.integers(1, 40)), 'w')}"])
        )
        messages.append(Message("user", text))
        for _ in range(draw(st.integers(0, 5))):
            messages += one_step()
            if draw(st.integers(0, 5)) == 0:
                messages.append(Message("assistant", f"Done with step {calls}."))
    if draw(st.booleans()):
        call = one_step()
        messages += call[: len(call) - draw(st.integers(0, len(call) - 1))]
    seqs = range(1, len(messages) + 1)
    pins = draw(st.sets(st.sampled_from(seqs), max_size=3)) if draw(st.booleans()) else set()
    return messages, frozenset(pins)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    histories(),
    st.floats(0.02, 1.0),
    st.integers(1, 2),
    st.sampled_from([0, 40, 300]),
    st.integers(0, 8),
    st.sampled_from([0, 6]),
    st.sampled_from([None, 0, 8, 30]),
)
@pytest.mark.guarantee("window-drops-oldest-whole")
def test_the_window_drops_what_one_drop_at_a_time_would(
    history: tuple[list[Message], frozenset[int]],
    share: float,
    keep_steps: int,
    keep_recent: int,
    keep_count: int,
    min_messages: int,
    keep_user: int | None,
) -> None:
    """Whatever the history, pins and rules, the window leaves the same view and makes the same
    compactions as reading the whole view again before each drop."""
    messages, pins = history
    rules = Rules(
        COUNTER,
        keep_steps=keep_steps,
        keep_recent_tokens=keep_recent,
        keep_count=keep_count,
        min_messages=min_messages,
        keep_user_tokens=keep_user,
    )
    total = sum(COUNTER.count_message(m) for m in messages)
    assert_same_drops(messages, rules, max(1, int(total * share)), pins)
