"""How the engine treats summarizers: normalization, declines, echoes, fallback and redaction."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import transcript_params
from ctxfold.errors import SummarizerError
from ctxfold.messages import Message, ToolCall, read_jsonl
from ctxfold.summarizers import (
    ExtractiveSummarizer,
    FallbackSummarizer,
    SummaryRequest,
    SummaryResult,
    base,
    build_request,
    redact_secrets,
)
from ctxfold.summarizers.base import as_summarizer, is_decline, is_echo, normalize_result
from ctxfold.summarizers.prompt import instructions
from ctxfold.testing.doubles import FunctionSummarizer

SUMMARY = "## Objective\n- fix src/app.py\n## Decisions\n- nothing"


def stretch() -> list[Message]:
    call = ToolCall("call_1", "bash", json.dumps({"command": "python -m pytest tests/test_app.py"}))
    output = (
        "<returncode>1</returncode>\n"
        "tests/test_app.py::test_totals FAILED\n"
        "E   AssertionError: expected the totals of every invoice in the ledger to add up\n"
        "the ledger holds seventeen invoices from three customers over two fiscal years and "
        "each invoice carries a currency code, a net amount, a tax amount and a due date\n"
    )
    return [
        Message("user", "The totals in src/app.py are wrong for invoices with several currencies."),
        Message("assistant", "I'll run the app tests to see the failure.", (call,)),
        Message("tool", output, tool_call_id="call_1"),
    ]


def request() -> SummaryRequest:
    return build_request(stretch(), max_tokens=400)


# -- as_summarizer -----------------------------------------------------------------------------


def test_a_plain_function_is_a_sync_summarizer() -> None:
    """A sync function is called directly and its text becomes a SummaryResult."""
    summarizer = as_summarizer(lambda r: SUMMARY)
    assert summarizer.is_async is False
    assert summarizer(request()) == SummaryResult(SUMMARY)


async def test_an_async_function_is_an_async_summarizer() -> None:
    """An async function is marked async, awaited by acall, and refused by a sync call."""

    async def summarize(r: SummaryRequest) -> str:
        return SUMMARY

    summarizer = as_summarizer(summarize)
    assert summarizer.is_async is True
    assert await summarizer.acall(request()) == SummaryResult(SUMMARY)
    with pytest.raises(SummarizerError, match="async"):
        summarizer(request())


async def test_an_object_with_an_async_call_method_is_async() -> None:
    """An object whose __call__ is a coroutine function counts as async."""

    class Remote:
        async def __call__(self, r: SummaryRequest) -> SummaryResult:
            return SummaryResult(SUMMARY, model="remote", input_tokens=10)

    summarizer = as_summarizer(Remote())
    assert summarizer.is_async is True
    assert (await summarizer.acall(request())).model == "remote"


async def test_a_sync_summarizer_can_be_awaited() -> None:
    """acall works for sync summarizers too, so async drivers take any summarizer."""
    result = await as_summarizer(ExtractiveSummarizer()).acall(request())
    assert result.text is not None and result.text.startswith("## Objective")


def test_a_sync_call_that_returns_a_coroutine_is_a_clear_error() -> None:
    """A lambda that returns a coroutine cannot be used from sync code; the error says why."""

    async def later() -> str:
        return SUMMARY

    summarizer = as_summarizer(lambda r: later())
    with pytest.raises(SummarizerError, match="awaitable"):
        summarizer(request())


def test_something_that_cannot_be_called_is_refused() -> None:
    """Passing a non-callable as a summarizer fails at once with its type named."""
    with pytest.raises(TypeError, match="str"):
        as_summarizer("gpt-4o")


# -- results and declines ----------------------------------------------------------------------


@pytest.mark.guarantee("decline-writes-nothing")
def test_none_empty_and_blank_answers_are_declines() -> None:
    """None, "" and whitespace are declines; text is not."""
    assert is_decline(normalize_result(None))
    assert is_decline(normalize_result(""))
    assert is_decline(normalize_result("  \n "))
    assert not is_decline(normalize_result(SUMMARY))


def test_an_answer_of_the_wrong_type_is_a_summarizer_error() -> None:
    """A summarizer returning, say, a dict fails with a message naming the type."""
    with pytest.raises(SummarizerError, match="dict"):
        normalize_result({"text": SUMMARY})


# -- echoes (`echo-rejected`)


@pytest.mark.guarantee("echo-rejected")
def test_sending_back_the_prompt_is_an_echo() -> None:
    """A summary that repeats the instructions is not accepted."""
    req = request()
    assert is_echo(req.instructions, req)
    assert is_echo(f"Sure!\n{req.prompt}", req)


@pytest.mark.guarantee("echo-rejected")
def test_copying_the_input_is_an_echo() -> None:
    """A summary that reproduces the stretch's messages is not accepted."""
    req = request()
    copied = "\n".join(m.text for m in req.messages)
    assert is_echo(copied, req)


