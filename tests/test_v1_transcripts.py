"""`history-always-valid` and `identifiers-survive` on the shared real transcripts: at every window
from 4,000 to 64,000 tokens, with the
default ladder and the reference ladder, in one shot and as a live agent would, the compacted
history is valid, meets the target whenever that is possible, and keeps every identifier of what
was summarized."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from conftest import transcript_params
from ctxfold.compactor import CompactionReport, Compactor, compact_messages
from ctxfold.messages import Message
from ctxfold.messages.jsonl import read_jsonl
from ctxfold.messages.validity import validate
from ctxfold.pipeline import ClearToolResults, Pipeline, SlidingWindow, Summarize
from ctxfold.storage import MemoryStore
from ctxfold.summarizers import ExtractiveSummarizer
from ctxfold.summarizers.identifiers import extract_identifiers
from ctxfold.testing.doubles import FunctionSummarizer
from ctxfold.tokens import Budget, counter

pytestmark = pytest.mark.transcripts

WINDOWS = (4_000, 8_000, 16_000, 32_000, 64_000)
COUNTER = counter("auto")


def ladders() -> dict[str, Pipeline | None]:
    return {
        "default": None,
        "reference": Pipeline([ClearToolResults(), SlidingWindow(), Summarize()]),
    }


def problems(messages: Sequence[Message]) -> list[str]:
    return [str(p) for p in validate(messages) if p.severity == "error"]


def check(report: CompactionReport, messages: Sequence[Message], where: str) -> None:
    assert problems(messages) == [], where
    assert report.error is None, where
    assert report.fits or report.pinned_tokens > report.target, (where, report.describe())


@pytest.mark.parametrize("path", transcript_params())
@pytest.mark.guarantee("history-always-valid")
def test_compact_messages_is_valid_and_meets_the_target(path: Path) -> None:
    """compact_messages on a real transcript, at windows 4k to 64k with both ladders: no
    error-severity problem, and the target met whenever the pinned messages fit it."""
    messages = read_jsonl(path)
    for window in WINDOWS:
        for name, pipeline in ladders().items():
            out = compact_messages(
                messages, Budget(window=window), pipeline=pipeline, counter=COUNTER
            )
            check(out.report, out.messages, f"{path.stem} {window} {name}")
            assert out.messages[0] == messages[0]


@pytest.mark.parametrize("path", transcript_params())
@pytest.mark.guarantee("history-always-valid")
def test_live_replay_stays_valid_after_every_compaction(path: Path) -> None:
    """Replaying a transcript one message at a time, checking before each assistant message as
    an agent loop would: after every compaction the projection is valid and the target met
    whenever the pinned messages fit it, at windows 4k to 64k with both ladders."""
    messages = read_jsonl(path)
    for window in WINDOWS:
        for name, pipeline in ladders().items():
            session = MemoryStore().session("replay")
            compactor = Compactor(Budget(window=window), pipeline=pipeline, counter=COUNTER)
            for position, message in enumerate(messages):
                if message.role == "assistant":
                    report = compactor.maybe_compact(session)
                    if report is not None:
                        where = f"{path.stem} {window} {name} before message {position}"
                        check(report, session.messages(), where)
                session.append(message)
            assert problems(session.messages()) == []
            logged = [e.message for e in session.events() if e.type == "message"]
            assert logged == messages  # the log still holds every original


def view_text(messages: Sequence[Message]) -> str:
    parts: list[str] = []
    for message in messages:
        parts.append(message.text)
        for call in message.tool_calls:
            parts += [call.id, call.name, call.arguments]
    return "\n".join(parts)


@pytest.mark.parametrize("path", transcript_params())
@pytest.mark.guarantee("identifiers-survive")
def test_identifiers_of_summarized_stretches_survive_or_are_reported(path: Path) -> None:
    """Every identifier of every stretch sent to the summarizer appears verbatim in the compacted
    view, unless the report lists it as left out. Checked for the summarize-only ladder and for
    the default ladder wherever the sliding window did not have to drop summaries."""
    messages = read_jsonl(path)
    checked = 0
    for window in WINDOWS[:4]:
        for pipeline in (Pipeline([Summarize()]), None):
            summarizer = FunctionSummarizer(ExtractiveSummarizer())
            out = compact_messages(
                messages,
                Budget(window=window),
                pipeline=pipeline,
                summarizer=summarizer,
                counter=COUNTER,
            )
            report = out.report
            if "sliding_window" in [s.name for s in report.strategies]:
                # Dropping a summary loses what it kept; the report lists what it finds in the
                # dropped text, which need not match the originals' spans, so skip these runs.
                continue
            text = view_text(out.messages)
            for request in summarizer.requests:
                for identifier in extract_identifiers(request.messages):
                    assert identifier in text or identifier in report.left_out, (
                        f"{path.stem} {window}: {identifier!r} lost"
                    )
                    checked += 1
            assert report.identifiers_left_out == len(report.left_out)
    assert checked > 0 or len(messages) < 40
