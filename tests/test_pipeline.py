"""The ladder: ClearToolResults, Summarize and SlidingWindow, alone and in a Pipeline.

Histories are built from words so that `FixedCounter` (one token per word) makes every size a
round number the test can reason about. The user's words get no protection of their own here
(`keep_user_tokens=0`), so that old turns are summarized or dropped whole, as these tests of the
rungs' mechanics need; `tests/test_user_words.py` covers that protection.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import pytest

from ctxfold.compactor import CompactionReport, compact_messages
from ctxfold.compactor.drivers import Edge, run_sync
from ctxfold.errors import ConfigurationError
from ctxfold.messages import Message
from ctxfold.messages.structure import analyze
from ctxfold.messages.validity import validate
from ctxfold.pipeline import (
    Accounts,
    ClearToolResults,
    Pipeline,
    Replace,
    Rules,
    SlidingWindow,
    Strategy,
    Summarize,
    WorkingView,
)
from ctxfold.session import Snapshot
from ctxfold.summarizers import SummaryRequest
from ctxfold.summarizers.record import frame_summary
from ctxfold.testing.counters import FixedCounter
from ctxfold.testing.doubles import FunctionSummarizer
from ctxfold.tokens import Budget
from tests._histories import agent_history, step, words
from tests._tokenizer import tokenized_by

COUNTER = FixedCounter()
SYSTEM = Message("system", "You are a careful coding agent.")
CURRENT = Message("user", "Now the current task: run the test suite and report.")
SHORT = "## Objective\n- fix the bugs\n## Work done\n- read the modules"
SHORT_SUMMARIZER = FunctionSummarizer.returning(SHORT)


def history(
    turns: int = 4, steps: int = 2, output: int = 200, task_steps: int = 2
) -> list[Message]:
    """A system prompt, `turns` finished turns of `steps` steps, then the current task."""
    return agent_history(
        turns, steps, output, task_steps, request=CURRENT.text, step_ids="t{t}s{s}"
    )


def tokens(messages: Sequence[Message]) -> int:
    return sum(COUNTER.count_message(m) for m in messages)


def compact(
    messages: list[Message],
    target: int,
    pipeline: Pipeline | None = None,
    summarizer: object = None,
    keep_recent_tokens: int = 0,
) -> tuple[list[Message], CompactionReport]:
    budget = Budget(window=100_000, keep_recent_tokens=keep_recent_tokens, keep_user_tokens=0)
    out = compact_messages(
        messages, budget, pipeline=pipeline, summarizer=summarizer, counter=COUNTER, target=target
    )
    return out.messages, out.report


def view_of(messages: list[Message], target: int, keep_steps: int = 1) -> WorkingView:
    """A working view over `messages` as a fresh session would project them (ids 1, 2, ...)."""
    snapshot = Snapshot.of_messages(messages, COUNTER)
    return WorkingView(snapshot, target, Rules(COUNTER, keep_steps=keep_steps, keep_user_tokens=0))


def run(pipeline: Pipeline, view: WorkingView, summarizer: object = None) -> Accounts:
    """Run `pipeline` over `view`, answering summary calls with `summarizer`."""
    return run_sync(pipeline.plan(view), Edge(summarizer or SHORT_SUMMARIZER, COUNTER))


def apply(strategy: Strategy, view: WorkingView) -> Accounts:
    """Run one strategy alone over `view`."""
    return run(Pipeline([strategy]), view)


def errors(messages: Sequence[Message]) -> list[str]:
    return [str(p) for p in validate(messages) if p.severity == "error"]


def summaries(view: WorkingView) -> list[int]:
    return [i for i, item in enumerate(view.items) if item.kind == "summary"]


# -- nothing runs that is not needed ---------------------------------------------------------------
@pytest.mark.guarantee("under-target-no-op")
def test_under_target_no_strategy_runs_and_no_summarizer_call() -> None:
    """Under the target the history comes back unchanged and the summarizer is never asked."""
    messages = history()
    summarizer = FunctionSummarizer.returning(SHORT)
    out, report = compact(messages, target=tokens(messages) + 50, summarizer=summarizer)
    assert out == messages
    assert summarizer.calls == 0
    assert report.strategies == ()
    assert report.events == ()


@pytest.mark.guarantee("cheapest-first")
def test_clearing_tool_results_is_enough_so_nothing_else_runs() -> None:
    """When clearing old tool output reaches the target, neither Summarize nor SlidingWindow
    runs, whatever the order after it."""
    messages = history()
    before = tokens(messages)
    summarizer = FunctionSummarizer.returning(SHORT)
    for pipeline in (None, Pipeline([ClearToolResults(), SlidingWindow(), Summarize()])):
        out, report = compact(
            messages, target=before - 600, pipeline=pipeline, summarizer=summarizer
        )
        assert [s.name for s in report.strategies] == ["clear_tool_results"]
        assert report.fits
        assert len(out) == len(messages)
        assert [m.role for m in out] == [m.role for m in messages]
    assert summarizer.calls == 0


# -- clearing tool results -------------------------------------------------------------------------
@pytest.mark.guarantee("clearing-keeps-recent-and-small")
def test_clearing_leaves_newest_steps_and_small_results_and_says_how_to_recall() -> None:
    """ClearToolResults keeps the newest `keep_steps` steps and results under `min_tokens`; each
    placeholder names the tool and the call id and says where the full output is kept."""
    messages = [SYSTEM, Message("user", "Inspect the repository.")]
    messages += step("big1", 300, name="read_file")
    messages += step("tiny", 20, name="grep")
    messages += step("big2", 300, name="bash")
    messages += step("newest", 300, name="bash")
    view = view_of(messages, target=10, keep_steps=1)
    apply(ClearToolResults(keep_steps=1, min_tokens=100), view)
    out = view.messages
    by_id = {m.tool_call_id: m for m in out if m.role == "tool"}
    assert by_id["newest"] == messages[-1]  # the newest step stays whole
    assert by_id["tiny"] == messages[5]  # a 20-word result is under min_tokens
    for call_id, tool in (("big1", "read_file"), ("big2", "bash")):
        text = by_id[call_id].text
        assert tool in text and call_id in text
        assert "session log" in text and "recall" in text
    assert errors(out) == []


@pytest.mark.guarantee("clearing-keeps-recent-and-small")
def test_keep_steps_two_keeps_the_two_newest_steps() -> None:
    """With keep_steps=2 the two newest steps keep their output, older ones are cleared."""
    messages = [SYSTEM, Message("user", "go")]
    for name in ("a", "b", "c", "d"):
        messages += step(name, 300)
    view = view_of(messages, target=10, keep_steps=2)
    apply(ClearToolResults(keep_steps=2, min_tokens=0), view)
    kept = [
        m.tool_call_id
        for m, old in zip(view.messages, messages, strict=True)
        if m.role == "tool" and m == old
    ]
    assert kept == ["c", "d"]


@pytest.mark.guarantee("clearing-keeps-recent-and-small")
def test_clearing_the_newest_step_is_refused() -> None:
    """`ClearToolResults(keep_steps=0)` is a configuration error: the newest results are never
    cleared, and a budget with `keep_steps=0` does not clear them either."""
    with pytest.raises(ConfigurationError, match="keep_steps"):
        ClearToolResults(keep_steps=0)
    messages = [SYSTEM, Message("user", "go")]
    for name in ("a", "b", "newest"):
        messages += step(name, 300)
    view = view_of(messages, target=10, keep_steps=0)
    apply(ClearToolResults(min_tokens=0, keep_tail=False), view)
    assert view.messages[-1] == messages[-1]
    assert view.messages[3] != messages[3]


@pytest.mark.guarantee("micro-compaction")
def test_micro_compaction_keeps_call_ids_and_short_results() -> None:
    """Long tool results become a placeholder that keeps the call id (the history stays valid);
    short results stay exactly as they were."""
    messages = [SYSTEM, Message("user", "Look around.")]
    sizes = {"long1": 400, "short1": 10, "long2": 250, "short2": 30, "last": 400}
    for call_id, size in sizes.items():
        messages += step(call_id, size)
    out, report = compact(messages, target=500, pipeline=Pipeline([ClearToolResults()]))
    results = {m.tool_call_id: m for m in out if m.role == "tool"}
    assert set(results) == set(sizes)  # every call id is still answered
    for call_id in ("long1", "long2"):
        assert results[call_id].text.startswith("[ctxfold: output of")
        assert call_id in results[call_id].text
    originals = {m.tool_call_id: m for m in messages if m.role == "tool"}
    for call_id in ("short1", "short2", "last"):
        assert results[call_id] == originals[call_id]
    assert errors(out) == []
    assert report.tokens_after < report.tokens_before


# -- the sliding window ----------------------------------------------------------------------------
@pytest.mark.guarantee("window-drops-oldest-whole")
def test_window_drops_whole_old_turns_first_leaving_one_note() -> None:
    """SlidingWindow drops the oldest whole turns, leaves one note with the count, and the first
    kept message after the note starts a turn; the current task is untouched."""
    messages = history(turns=4)
    view = view_of(messages, target=tokens(messages) - 700)
    apply(SlidingWindow(), view)
    out, items = view.messages, view.items
    notes = [i for i, item in enumerate(items) if item.kind == "note"]
    assert notes == [1]
    assert out[0] == SYSTEM
    assert out[2].role == "user" and out[2].text.startswith("Task ")  # a whole turn follows
    dropped = len(messages) - (len(out) - 1)
    assert f"{dropped} messages" in out[1].text
    assert out[-5:] == messages[-5:]  # the current task, verbatim
    assert view.fits
    assert errors(out) == []


@pytest.mark.guarantee("window-drops-oldest-whole")
def test_window_then_drops_old_steps_of_the_current_task() -> None:
    """When dropping every earlier turn is not enough, whole steps of the current task go, oldest
    first; the system block, the current request and the newest step always survive."""
    messages = history(turns=2, task_steps=4)
    newest = messages[-2:]
    view = view_of(messages, target=400)
    apply(SlidingWindow(), view)
    out = view.messages
    assert out[0] == SYSTEM
    assert CURRENT in out
    assert out[-2:] == newest
    kinds = [item.kind for item in view.items]
    assert kinds.count("note") <= 2  # one for the earlier turns, one inside the task at most
    assert all(not (a == b == "note") for a, b in pairwise(kinds))
    kept_steps = [m for m in out if m.role == "assistant" and m.tool_calls]
    assert 1 <= len(kept_steps) < 4
    assert errors(out) == []


# -- summarizing -----------------------------------------------------------------------------------
@pytest.mark.guarantee("summary-request-scope")
def test_first_request_covers_oldest_turns_without_system_or_current_request() -> None:
    """The first summarizer request starts with the oldest turn and holds neither the system
    block nor the current request."""
    messages = history(turns=4)
    summarizer = FunctionSummarizer.returning(SHORT)
    compact(messages, target=600, pipeline=Pipeline([Summarize()]), summarizer=summarizer)
    first = summarizer.requests[0]
    assert first.tier == "turns"
    assert first.messages[0] == messages[1]
    assert SYSTEM not in first.messages
    assert CURRENT not in first.messages
    for request in summarizer.requests:
        assert SYSTEM not in request.messages and CURRENT not in request.messages


def stepwise() -> Summarize:
    """A Summarize that can take only about one old turn per round."""
    return Summarize(summary_tokens=64, max_stretch_tokens=450)


@pytest.mark.guarantee("summarize-stops-at-last-good-round")
def test_decline_stops_and_keeps_the_rounds_that_worked() -> None:
    """A decline in round two stops summarizing; round one's summary stays, the rest is as it
    was."""
    messages = history(turns=4)
    summarizer = FunctionSummarizer.returning(SHORT, None)
    view = view_of(messages, target=200)
    accounts = run(Pipeline([stepwise()]), view, summarizer)
    assert summarizer.calls == 2
    assert len(summaries(view)) == 1
    assert any("declined" in note for note in accounts.notes)
    # Everything after the one summarized stretch is the original history, in order.
    summary = summaries(view)[0]
    rest = view.messages[summary + 1 :]
    assert rest == messages[len(messages) - len(rest) :]


@pytest.mark.guarantee("summarize-stops-at-last-good-round")
def test_exception_stops_and_keeps_the_rounds_that_worked() -> None:
    """A summarizer that raises in round two stops summarizing; round one's summary stays and
    the error is recorded."""
    answers = iter([SHORT])

    def flaky(request: SummaryRequest) -> str:
        try:
            return next(answers)
        except StopIteration:
            raise TimeoutError("model timed out") from None

    summarizer = FunctionSummarizer(flaky)
    view = view_of(history(turns=4), target=200)
    accounts = run(Pipeline([stepwise()]), view, summarizer)
    assert summarizer.calls == 2
    assert len(summaries(view)) == 1
    assert accounts.errors == ["TimeoutError: model timed out"]
    assert isinstance(accounts.failure, TimeoutError)


@pytest.mark.guarantee("summarize-stops-at-last-good-round")
def test_a_summary_no_smaller_than_its_stretch_is_refused() -> None:
    """A round whose summary is no smaller than the stretch is refused and stops summarizing."""
    bloated = words(2000, "bloat")
    summarizer = FunctionSummarizer.returning(SHORT, bloated)
    view = view_of(history(turns=4), target=200)
    accounts = run(Pipeline([stepwise()]), view, summarizer)
    assert summarizer.calls == 2
    assert len(summaries(view)) == 1
    assert all(bloated not in m.text for m in view.messages)
    assert any("no smaller" in note for note in accounts.notes)


@pytest.mark.guarantee("plain-before-combined")
def test_summaries_are_combined_only_after_every_plain_turn_is_summarized() -> None:
    """Rounds summarize every plain earlier turn before any request combines summaries, and a
    combining request holds only summaries."""
    messages = history(turns=5)
    summarizer = FunctionSummarizer.returning(SHORT)
    view = view_of(messages, target=150)
    run(Pipeline([stepwise()]), view, summarizer)
    tiers = [r.tier for r in summarizer.requests]
    assert "summaries" in tiers
    first_combine = tiers.index("summaries")
    assert set(tiers[:first_combine]) == {"turns"}
    # The turns rounds read every message before the current request once.
    read = [m for r in summarizer.requests[:first_combine] for m in r.messages]
    assert read == messages[1 : messages.index(CURRENT)]
    for request in summarizer.requests[first_combine:]:
        if request.tier in ("summaries", "task-summaries"):
            assert request.synthetic == frozenset(range(len(request.messages)))


def framed(label: str) -> Message:
    """An earlier summary, as a list that ctxfold compacted before holds it."""
    body = f"## Work done\n- {words(60, label)}"
    return Message("user", frame_summary(body, first_seq=2, last_seq=9))


@pytest.mark.guarantee("plain-before-combined")
def test_a_short_plain_stretch_between_summaries_is_summarized_and_they_combine() -> None:
    """Two summaries with a plain stretch between them too short to summarize alone: the short
    stretch is summarized together with the summaries beside it, read once, and the run reaches
    the target the pinned messages allow instead of stalling."""
    short = [Message("user", "Task 1: tidy src/old.py"), Message("assistant", "Done.")]
    messages = [SYSTEM, framed("a"), *short, framed("b"), CURRENT, *step("now", 40)]
    view = view_of(messages, target=180)
    assert view.pinned_tokens() < 180 < view.total
    summarizer = FunctionSummarizer.returning(SHORT)
    run(Pipeline([Summarize()]), view, summarizer)
    assert view.fits
    (request,) = summarizer.requests
    assert list(request.messages) == messages[1:5]
    assert request.synthetic == frozenset({0, 3})
    assert [item.kind for item in view.items].count("summary") == 1


@pytest.mark.guarantee("plain-before-combined")
def test_a_short_stretch_waits_until_every_long_plain_stretch_is_summarized() -> None:
    """Only once no plain stretch of the region can be summarized alone is a short one taken
    with the summaries beside it."""
    short = [Message("user", "Task 1: tidy src/old.py"), Message("assistant", "Done.")]
    long_turn = [Message("user", "Task 2: port src/io.py"), *step("io", 300)]
    messages = [SYSTEM, framed("a"), *short, framed("b"), *long_turn, CURRENT, *step("now", 40)]
    summarizer = FunctionSummarizer.returning(SHORT)
    view = view_of(messages, target=200)
    run(Pipeline([Summarize()]), view, summarizer)
    assert view.fits
    first, *rest = summarizer.requests
    assert first.tier == "turns" and first.synthetic == frozenset()
    assert [m.text for m in first.messages][:1] == [long_turn[0].text]
    assert rest and all(
        set(range(len(r.messages))) - r.synthetic == set() or r.tier == "turns" for r in rest
    )


@pytest.mark.guarantee("unreachable-target-terminates")
def test_unreachable_target_terminates_without_wasted_calls() -> None:
    """At a target nothing can reach, Summarize stops; every call it made became a summary, so
    no call was made once nothing more could be given up."""
    messages = history(turns=5)
    summarizer = FunctionSummarizer.returning(SHORT)
    view = view_of(messages, target=1)
    accounts = run(Pipeline([stepwise()]), view, summarizer)
    assert not view.fits
    assert summarizer.calls == len(view.edits) > 0
    assert accounts.effects[0].edits == summarizer.calls
    # Running it again on what it left makes no call at all.
    again = FunctionSummarizer.returning(SHORT)
    run(Pipeline([stepwise()]), view, again)
    assert again.calls == 0


@pytest.mark.guarantee("unreachable-target-terminates")
def test_pinned_only_history_makes_no_summarizer_call() -> None:
    """A history of only pinned messages is never sent to the summarizer, whatever the target."""
    messages = [SYSTEM, CURRENT, *step("only", 500)]
    summarizer = FunctionSummarizer.returning(SHORT)
    out, report = compact(messages, target=10, summarizer=summarizer)
    assert summarizer.calls == 0
    assert out == messages
    assert not report.fits


@pytest.mark.parametrize("answer", ["record", "instructions"])
@pytest.mark.guarantee("echo-rejected")
def test_an_echo_is_not_accepted_as_a_summary(answer: str) -> None:
    """A summarizer that sends back its input record or its own instructions is not accepted:
    nothing is replaced and the run notes why."""

    def echo(request: SummaryRequest) -> str:
        return str(getattr(request, answer))

    messages = history(turns=3)
    view = view_of(messages, target=300)
    accounts = run(Pipeline([Summarize()]), view, FunctionSummarizer(echo))
    assert view.edits == []
    assert view.messages == messages
    assert any("echo" in note for note in accounts.notes)


# -- what stays verbatim ---------------------------------------------------------------------------
def verbatim_tail(out: Sequence[Message], original: Sequence[Message]) -> int:
    """How many trailing messages `out` shares verbatim with `original`."""
    n = 0
    while n < min(len(out), len(original)) and out[-1 - n] == original[-1 - n]:
        n += 1
    return n


@pytest.mark.parametrize("keep", [150, 300, 500])
@pytest.mark.guarantee("recent-tail-kept")
def test_keep_recent_tokens_keeps_a_verbatim_tail_from_a_safe_cut(keep: int) -> None:
    """At least `keep_recent_tokens` of the newest tokens stay verbatim, and the verbatim tail
    starts at a safe cut point (never between a call and its result)."""
    messages = history(turns=4)
    for pipeline in (None, Pipeline([ClearToolResults(), SlidingWindow(), Summarize()])):
        out, report = compact(messages, target=1200, pipeline=pipeline, keep_recent_tokens=keep)
        assert report.fits
        n = verbatim_tail(out, messages)
        assert tokens(out[-n:]) >= keep
        assert len(messages) - n in analyze(messages).cuts


@pytest.mark.guarantee("system-prompt-kept")
def test_system_prompt_survives_and_summaries_land_before_the_tail() -> None:
    """However small the target, the system prompt is the first message, unchanged, and every
    summary stands before the verbatim recent tail."""
    messages = [SYSTEM, Message("system", "Tools: bash, read_file."), *history()[1:]]
    for target in (1500, 800, 400, 100):
        out, _ = compact(
            messages,
            target=target,
            summarizer=FunctionSummarizer.returning(SHORT),
            keep_recent_tokens=200,
        )
        assert out[:2] == messages[:2]
        tail_start = len(out) - verbatim_tail(out, messages)
        synthetic = [i for i, m in enumerate(out) if m.text.startswith("[ctxfold: summary")]
        assert all(i < tail_start for i in synthetic)
        assert errors(out) == []


# -- when the pinned messages alone are too big ----------------------------------------------------
@pytest.mark.guarantee("fits-or-smallest")
def test_pinned_over_target_is_reported_and_view_is_pinned_plus_notes() -> None:
    """When the pinned messages alone exceed the target, the report says so (`fits` False,
    `pinned_tokens` over the target) and the view holds only the pinned messages, with at most
    one note between two of them."""
    messages = history(turns=3, task_steps=3)
    messages[-1] = messages[-1].replace(content=words(600, "huge"))
    for pipeline in (None, Pipeline([ClearToolResults(), SlidingWindow(), Summarize()])):
        out, report = compact(messages, target=300, pipeline=pipeline)
        assert not report.fits
        assert report.pinned_tokens > report.target
        pinned = [SYSTEM, CURRENT, *messages[-2:]]
        notes = [m for m in out if m not in pinned]
        assert all(m.text.startswith("[ctxfold: earlier history dropped") for m in notes)
        assert [m for m in out if m in pinned] == pinned
        flags = [m in notes for m in out]
        assert not any(a and b for a, b in pairwise(flags))
        assert errors(out) == []


@pytest.mark.guarantee("fits-or-smallest")
def test_target_met_whenever_the_smallest_view_fits() -> None:
    """At every target from tiny to generous, either the result fits or the report shows that
    what cannot be given up is already over the target."""
    messages = history(turns=4)
    for pipeline in (None, Pipeline([ClearToolResults(), SlidingWindow(), Summarize()])):
        for target in range(40, tokens(messages) + 40, 40):
            out, report = compact(messages, target=target, pipeline=pipeline)
            assert report.fits or report.pinned_tokens > report.target, (target, report)
            assert errors(out) == []


def test_pipeline_refuses_objects_that_are_not_strategies() -> None:
    """A Pipeline only takes objects with a name and a run(view) method, and says which one."""
    with pytest.raises(TypeError, match="not a Strategy"):
        Pipeline([ClearToolResults(), object()])  # type: ignore[list-item]


def test_a_summary_applied_is_counted_from_the_lines_its_summarizer_weighed() -> None:
    """Applying a summary whose lines the run weighed before (its summarizer fitted it line by
    line) tokenizes only the lines nobody weighed (the frame), and counts the summary exactly as
    the counter counts the message."""
    from ctxfold.tokens import TiktokenCounter
    from ctxfold.tokens.tally import TextCounts

    pytest.importorskip("bpe_openai")
    exact = TiktokenCounter("o200k_base")
    messages = agent_history(turns=4, steps=2)
    snapshot = Snapshot.of_messages(messages, exact)
    text_counts = TextCounts(exact)
    rules = Rules(exact, keep_user_tokens=0, count_text=text_counts)
    view = WorkingView(snapshot, 10, rules)
    summary = "\n".join(f"- step {i}: edited src/mod{i}.py and ran pytest -q" for i in range(40))
    text_counts.lines(summary)  # the summarizer's last weighing of its draft
    framed = Message("user", frame_summary(summary, "user"))
    cuts = sorted(view.structure().cuts)
    start, end = cuts[1], cuts[-2]
    before = view.total - view.tokens(start, end)
    with tokenized_by(exact) as tokenized:
        assert view.apply(Replace(start, end, framed, "summary", protected=frozenset()), "test")
    assert not any("step 7: edited" in text for text in tokenized), tokenized
    assert view.total == before + TiktokenCounter("o200k_base").count_message(framed)
