"""The list API (`ctxfold.compact`, `ctxfold compact FILE`) fed its own output: the summaries and
notes it wrote are read back as summaries and notes, in memory and through JSONL files of both
formats; and a summarizer that raises makes it decline, keeping the last round that worked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ctxfold
from _cli import run_cli
from ctxfold.compactor import Compacted
from ctxfold.messages import Message, read_jsonl, validate, write_jsonl
from ctxfold.messages.frames import frame_kind
from ctxfold.pipeline import Pipeline, SlidingWindow, Summarize
from ctxfold.summarizers import SummaryRequest
from ctxfold.testing.counters import FixedCounter
from ctxfold.testing.doubles import FunctionSummarizer
from ctxfold.tokens import Budget
from tests._histories import step, words

COUNTER = FixedCounter()
BUDGET = Budget(window=100_000, keep_recent_tokens=0)
SYSTEM = Message("system", "You are a careful coding agent.")
TASK = Message(
    "user",
    "Fix the crash in src/app/loader.py when the config file is empty. " + words(300, "detail"),
)
SHORT = "## Objective\n- fix the loader\n## Work done\n- read the modules"


def task_history(steps: int = 8) -> list[Message]:
    """A system prompt, one long task, and `steps` steps of 600-word outputs."""
    messages = [SYSTEM, TASK]
    for number in range(steps):
        messages += step(f"c{number}", 600)
    return messages


def compact(messages: list[Message], target: int, summarizer: object) -> Compacted:
    return ctxfold.compact_messages(
        messages,
        BUDGET,
        pipeline=Pipeline([Summarize()]),
        summarizer=summarizer,  # type: ignore[arg-type]
        counter=COUNTER,
        target=target,
    )


def read_task(requests: list[SummaryRequest]) -> bool:
    return any(TASK.text in m.text for r in requests for m in r.messages)


# -- its own output, read back ---------------------------------------------------------------------
@pytest.mark.guarantee("own-output-recognised")
def test_a_summary_fed_back_to_the_list_api_is_read_as_a_summary_not_as_the_request() -> None:
    """Compact, append one step, compact again: the real task stays verbatim and pinned, the
    earlier summary is summarized with its neighbours, and no summarizer ever reads the task."""
    summarizer = FunctionSummarizer.returning(SHORT)
    first = compact(task_history(), 4000, summarizer)
    assert first.report.landed and first.report.fits
    again = first.messages + step("c8", 600)
    second = compact(again, 1050, summarizer)
    assert second.report.landed
    assert TASK in second.messages
    assert second.messages.index(TASK) == 1
    assert not read_task(summarizer.requests)
    # The old summary was combined with the summary of the step after it, as a summary.
    assert [frame_kind(m) for m in second.messages].count("summary") == 1
    combined = summarizer.requests[-1]
    assert combined.tier == "task-summaries"
    assert combined.synthetic == frozenset(range(len(combined.messages)))
    assert [p for p in validate(second.messages) if p.severity == "error"] == []


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
@pytest.mark.guarantee("own-output-recognised")
def test_a_summary_read_back_from_a_jsonl_file_is_still_a_summary(fmt: str, tmp_path: Path) -> None:
    """Written to JSONL (either format) and read back, a compacted history compacts again with
    its summary recognised: the task is never summarized away."""
    summarizer = FunctionSummarizer.returning(SHORT)
    first = compact(task_history(), 4000, summarizer)
    path = tmp_path / "once.jsonl"
    write_jsonl(path, first.messages, format=fmt)  # type: ignore[arg-type]
    back = read_jsonl(path)
    assert [frame_kind(m) for m in back].count("summary") == 1
    second = compact(back + step("c8", 600), 1300, summarizer)
    assert second.report.landed
    assert any(m.text == TASK.text for m in second.messages)
    assert not read_task(summarizer.requests)


@pytest.mark.guarantee("own-output-recognised")
def test_a_note_fed_back_is_read_as_a_note() -> None:
    """A sliding-window note in a list is ctxfold's own note: compacting again may drop it
    with its neighbours, and it never passes for the user's request."""
    messages = [SYSTEM, TASK, *[m for n in range(8) for m in step(f"c{n}", 600)]]
    first = ctxfold.compact_messages(
        messages, BUDGET, pipeline=Pipeline([SlidingWindow()]), counter=COUNTER, target=2500
    )
    notes = [m for m in first.messages if frame_kind(m) == "note"]
    assert len(notes) == 1
    second = ctxfold.compact_messages(
        first.messages + step("c8", 600),
        BUDGET,
        pipeline=Pipeline([SlidingWindow()]),
        counter=COUNTER,
        target=1400,
    )
    assert second.messages.index(TASK) == 1
    assert [frame_kind(m) for m in second.messages].count("note") == 1