@pytest.mark.guarantee("echo-rejected")
def test_copying_half_the_stretch_is_an_echo_and_less_is_not() -> None:
    """The line is exact: a summary that copies runs covering half the stretch's words is an
    echo, however long the rest of the stretch; one word fewer is not."""
    words = [f"{a}{b}" for a in ("red", "blue", "green", "gold") for b in "klmnpqrstv"]
    stretch = build_request([Message("user", " ".join(words))])
    half = len(words) // 2
    assert is_echo(" ".join(words[:half]), stretch)
    assert not is_echo(" ".join(words[: half - 1]), stretch)


_ECHO_TEXTS = st.lists(
    st.sampled_from(["word", "Word", "w2", "_", " ", "\n", "\n\n", "-", "é", "É", "İ", "ſ", "٣",
                     "…", "→", "–", "—", "src/a.py", "a b", "\t", "x", "\ud800", "\u2028", "\u00a0",
                     "\x1f"]),
    max_size=40,
).map("".join)  # fmt: skip


@settings(max_examples=300)
@given(_ECHO_TEXTS, st.lists(_ECHO_TEXTS, max_size=4), st.integers(min_value=0, max_value=30))
def test_the_echo_test_reads_words_as_the_word_pattern_does(
    text: str, identifiers: list[str], enough: int
) -> None:
    """The words the echo test reads (cheaply in ASCII text, and only as far as it must with
    the identifiers taken out) are the words ``\\w+`` finds, lowered, however the text and the
    identifiers are made; the instructions' runs are those of their words."""
    assert base._words(text) == [w.lower() for w in re.findall(r"\w+", text)]
    ranked = sorted(identifiers, key=len, reverse=True)
    whole = base._without(text, ranked)
    assert base._at_least_without(text, ranked, enough) == (
        len(re.findall(r"\w+", whole)) >= enough
    )
    assert base._instruction_shingles(text) == frozenset(base._shingles(base._words(text)))


def test_the_instructions_runs_are_those_of_their_words_at_every_limit() -> None:
    """The runs of the instructions, worked out once for the part that does not change with
    the length limit, are those of the whole instructions' words."""
    for limit in (1, 16, 100, 999, 1024, 123_456):
        text = instructions(limit)
        assert base._instruction_shingles(text) == frozenset(base._shingles(base._words(text)))


def test_a_summary_quoting_identifiers_and_errors_is_not_an_echo() -> None:
    """Quoting paths, commands and error lines verbatim is what summaries should do."""
    req = request()
    summary = (
        "## Objective\n- correct multi-currency totals in src/app.py\n"
        "## Work done\n- ran `python -m pytest tests/test_app.py`: 1 failure\n"
        "## Identifiers\n"
        + "\n".join(f"- {i}" for i in req.identifiers)
        + "\n## Outstanding\n- fix the totals"
    )
    assert not is_echo(summary, req)


@pytest.mark.transcripts
@pytest.mark.parametrize("path", transcript_params())
def test_extractive_summaries_of_real_stretches_are_not_echoes(path: Path) -> None:
    """The extractive summary of a real stretch quotes it, but never counts as an echo."""
    messages = read_jsonl(path)[1:31]
    req = build_request(messages, max_tokens=2000)
    text = ExtractiveSummarizer()(req).text
    assert text is not None
    assert not is_echo(text, req)


# -- fallback (`summarizer-fallback`)


@pytest.mark.guarantee("summarizer-fallback")
def test_a_failing_summarizer_falls_back_to_the_extractive_one() -> None:
    """When the primary raises, the extractive summary is used and the note says why."""

    def flaky(r: SummaryRequest) -> str:
        raise ConnectionError("model unreachable")

    result = FallbackSummarizer(flaky)(request())
    assert result.text == ExtractiveSummarizer()(request()).text
    assert result.notes[0].startswith("flaky raised ConnectionError: model unreachable")
    assert "ExtractiveSummarizer" in result.notes[0]


@pytest.mark.guarantee("summarizer-fallback")
def test_a_declining_or_echoing_primary_falls_back() -> None:
    """A decline or an echo from the primary also hands over to the fallback."""
    fallback = FunctionSummarizer.returning(SUMMARY)
    declined = FallbackSummarizer(FunctionSummarizer.declining(), fallback)(request())
    assert (declined.text, "declined" in declined.notes[0]) == (SUMMARY, True)
    echoing = FunctionSummarizer(lambda r: r.prompt)
    echoed = FallbackSummarizer(echoing, fallback)(request())
    assert (echoed.text, "echoed" in echoed.notes[0]) == (SUMMARY, True)


def test_a_working_primary_is_used_as_is() -> None:
    """When the primary answers, the fallback is never called and nothing is noted."""
    fallback = FunctionSummarizer.returning("unused")
    result = FallbackSummarizer(FunctionSummarizer.returning(SUMMARY), fallback)(request())
    assert result == SummaryResult(SUMMARY)
    assert fallback.calls == 0


