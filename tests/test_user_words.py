"""The user's words are the last thing to go: the task and every later user message stay verbatim
within their bound, summaries land around them, the window never drops them; past the bound the
oldest are shortened, head and tail, never summarized; a harness's repeated nudge is said once.

Histories are built from words so that `FixedCounter` (one token per word) makes every size a
round number the test can reason about.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from conftest import transcript_params
from ctxfold.compactor import Compactor, compact_messages
from ctxfold.errors import BudgetError
from ctxfold.messages import Message, read_jsonl
from ctxfold.messages.validity import validate
from ctxfold.pipeline import (
    CollapseRepeats,
    Pipeline,
    Rules,
    ShortenUserMessages,
    SlidingWindow,
    Summarize,
    WorkingView,
)
from ctxfold.pipeline.user_words import Candidate, select_user_words
from ctxfold.replay import replay, replay_transcript
from ctxfold.session import Snapshot
from ctxfold.storage import MemoryStore
from ctxfold.testing.counters import FixedCounter
from ctxfold.testing.doubles import FunctionSummarizer
from ctxfold.testing.transcripts import CORRECTIONS, TASK, generate
from ctxfold.tokens import Budget
from tests._histories import agent_history, step, words

COUNTER = FixedCounter()
SHORT = "## Objective\n- fix the bugs\n## Work done\n- read the modules"
NUDGE = "No tool calls found in the response. Please call exactly one tool."


def tokens(messages: list[Message]) -> int:
    return sum(COUNTER.count_message(m) for m in messages)


def user_texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages if m.role == "user" and not m.text.startswith("[ctxfold")]


def view_of(messages: list[Message], target: int, **rules: object) -> WorkingView:
    snapshot = Snapshot.of_messages(messages, COUNTER)
    return WorkingView(snapshot, target, Rules(COUNTER, **rules))  # type: ignore[arg-type]


def run(pipeline: Pipeline, view: WorkingView) -> None:
    from ctxfold.compactor.drivers import Edge, run_sync

    run_sync(pipeline.plan(view), Edge(FunctionSummarizer.returning(SHORT), COUNTER))


# -- within the bound ------------------------------------------------------------------------------
@pytest.mark.guarantee("user-words-kept")
def test_the_task_and_every_later_instruction_stay_verbatim_while_the_bound_holds() -> None:
    """Compacted far down with the default ladder, every user message is still in the history,
    word for word, in its place; summaries stand between them for the work around them."""
    # Short outputs that clearing leaves alone, many to a turn: turns worth a summary each.
    messages = agent_history(turns=4, steps=6, output_words=90, task="Task {t}: fix mod{t}.py")
    out = compact_messages(
        messages,
        Budget(window=100_000),
        counter=COUNTER,
        target=1_200,
        summarizer=FunctionSummarizer.returning(SHORT),
    )
    assert user_texts(out.messages) == user_texts(messages)
    kinds = [
        ("summary" if m.text.startswith("[ctxfold: summary") else m.role) for m in out.messages
    ]
    assert "summary" in kinds
    assert any(a == "summary" and b == "user" for a, b in itertools.pairwise(kinds))
    assert out.report.tokens_after < tokens(messages) // 2
    assert [p for p in validate(out.messages) if p.severity == "error"] == []


@pytest.mark.guarantee("user-words-kept")
def test_no_summary_request_holds_a_user_message_within_the_bound() -> None:
    """Summarize reads only the assistant and tool stretches around the user's words."""
    messages = agent_history(turns=4, output_words=300)
    summarizer = FunctionSummarizer.returning(SHORT)
    compact_messages(
        messages,
        Budget(window=100_000),
        pipeline=Pipeline([Summarize()]),
        counter=COUNTER,
        target=900,
        summarizer=summarizer,
    )
    assert summarizer.requests
    said = set(user_texts(messages))
    for request in summarizer.requests:
        assert not [m for m in request.messages if m.role == "user" and m.text in said]


@pytest.mark.guarantee("user-words-kept")
def test_the_sliding_window_never_drops_a_user_message_within_the_bound() -> None:
    """Whatever the target, the window drops tool output, assistant prose and summaries; every
    user message within the bound stays (here a bound that holds them all)."""
    messages = agent_history(turns=6, output_words=150)
    for target in (2000, 800, 300, 50):
        view = view_of(messages, target, keep_user_tokens=10_000)
        run(Pipeline([SlidingWindow()]), view)
        assert user_texts(view.messages) == user_texts(messages)
        assert any(item.kind == "note" for item in view.items)
        assert [p for p in validate(view.messages) if p.severity == "error"] == []


