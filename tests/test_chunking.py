"""Bounded summarizer input: a stretch larger than the summarizer's window is read in pieces."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ctxfold.errors import SummarizerError
from ctxfold.messages import Message, ToolCall
from ctxfold.messages.structure import analyze
from ctxfold.summarizers.chunking import Bound, adrive, bounded, drive
from ctxfold.summarizers.prompt import build_request
from ctxfold.summarizers.request import SummaryRequest, SummaryResult
from ctxfold.testing.transcripts import generate
from ctxfold.tokens.heuristic import HeuristicCounter

COUNTER = HeuristicCounter()


def stretch(steps: int = 40) -> list[Message]:
    """An agent history without its system block, as the engine hands a stretch over."""
    history = generate(seed=7, steps=steps)
    return history[analyze(history).system_end :]


def size_of(messages: list[Message]) -> int:
    return sum(COUNTER.count_message(m) for m in messages)


class Recorder:
    """A send that answers each request with a short summary and records what it was asked."""

    def __init__(self, answer: Callable[[SummaryRequest], str | None] | None = None) -> None:
        self.requests: list[SummaryRequest] = []
        self.answer = answer or (lambda r: f"## Objective\n- part with {len(r.messages)} messages")

    def __call__(self, request: SummaryRequest) -> SummaryResult:
        self.requests.append(request)
        return SummaryResult(
            self.answer(request), model="m", input_tokens=100, output_tokens=10, calls=1
        )


def test_a_stretch_that_fits_is_sent_once_unchanged() -> None:
    """A stretch inside the window goes out as the very request the engine made, in one call."""
    request = build_request(stretch(6), max_tokens=500)
    send = Recorder()
    result = drive(bounded(request, Bound(window=200_000, max_output=500)), send)
    assert send.requests == [request]
    assert result.calls == 1


def test_an_oversized_stretch_is_read_in_pieces_that_each_fit() -> None:
    """Every request sent for an oversized stretch fits the window, and together the pieces
    cover the whole stretch in order, each starting at a safe cut point."""
    messages = stretch()
    bound = Bound(window=8_000, max_output=500)
    request = build_request(messages, max_tokens=500)
    assert bound.size(request) > bound.limit
    send = Recorder()
    drive(bounded(request, bound), send)
    assert len(send.requests) >= 3
    assert all(bound.size(sent) <= bound.limit for sent in send.requests)
    pieces = send.requests[:-1]
    assert [m for piece in pieces for m in piece.messages] == messages
    cuts = analyze(messages).cuts
    start = 0
    for piece in pieces:
        assert start in cuts
        start += len(piece.messages)


def test_piece_summaries_are_combined_as_earlier_summaries_to_update() -> None:
    """The final request holds the piece summaries, marked as earlier summaries, on the
    "summaries" tier, and keeps the identifiers of the whole stretch to preserve."""
    request = build_request(stretch(), max_tokens=500)
    send = Recorder()
    drive(bounded(request, Bound(window=8_000, max_output=500)), send)
    combine = send.requests[-1]
    pieces = send.requests[:-1]
    assert len(combine.messages) == len(pieces)
    assert combine.synthetic == frozenset(range(len(pieces)))
    assert combine.tier == "summaries"
    assert combine.identifiers == request.identifiers
    assert all(f"part with {len(p.messages)} messages" in combine.record for p in pieces)


def test_usage_is_summed_over_every_call() -> None:
    """The result reports the tokens and calls of all pieces and of the combining call."""
    request = build_request(stretch(), max_tokens=500)
    send = Recorder()
    result = drive(bounded(request, Bound(window=8_000, max_output=500)), send)
    calls = len(send.requests)
    assert (result.calls, result.input_tokens, result.output_tokens) == (
        calls,
        100 * calls,
        10 * calls,
    )
    assert result.model == "m"
    assert any("pieces" in note for note in result.notes)


def test_a_unit_larger_than_a_piece_is_clipped_with_a_marker() -> None:
    """A parallel batch of tool outputs too large for any piece is shortened in the summarizer's
    copy only, each output keeping its start and end around a marker; the request then fits."""
    calls = tuple(ToolCall(f"call_{i}", "shell", f'{{"cmd": "cat part{i}.log"}}') for i in range(4))
    outputs = [f"BEGIN {i} " + "row of output\n" * 250 + f" END {i}" for i in range(4)]
    messages = [
        Message("user", "read the four logs"),
        Message("assistant", None, calls),
        *(Message("tool", out, tool_call_id=f"call_{i}") for i, out in enumerate(outputs)),
    ]
    bound = Bound(window=4_000, max_output=500)
    assert size_of(messages[1:]) > bound.limit
    send = Recorder()
    drive(bounded(build_request(messages, max_tokens=500), bound), send)
    assert all(bound.size(sent) <= bound.limit for sent in send.requests)
    read = [m for sent in send.requests for m in sent.messages if m.role == "tool"]
    assert len(read) == 4
    for i, message in enumerate(read):
        assert "left out of the summarizer's copy" in message.text
        assert message.text.startswith(f"BEGIN {i}") and message.text.endswith(f"END {i}")
    assert [m.text for m in messages[2:]] == outputs


def test_a_declining_piece_declines_the_whole_without_combining() -> None:
    """When one piece declines, the result is a decline naming that piece; nothing is combined."""
    send = Recorder(lambda r: None if len(send.requests) == 2 else "## Objective\n- part")
    request = build_request(stretch(), max_tokens=500)
    result = drive(bounded(request, Bound(window=8_000, max_output=500)), send)
    assert result.text is None
    assert len(send.requests) == 2
    assert any("piece 2 of" in note for note in result.notes)


def test_an_overflow_reported_by_the_model_replans_smaller() -> None:
    """When the model says a request overflowed (our count ran low), that request is read again
    in smaller pieces instead of failing."""
    model_limit = 3_000
    sent: list[SummaryRequest] = []

    def send(request: SummaryRequest) -> SummaryResult:
        sent.append(request)
        size = Bound(window=1, max_output=0).size(request)
        if size > model_limit:
            overflow = ValueError(f"This model's maximum context length is {model_limit} tokens")
            raise SummarizerError("the model refused the prompt") from overflow
        return SummaryResult("## Objective\n- part", model="m", input_tokens=size)

    request = build_request(stretch(), max_tokens=500)
    result = drive(bounded(request, Bound(window=50_000, max_output=500)), send)
    assert result.text
    assert any("re-planned" in note for note in result.notes)
    accepted = [r for r in sent if Bound(window=1, max_output=0).size(r) <= model_limit]
    assert accepted and len(accepted) < len(sent)


def test_an_error_that_is_not_an_overflow_propagates() -> None:
    """A failure other than an overflow is raised to the caller as it was, not retried."""
    calls: list[SummaryRequest] = []

    def send(request: SummaryRequest) -> SummaryResult:
        calls.append(request)
        raise SummarizerError("the server answered 500")

    with pytest.raises(SummarizerError, match="500"):
        drive(bounded(build_request(stretch(4)), Bound(window=50_000, max_output=500)), send)
    assert len(calls) == 1


def test_a_window_that_leaves_no_room_for_a_prompt_is_a_clear_error() -> None:
    """A window no larger than the answer's reserve fails with an error naming the window."""
    with pytest.raises(SummarizerError, match="window"):
        drive(bounded(build_request(stretch(4)), Bound(window=600, max_output=600)), Recorder())


async def test_the_async_driver_sends_the_same_requests() -> None:
    """Driving the same stretch with an async send produces the same requests and result."""
    request = build_request(stretch(), max_tokens=500)
    bound = Bound(window=8_000, max_output=500)
    sync_send = Recorder()
    expected = drive(bounded(request, bound), sync_send)
    async_seen = Recorder()

    async def send(request: SummaryRequest) -> SummaryResult:
        return async_seen(request)

    result = await adrive(bounded(request, bound), send)
    assert async_seen.requests == sync_send.requests
    assert result == expected