def test_the_cost_of_a_rejected_primary_answer_is_kept() -> None:
    """Tokens spent on an echoed answer are added to the fallback's result."""
    paid = FunctionSummarizer(lambda r: SummaryResult(r.prompt, input_tokens=900, output_tokens=70))
    result = FallbackSummarizer(paid)(request())
    assert (result.input_tokens, result.output_tokens >= 70, result.calls) == (900, True, 2)


def test_a_failing_fallback_raises_a_summarizer_error_naming_both() -> None:
    """If both fail, the error says what happened to each."""
    both = FallbackSummarizer(
        FunctionSummarizer.raising(TimeoutError("slow")),
        FunctionSummarizer.raising(ValueError("bad")),
    )
    with pytest.raises(SummarizerError, match=r"TimeoutError: slow.*ValueError: bad"):
        both(request())


@pytest.mark.guarantee("summarizer-fallback")
async def test_an_async_primary_falls_back_the_same_way() -> None:
    """acall runs the same decisions for async summarizers."""

    async def broken(r: SummaryRequest) -> str:
        raise RuntimeError("quota exceeded")

    summarizer = FallbackSummarizer(broken)
    assert summarizer.is_async is True
    result = await summarizer.acall(request())
    assert result.text is not None and result.text.startswith("## Objective")
    assert "RuntimeError: quota exceeded" in result.notes[0]
    ok = await FallbackSummarizer(FunctionSummarizer.returning(SUMMARY)).acall(request())
    assert ok == SummaryResult(SUMMARY)


# -- redaction (`summaries-redacted`)


@pytest.mark.parametrize(
    "secret",
    [
        "sk-proj-abcdefghijklmnopqrstuvwx",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "AKIAIOSFODNN7EXAMPLE",
        "xoxb-1234567890-abcdefghij",
    ],
)
@pytest.mark.guarantee("summaries-redacted")
def test_api_keys_and_tokens_are_redacted(secret: str) -> None:
    """Provider keys, GitHub and Slack tokens and AWS access keys become [redacted]."""
    redacted = redact_secrets(f"- exported {secret} before running `make deploy`")
    assert secret not in redacted
    assert redacted == "- exported [redacted] before running `make deploy`"


@pytest.mark.guarantee("summaries-redacted")
def test_labelled_secrets_keep_their_label() -> None:
    """Bearer tokens and password=... assignments keep the label and lose the value."""
    text = "curl -H 'Authorization: Bearer abc.def.ghi123456' url; DB_PASSWORD=hunter2hunter2"
    assert redact_secrets(text) == (
        "curl -H 'Authorization: Bearer [redacted]' url; DB_PASSWORD=[redacted]"
    )


def test_redaction_leaves_identifiers_alone() -> None:
    """Paths, hashes, ids and error lines are not secrets and stay as they were."""
    text = "- src/app.py:12\n- 1be777fe725a\n- call_7MqMjJMaXLRTpdPdzCjzjfpE\n- KeyError: 'token'"
    assert redact_secrets(text) == text


# -- the test double ----------------------------------------------------------------------------


def test_function_summarizer_records_what_it_was_asked() -> None:
    """FunctionSummarizer answers with its function and keeps every request in order."""
    summarizer = FunctionSummarizer.returning("first", None)
    first, second = request(), build_request(stretch()[:1], max_tokens=100)
    assert [summarizer(first), summarizer(second), summarizer(first)] == ["first", None, None]
    assert summarizer.requests == [first, second, first]
    assert summarizer.calls == 3


async def test_function_summarizer_wraps_async_functions() -> None:
    """An async function makes an async double that as_summarizer recognizes."""

    async def answer(r: SummaryRequest) -> str:
        return SUMMARY

    double = FunctionSummarizer(answer)
    assert double.is_async and as_summarizer(double).is_async
    assert (await as_summarizer(double).acall(request())).text == SUMMARY
    assert double.calls == 1


@settings(max_examples=300)
@given(st.text(alphabet=st.characters(codec="ascii"), max_size=200) | st.text(max_size=200))
def test_the_echo_check_reads_the_same_words_in_ascii_and_other_text(text: str) -> None:
    """The words the echo check compares are the text's words, each lowered, whether the
    text is ASCII (lowered in one pass) or not (each word lowered alone)."""
    from ctxfold.summarizers import base

    assert base._words(text) == [w.lower() for w in base._WORD.findall(text)]


_WORDS = st.lists(st.sampled_from(["a", "b"]), max_size=40)


@settings(max_examples=300)
@given(_WORDS, _WORDS, _WORDS)
def test_the_echo_check_counts_the_same_copied_words_from_the_shared_runs_alone(
    own: list[str], record: list[str], content: list[str]
) -> None:
    """How many of a summary's words the echo check finds inside runs the stretch holds is the
    same whether it looks them up among every run of the stretch or among the runs the summary
    and the stretch share."""
    from ctxfold.summarizers import base

    every = base._shingles(record) | base._shingles(content)
    shared = base._shared_shingles(own, (record, content))
    assert base._covered(own, shared) == base._covered(own, every)
