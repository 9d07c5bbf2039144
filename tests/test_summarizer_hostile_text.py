"""Text a summarizer can be handed or can hand back that ordinary histories never hold: a single
message of megabytes, thousands of identifiers inside one another, and a summary holding half
of a UTF-16 surrogate pair."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import transcript_paths
from ctxfold import Budget, Compactor, MemoryStore, Message, ToolCall, compact_messages
from ctxfold.errors import SummarizerError
from ctxfold.messages import read_jsonl
from ctxfold.session import Session
from ctxfold.summarizers import FallbackSummarizer
from ctxfold.summarizers._substrings import SubstringIndex
from ctxfold.summarizers.base import normalize_result, well_formed
from ctxfold.summarizers.extractive import ExtractiveSummarizer
from ctxfold.summarizers.identifiers import extract_identifiers, kind_of, kinds_of
from ctxfold.summarizers.prompt import build_request, parse_sections
from ctxfold.summarizers.request import SummaryResult

TASK = "Make tests/test_io.py pass."
COMMAND = '{"cmd": "pytest -x tests/test_io.py"}'
LONE = "fixed emoji \ud83d"
"""A model's text whose emoji lost its second half (a JSON ``"\\ud83d"`` escape, decoded)."""


def agent_session(steps: int = 30) -> Session:
    session = MemoryStore().session("hostile")
    session.append([Message("system", "You are a coding agent."), Message("user", TASK)])
    for step in range(steps):
        call = ToolCall(f"call_{step}", "bash", COMMAND)
        output = Message("tool", "E   KeyError: 'mode'\n" * 40, tool_call_id=call.id)
        session.append([Message("assistant", f"Attempt {step}.", (call,)), output])
    return session


def lone_surrogate_summarizer(request: object) -> str:
    return f"## Objective\n- {LONE}\n## Outstanding\n- pair kept: \ud83d\ude00"


def test_a_summary_with_a_lone_surrogate_lands_with_a_replacement_character() -> None:
    """A summarizer that answers with half a surrogate pair no longer breaks the automatic
    trigger: the summary lands, the half is U+FFFD, and a whole pair is the one character."""
    session = agent_session()
    summarizer = FallbackSummarizer(lone_surrogate_summarizer)
    compactor = Compactor(Budget(window=4000), summarizer=summarizer)

    report = compactor.maybe_compact(session)

    assert report is not None and report.outcome == "landed", report
    summaries = [m.text for m in session.messages() if "fixed emoji" in m.text]
    assert len(summaries) == 1
    assert "fixed emoji \ufffd" in summaries[0]
    assert "pair kept: \U0001f600" in summaries[0]
    for event in session.events():
        json.dumps(event.data, ensure_ascii=False).encode("utf-8")  # every stored event is UTF-8


def test_compact_messages_returns_text_that_encodes_to_utf8() -> None:
    """`compact_messages` hands back a list that UTF-8 (and so `write_jsonl`) can hold."""
    messages = list(agent_session().messages())

    out = compact_messages(messages, Budget(window=4000), summarizer=lone_surrogate_summarizer)

    text = "\n".join(m.text for m in out.messages)
    assert "fixed emoji \ufffd" in text
    text.encode("utf-8")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("fixed \ud83d", "fixed \ufffd"),  # a high half at the end
        ("\udc00 low first", "\ufffd low first"),  # a low half alone
        ("two \ud83d\ud83d\ude00", "two \ufffd\U0001f600"),  # a lone half before a pair
        ("pair \ud83d\ude00", "pair \U0001f600"),  # the halves of a pair, joined
        ("plain text, \u00e9 and \U0001f600", "plain text, \u00e9 and \U0001f600"),
        ("\ufeffbom kept", "\ufeffbom kept"),
    ],
)
def test_a_summarizer_answer_is_made_well_formed_unicode(text: str, expected: str) -> None:
    """Each lone surrogate of an answer becomes U+FFFD, pairs become their character, and any
    other text is kept as it was."""
    assert well_formed(text) == expected
    assert normalize_result(text).text == expected
    result = normalize_result(SummaryResult(text, model=f"m {text}", notes=(text,)))
    assert (result.text, result.model, *result.notes) == (expected, f"m {expected}", expected)