@pytest.mark.guarantee("user-words-kept")
def test_the_demo_keeps_the_task_and_the_mid_run_constraint_verbatim(tmp_path: Path) -> None:
    """`ctxfold demo`'s session replayed at 16k: the task and the user's constraint on
    convert() are still user messages of the final view, word for word."""
    result = replay_transcript(generate(seed=0, steps=60), Budget(window=16_000))
    assert result.compactions
    fidelity = result.fidelity
    assert fidelity is not None and fidelity.task_kept
    assert fidelity.user_kept == fidelity.user_within == fidelity.user_messages
    session = MemoryStore().session("demo")
    replay(session, generate(seed=0, steps=60), Compactor(Budget(window=16_000)))
    kept = user_texts(session.messages())
    assert TASK in kept
    assert any(c.startswith("Please don't change the signature of convert()") for c in kept)
    assert set(CORRECTIONS) & set(kept)


@pytest.mark.transcripts
@pytest.mark.parametrize("transcript", transcript_params())
@pytest.mark.parametrize("window", [16_000, 32_000])
@pytest.mark.guarantee("user-words-kept")
def test_on_every_transcript_the_task_and_the_user_messages_within_the_bound_stay(
    transcript: Path, window: int
) -> None:
    """Replayed live at 16k and 32k: the task is verbatim in the final view whenever it fits
    the bound, and so is every distinct user message the bound holds."""
    result = replay_transcript(read_jsonl(transcript), Budget(window=window))
    fidelity = result.fidelity
    assert fidelity is not None
    if fidelity.task_fits:
        assert fidelity.task_kept
    assert fidelity.user_kept == fidelity.user_within


# -- past the bound --------------------------------------------------------------------------------
def long_request(n: int) -> str:
    return f"Spec {n}: port src/spec{n}/reader.py and docs/spec{n}.md. " + words(800, f"s{n}")


@pytest.mark.guarantee("user-words-shortened-past-bound")
def test_past_the_bound_the_oldest_user_messages_keep_head_and_tail_with_the_ref() -> None:
    """Three long requests and a bound that holds one besides the task: the one in between is
    shortened to its head and tail with a marker naming its log item and quoting what the cut
    part named; the task and the newest stay whole; nothing of them is summarized."""
    messages = [Message("system", "You are a careful coding agent.")]
    for n in range(3):
        messages.append(Message("user", long_request(n)))
        messages += step(f"r{n}", 200)
    messages.append(Message("user", "Now run the tests."))
    messages += step("now", 40)
    budget = Budget(window=100_000, keep_user_tokens=1_700)
    summarizer = FunctionSummarizer.returning(SHORT)
    out = compact_messages(messages, budget, counter=COUNTER, target=2_300, summarizer=summarizer)
    said = user_texts(out.messages)
    assert said[0] == long_request(0)  # the task, kept first
    assert long_request(2) in said and "Now run the tests." in said
    (short,) = [t for t in said if t.startswith("Spec 1:")]
    assert short.startswith("Spec 1: port src/spec1/reader.py")
    assert short.endswith(words(800, "s1").split()[-1])
    assert "were cut here to fit the context window" in short
    position = out.messages.index(next(m for m in out.messages if m.text == short))
    assert f"log item {position + 1}" in short  # the list's items are numbered from 1
    for request in summarizer.requests:
        assert not any(m.text.startswith("Spec ") for m in request.messages if m.role == "user")
    assert [s.name for s in out.report.strategies].count("shorten_user_messages") == 1


def test_shortening_quotes_the_identifiers_of_the_part_cut() -> None:
    """The identifiers the middle named come back quoted as data on the marker line."""
    text = (
        "Fix it. " + words(200, "a") + " see docs/guide/setup.md and TICKET-42 " + words(200, "b")
    )
    view = view_of([Message("user", text), Message("user", "ok")], target=50, keep_user_tokens=5)
    run(Pipeline([ShortenUserMessages(keep_tokens=40)]), view)
    marker = next(line for line in view.messages[0].text.splitlines() if "[ctxfold:" in line)
    assert "`docs/guide/setup.md`" in marker and "`TICKET-42`" in marker


def test_shorten_user_messages_refuses_a_bad_size() -> None:
    for bad in (0, 15, -1, 2.5, True):
        with pytest.raises(Exception, match="keep_tokens"):
            ShortenUserMessages(keep_tokens=bad)  # type: ignore[arg-type]


# -- repeats ---------------------------------------------------------------------------------------
@pytest.mark.guarantee("user-repeats-collapsed")
def test_identical_repeated_nudges_collapse_into_one_with_a_count() -> None:
    """A harness sent the same nudge three times: the older copies become one line naming the
    copy that stands in full and how many were sent; the newest stays whole."""
    messages = [Message("system", "agent"), Message("user", "Fix the parser in src/p.py.")]
    for n in range(3):
        messages += step(f"c{n}", 150)
        messages.append(Message("user", NUDGE + " " + words(40, "format")))
    messages += step("last", 30)
    view = view_of(messages, target=tokens(messages) - 30)
    run(Pipeline([CollapseRepeats()]), view)
    texts = [m.text for m in view.messages if m.role == "user"]
    assert texts[0] == "Fix the parser in src/p.py."
    assert texts[-1].startswith(NUDGE)
    keeper = next(i.id for i in view.items if i.message.text.startswith(NUDGE))
    collapsed = [t for t in texts if t.startswith("[ctxfold: the same user message")]
    assert collapsed and all(f"log item {keeper}" in t and "3 times" in t for t in collapsed)
    assert [p for p in validate(view.messages) if p.severity == "error"] == []