@pytest.mark.guarantee("own-output-recognised")
def test_the_cli_compacts_its_own_output_without_losing_the_task(tmp_path: Path) -> None:
    """`ctxfold compact` run on its own output keeps the real request verbatim."""
    source = tmp_path / "run.jsonl"
    once = tmp_path / "once.jsonl"
    twice = tmp_path / "twice.jsonl"
    messages = [SYSTEM, Message("user", "Fix the crash in src/app/loader.py on an empty config.")]
    for number in range(150):
        messages += step(f"c{number}", 60)
    write_jsonl(source, messages)
    for src, out, window in ((source, once, "16000"), (once, twice, "9000")):
        args = ["compact", str(src), "--window", window, "-o", str(out), "--json"]
        outcome = run_cli(args, how="runner", home=tmp_path)
        assert outcome.code == 0, outcome.stderr
        assert json.loads(outcome.stdout)["valid"] is True
    result = read_jsonl(twice)
    assert result[1].text == messages[1].text
    assert all(frame_kind(m) is None for m in result[:2])


# -- a summarizer that raises ----------------------------------------------------------------------
@pytest.mark.guarantee("list-api-declines")
def test_a_raising_summarizer_makes_the_list_api_decline_not_raise() -> None:
    """When the summarizer raises on the first round, `compact` returns the list unchanged with
    the outcome "failed" and the error in the report."""
    messages = task_history()
    out = compact(messages, 4000, FunctionSummarizer.raising(RuntimeError("model is down")))
    assert out.messages == messages
    assert out.report.outcome == "failed"
    assert out.report.error is not None and "model is down" in out.report.error
    assert out.events == []


@pytest.mark.guarantee("list-api-declines")
def test_a_raise_in_a_later_round_keeps_the_rounds_that_worked() -> None:
    """A summarizer that works once and then raises: the list comes back as the first round
    left it, and the report says why the rounds stopped."""
    calls: list[int] = []

    def flaky(request: SummaryRequest) -> str:
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("rate limited")
        return SHORT

    messages = [SYSTEM, TASK]
    for turn in range(4):
        messages += [Message("user", f"Old task {turn}: tidy src/old{turn}.py")]
        messages += step(f"o{turn}a", 600) + step(f"o{turn}b", 600)
    messages += [Message("user", "Now the current task."), *step("now", 50)]
    # One old turn per round, so that the second round is a second call.
    out = ctxfold.compact_messages(
        messages,
        BUDGET,
        pipeline=Pipeline([Summarize(max_stretch_tokens=1300)]),
        summarizer=FunctionSummarizer(flaky),
        counter=COUNTER,
        target=1500,
    )
    assert len(calls) == 2
    assert out.report.landed
    assert len(out.events) == 1
    assert [frame_kind(m) for m in out.messages].count("summary") == 1
    assert out.report.error is not None and "rate limited" in out.report.error
    assert any("raised" in note for note in out.report.notes)


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("hello", "takes a list of Message values, not a str"),
        ({"role": "user", "content": "hi"}, "takes a list of Message values, not a dict"),
        ([{"role": "user", "content": "hi"}], "message 0 is a dict, .*from_openai"),
        ([], "at least one message"),
    ],
)
def test_what_is_not_a_list_of_messages_is_refused_by_what_it_is(given: object, says: str) -> None:
    """compact_messages names the value it was given: a string or a dict is not iterated (which
    would blame its first character or key), and a provider's dict is pointed to its reader."""
    from ctxfold.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match=says):
        ctxfold.compact_messages(given, Budget(window=4_000))  # type: ignore[arg-type]