def test_a_result_whose_text_is_not_text_is_refused() -> None:
    """A `SummaryResult` holding bytes instead of text is refused like any other bad answer."""
    with pytest.raises(SummarizerError, match="bytes"):
        normalize_result(SummaryResult(b"## Objective"))  # type: ignore[arg-type]


def report_lines(size: int) -> tuple[str, list[str]]:
    """An assistant's report of about `size` characters: tens of thousands of lines of prose
    around a few dozen identifiers met again and again."""
    paths = [f"src/service/module_{i}.py" for i in range(12)]
    errors = [f"KeyError: 'field_{i}'" for i in range(6)]
    commits = [f"commit {i}a{i}b{i}c{i}d{i}e" for i in range(6)]
    lines: list[str] = []
    total = 0
    i = 0
    while total < size:
        kind = i % 5
        if kind == 0:
            line = f"I looked at {paths[i % len(paths)]} for the {i}th case."
        elif kind == 1:
            line = errors[i % len(errors)]
        elif kind == 2:
            line = f"Row {i} came in with {commits[i % len(commits)]}."
        else:
            line = f"The handler reads the value, checks the cache and writes row {i} back."
        lines.append(line)
        total += len(line) + 1
        i += 1
    identifiers = [*paths, *errors, *(c.split()[1] for c in commits)]
    return "\n".join(lines), identifiers


def test_a_two_megabyte_message_compacts_and_keeps_its_identifiers() -> None:
    """One assistant message of 2 MB is summarized like any other stretch: the summary lands
    and quotes every identifier the message holds, verbatim."""
    text, identifiers = report_lines(2_000_000)
    assert set(identifiers) <= set(extract_identifiers(text))
    session = MemoryStore().session("big")
    session.append(
        [
            Message("system", "You are a coding agent."),
            Message("user", TASK),
            Message("assistant", text),
        ]
    )
    for step in range(4):
        call = ToolCall(f"call_{step}", "bash", COMMAND)
        output = Message("tool", "E   KeyError: 'mode'\n", tool_call_id=call.id)
        session.append([Message("assistant", f"Attempt {step}.", (call,)), output])
    compactor = Compactor(Budget.for_model("gpt-4o"))

    report = compactor.maybe_compact(session)

    assert report is not None and report.summaries, report
    view = "\n".join(m.text for m in session.messages())
    assert len(view) < 100_000
    assert [i for i in identifiers if i not in view] == []


def test_thousands_of_nested_identifiers_are_each_listed_once() -> None:
    """With thousands of identifiers inside one another, every one is in the summary verbatim,
    and none is listed on its own when an identifier listed before it holds it."""
    lines = []
    for i in range(1500):
        lines.append(f"ValueError: cannot open src/pkg{i % 40}/mod_{i}.py at ABC-{i}")
        lines.append(f"Edited src/pkg{i % 40}/mod_{i}.py and ticket ABC-{i // 10}.")
    request = build_request([Message("assistant", "\n".join(lines))], max_tokens=200_000)

    text = ExtractiveSummarizer()(request).text

    assert text is not None
    assert [i for i in request.identifiers if i not in text] == []
    listed = parse_sections(text)["Identifiers"]
    assert len(listed) == len(set(listed))
    for position, identifier in enumerate(listed):
        assert not any(identifier in earlier for earlier in listed[:position]), identifier


def test_kinds_of_many_identifiers_is_kind_of_each() -> None:
    """The kinds found for a batch of identifiers are the kinds each has alone."""
    identifiers = ["src/app.py:12", "pytest -x tests", "ABC-12", "deadbeef12", "", "a\nb/c.py",
                   "https://example.com/x", "ValueError: bad", "user_42"]  # fmt: skip
    for path in transcript_paths()[:3]:
        identifiers += extract_identifiers(read_jsonl(path))
    assert kinds_of(identifiers) == {i: kind_of(i) for i in identifiers}


texts = st.text(alphabet="ab/.\n\0\U0001f600", max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(texts, max_size=8), st.lists(texts, max_size=6))
def test_the_substring_index_answers_as_in_does(needles: list[str], haystacks: list[str]) -> None:
    """`SubstringIndex.holding` finds exactly the needles each text holds, by grams in one pass
    for all or by one search per needle."""
    expected = [{i for i, n in enumerate(needles) if n in text} for text in haystacks]
    assert SubstringIndex(needles, direct=0).holding(haystacks) == expected
    assert SubstringIndex(needles, direct=10**9).holding(haystacks) == expected