def test_repeats_count_once_against_the_bound() -> None:
    """Copies of a message stand for one: the bound is spent on the copy that stays."""
    said = [Candidate(1, "task", 10), Candidate(2, "nudge", 10), Candidate(3, "nudge", 10)]
    words_ = select_user_words(said, bound=20)
    assert words_.kept == {1, 3} and words_.repeats == {2: 3} and words_.copies == {3: 2}


@pytest.mark.guarantee("user-repeats-collapsed")
def test_user_messages_with_media_or_no_text_are_never_taken_for_repeats() -> None:
    """Two pictures sent without words, or the same question asked of two images, are different
    messages: neither is collapsed into the other (the older image was lost that way)."""
    from ctxfold.messages import from_openai

    def picture(name: str, text: str | None) -> Message:
        parts: list[dict[str, object]] = [
            {"type": "image_url", "image_url": {"url": f"https://example.com/{name}.png"}}
        ]
        if text is not None:
            parts.insert(0, {"type": "text", "text": text})
        [message] = from_openai([{"role": "user", "content": parts}])
        return message

    messages = [Message("system", "agent"), Message("user", "Describe what I send.")]
    for n, (name, text) in enumerate(
        [("a", None), ("b", None), ("c", "what is this?"), ("d", "what is this?")]
    ):
        messages.append(picture(name, text))
        messages += step(f"c{n}", 150)
    view = view_of(messages, target=tokens(messages) - 30)
    run(Pipeline([CollapseRepeats()]), view)
    assert not any(m.text.startswith("[ctxfold: the same user message") for m in view.messages)
    said = [Candidate(1, "", 5, media=True), Candidate(2, "", 5, media=True)]
    assert select_user_words(said, bound=20).repeats == {}
    assert select_user_words([Candidate(1, " ", 5), Candidate(2, "", 5)], 20).repeats == {}


# -- drops worth their note ------------------------------------------------------------------------
@pytest.mark.guarantee("drops-worth-their-note")
def test_the_window_never_puts_a_note_nearly_as_long_as_what_it_drops() -> None:
    """A stretch under twice its note's size is never dropped; larger ones may be."""
    messages = [Message("system", "agent"), Message("user", "go")]
    messages += [Message("assistant", "ok " + words(20, "tiny"))]  # ~20 tokens: not worth a note
    messages += step("big", 400)
    messages += [Message("user", "next"), *step("now", 20)]
    view = view_of(messages, target=100, keep_user_tokens=0)
    run(Pipeline([SlidingWindow()]), view)
    for item in view.items:
        if item.kind == "note":
            low, high = item.span
            dropped = sum(COUNTER.count_message(m) for m in messages[low - 1 : high])
            assert 2 * COUNTER.count_message(item.message) <= dropped


# -- configuration ---------------------------------------------------------------------------------
def test_the_bound_is_configurable_in_tokens_and_checked() -> None:
    """`Budget.keep_user_tokens` is the bound in tokens; by default the smaller of 20,000 and
    half the target; a negative or fractional bound is refused."""
    assert Budget(window=16_000).user_words_tokens == 3_200
    assert Budget(window=1_000_000).user_words_tokens == 20_000
    assert Budget(window=16_000, keep_user_tokens=500).user_words_tokens == 500
    for bad in (-1, 1.5, "10"):
        with pytest.raises(BudgetError, match="keep_user_tokens"):
            Budget(window=16_000, keep_user_tokens=bad)  # type: ignore[arg-type]


def test_a_bound_of_zero_turns_the_protection_off() -> None:
    """With keep_user_tokens=0 old turns are summarized whole, user messages and all."""
    messages = agent_history(turns=4, output_words=300)
    summarizer = FunctionSummarizer.returning(SHORT)
    compact_messages(
        messages,
        Budget(window=100_000, keep_user_tokens=0),
        pipeline=Pipeline([Summarize()]),
        counter=COUNTER,
        target=600,
        summarizer=summarizer,
    )
    read = [m.text for r in summarizer.requests for m in r.messages if m.role == "user"]
    assert any(text.startswith("Task 0") for text in read)


def test_the_selection_orders_task_newest_then_back() -> None:
    """The task first, the newest always, then from the newest back until one does not fit."""
    said = [Candidate(i, f"request {i}", 10) for i in range(1, 7)]
    words_ = select_user_words(said, bound=40)
    assert words_.task == 1 and words_.kept == {1, 6, 5, 4}
    assert words_.over == (2, 3)
    assert json.dumps(sorted(words_.protected)) == "[1, 2, 3, 4, 5, 6]"
