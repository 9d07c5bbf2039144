"""The fast counting engine (bpe-openai's Rust tokenizer) counts exactly what tiktoken counts.

`TiktokenCounter` counts with bpe-openai's tokenizer when it loads and agrees with tiktoken on a
set of probes; these tests hold it to tiktoken's counts on an edge corpus and on every shared
transcript, and check that it steps aside when it is missing or disagrees.
"""

from __future__ import annotations

import random
import re
import sys
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import transcript_params
from ctxfold.messages import Message
from ctxfold.messages.jsonl import read_jsonl
from ctxfold.tokens import TiktokenCounter, _rust, counter, exact
from ctxfold.tokens._parts import call_strings, message_strings
from ctxfold.tokens.tally import TextCounts, split_lines

ENCODINGS = ["o200k_base", "cl100k_base"]

PIECES = [
    "<|endoftext|>", "<|endofprompt|>", "<|fim_prefix|>", "<|fim_middle|>", "<|im_start|>",
    " " * 50, "\n" * 30, " \n \n  \t", "\r\n\r\n", "\t\tindent", "trailing   ", "  leading",
    "1234567890" * 5, "3.14159", "12,345", "中文字符测试，你好世界", "日本語のテキスト", "한국어",
    "😀👍🏽👨‍👩‍👧‍👦", "🇫🇷", "e\u0301a\u0308o\u0302", "\u200b", "\u00a0", "\u3000", "\u2028", "\x85",
    "x" * 5000, "supercalifragilistic" * 40, "don't I'll we've THEY'RE 's", "ǅ", "ʰ", "Ⅻ½①",
    "ﬁ", "\ufeff", "αβγΑΒΓ", "кириллица", "مرحبا", "हिन्दी", "\x00\x01\x7f", "!!!???...",
    "/path/to/file.py:12", "http://x.y/z?q=1&r=2", '{"a": [1, 22, 333]}',
]  # fmt: skip
"""Kinds of text where two pre-tokenizers could split differently."""

WHITESPACE_MIX = [
    " ", "\t", "\n", "\r", "\x0b", "\x0c", "\x85", "\u00a0", "\u2028", "\u3000", "\u2003",
    "a", "B", "1", ".", "'", "'s", "中", "é", "\u0301", "😀",
]  # fmt: skip
"""Short strings whose runs exercise the whitespace and lookahead rules of both patterns."""


def _random_unicode(rng: random.Random, n: int) -> str:
    """`n` code points from every plane, surrogates left out (they are not valid text)."""
    out = []
    while len(out) < n:
        point = rng.choice(
            [
                rng.randint(0, 0x7F),
                rng.randint(0x80, 0x7FF),
                rng.randint(0x800, 0xFFFF),
                rng.randint(0x10000, 0x10FFFF),
            ]
        )
        if not 0xD800 <= point <= 0xDFFF:
            out.append(chr(point))
    return "".join(out)


def edge_corpus(seed: int = 14) -> list[str]:
    """The pieces alone, random concatenations of pieces and random unicode, and random runs of
    whitespace and letters: about 6,000 strings, the same on every run."""
    rng = random.Random(seed)
    corpus = list(PIECES)
    for _ in range(3_000):
        corpus.append(
            "".join(
                rng.choice(PIECES)
                if rng.random() < 0.5
                else _random_unicode(rng, rng.randint(0, 20))
                for _ in range(rng.randint(1, 6))
            )
        )
    for _ in range(3_000):
        corpus.append("".join(rng.choice(WHITESPACE_MIX) for _ in range(rng.randint(1, 12))))
    return corpus


@pytest.fixture(scope="module")
def counters() -> dict[str, tuple[TiktokenCounter, TiktokenCounter]]:
    """Per encoding: the default counter and one that counts with tiktoken only."""
    return {
        name: (TiktokenCounter(name), TiktokenCounter(name, engine="tiktoken"))
        for name in ENCODINGS
    }


@pytest.mark.parametrize("name", ENCODINGS)
def test_default_counter_uses_the_fast_engine(
    name: str, counters: dict[str, tuple[TiktokenCounter, TiktokenCounter]]
) -> None:
    """With bpe-openai installed (the exact extra), counting uses its tokenizer."""
    fast, slow = counters[name]
    assert fast.engine == "bpe-openai"
    assert slow.engine == "tiktoken"
    assert counter(name).engine == "bpe-openai"  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ENCODINGS)
def test_fast_engine_counts_tiktokens_tokens_on_edge_text(
    name: str, counters: dict[str, tuple[TiktokenCounter, TiktokenCounter]]
) -> None:
    """Special-token text, whitespace runs, digits, CJK, emoji, combining marks, random unicode
    and very long words count exactly as tiktoken's `encode_ordinary` does."""
    fast, _ = counters[name]
    encode = fast.encoding.encode_ordinary
    wrong = [text for text in edge_corpus() if fast.count_text(text) != len(encode(text))]
    assert not wrong, f"{len(wrong)} strings differ, e.g. {wrong[0][:60]!r}"


@pytest.mark.transcripts
@pytest.mark.parametrize("path", transcript_params())
@pytest.mark.parametrize("name", ENCODINGS)
def test_fast_engine_counts_tiktokens_tokens_on_transcripts(
    name: str, path: Path, counters: dict[str, tuple[TiktokenCounter, TiktokenCounter]]
) -> None:
    """Every string of a real agent run, the whole run joined, and every message count the same
    with the fast engine as with tiktoken."""
    fast, slow = counters[name]
    messages = read_jsonl(path)
    texts = [t for m in messages for t in message_strings(m)]
    texts += [t for m in messages for call in m.tool_calls for t in call_strings(call)]
    texts.append("\n".join(texts))
    encode = fast.encoding.encode_ordinary
    assert [fast.count_text(t) for t in texts] == [len(encode(t)) for t in texts]
    assert [fast.count_message(m) for m in messages] == [slow.count_message(m) for m in messages]


def test_text_the_fast_engine_cannot_take_is_counted_by_tiktoken(
    counters: dict[str, tuple[TiktokenCounter, TiktokenCounter]],
) -> None:
    """A lone surrogate (not UTF-8, which the Rust tokenizer takes) gets tiktoken's count."""
    fast, slow = counters["o200k_base"]
    for text in ["a\ud800b", "\udfff", "call \ud83d end"]:
        assert fast.count_text(text) == slow.count_text(text) > 0
    message = Message("user", "broken \ud83d emoji")
    assert fast.count_message(message) == slow.count_message(message)


@pytest.mark.parametrize("name", ENCODINGS)
def test_pinned_probe_counts_are_tiktokens(name: str) -> None:
    """The counts the fast engine is checked against when it loads are tiktoken's own."""
    encode = exact.load_encoding(name).encode_ordinary
    assert _rust.PROBE_COUNTS[name] == tuple(len(encode(p)) for p in _rust.PROBES)


def test_engine_that_disagrees_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """If bpe-openai's tokenizer counted any probe differently from tiktoken (a later version
    that splits text otherwise), the counter keeps tiktoken, so its counts never drift."""
    real = _rust.PROBE_COUNTS["o200k_base"]
    monkeypatch.setitem(_rust.PROBE_COUNTS, "o200k_base", (real[0] + 1, *real[1:]))
    monkeypatch.setattr(_rust, "_loaded", {})
    kept = TiktokenCounter("o200k_base")
    assert kept.engine == "tiktoken"
    assert kept.count_text("hello world") == 2


def test_missing_compiled_module_falls_back_to_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without bpe-openai's compiled tokenizer the counter still counts exactly, with tiktoken."""
    monkeypatch.setattr(_rust, "_loaded", {})
    monkeypatch.setitem(sys.modules, "bpe_openai._bindings", None)
    fallback = TiktokenCounter("o200k_base")
    assert fallback.engine == "tiktoken"
    assert fallback.count_text("hello world") == 2


def test_bpe_openai_still_imports_after_the_counter_loaded_its_tokenizer() -> None:
    """An application that imports bpe_openai itself after ctxfold counted gets a working
    package sharing the same compiled module (it cannot be initialised twice)."""
    TiktokenCounter("o200k_base")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # bpe_openai's own DeprecationWarning on import
        import bpe_openai
        from bpe_openai import _bindings

        assert _bindings is sys.modules["bpe_openai._bindings"]
        assert len(bpe_openai.get_encoding("o200k_base").encode_ordinary("hello world")) == 2


def _drafts(seed: int = 15) -> list[str]:
    """Multi-line texts: edge pieces and random unicode as lines, joined by newlines, with
    lines that start with a slash, a space, a tab or a blank line among them."""
    rng = random.Random(seed)
    corpus = edge_corpus(seed)
    starts = ["", "- ", "## ", "/", " ", "\t", "\n", "`", "1. ", "'s ", ">", "\r"]
    drafts = []
    for _ in range(1_500):
        lines = [rng.choice(starts) + rng.choice(corpus)[:80] for _ in range(rng.randint(2, 12))]
        drafts.append("\n".join(lines) + rng.choice(["", "\n", " \n", "\n\n", "."]))
    return drafts


_LINE_TEXTS = st.lists(
    st.sampled_from(["\n", "\n\n", "/", " ", "a", "#", "-", "~", "\x7f", "\t", "\r", "é", "`",
                     "!", "0", "\x1f"]),
    max_size=30,
).map("".join)  # fmt: skip


@settings(max_examples=300)
@given(_LINE_TEXTS)
def test_split_lines_cuts_just_after_each_newline_before_a_line_start(text: str) -> None:
    """The pieces are what splitting at every position just after a newline and before a
    printable ASCII character other than "/" gives: the cut the counts add up over."""
    assert split_lines(text) == re.split(r"(?<=\n)(?=[!-.0-~])", text)


@pytest.mark.parametrize("name", ENCODINGS)
def test_line_pieces_add_up_to_the_whole_count(
    name: str, counters: dict[str, tuple[TiktokenCounter, TiktokenCounter]]
) -> None:
    """Cut where `split_lines` cuts, a text's pieces count exactly as many tokens as the whole
    text, so a draft can be weighed from its lines' remembered counts."""
    fast, slow = counters[name]
    assert fast.line_additive
    for text in _drafts():
        pieces = split_lines(text)
        assert "".join(pieces) == text
        whole = len(fast.encoding.encode_ordinary(text))
        assert sum(slow.count_text(p) for p in pieces) == whole, text[:80]
        assert TextCounts(fast).lines(text) == whole, text[:80]


@pytest.mark.transcripts
@pytest.mark.parametrize("path", transcript_params())
def test_line_pieces_add_up_on_transcripts(
    path: Path, counters: dict[str, tuple[TiktokenCounter, TiktokenCounter]]
) -> None:
    """On every multi-line text of a real run, and on the run joined, the pieces add up."""
    fast, _ = counters["o200k_base"]
    texts = [t for m in read_jsonl(path) for t in message_strings(m) if "\n" in t]
    texts.append("\n".join(texts))
    lines = TextCounts(fast).lines
    assert [lines(t) for t in texts] == [fast.count_text(t) for t in texts]


def test_counter_without_line_additivity_is_counted_whole() -> None:
    """For a counter that does not declare its counts add up over lines (the character
    heuristic rounds each count), `lines` counts the whole text."""
    heuristic = counter("heuristic")
    text = "## Work\n- a\n- bb\n- ccc\n"
    assert TextCounts(heuristic).lines(text) == heuristic.count_text(text)


@pytest.mark.transcripts
@pytest.mark.parametrize("path", transcript_params())
def test_a_message_counted_from_remembered_line_counts_is_counted_exactly(
    path: Path, counters: dict[str, tuple[TiktokenCounter, TiktokenCounter]]
) -> None:
    """`count_message_with` and a memo of line counts (how a compaction counts the summary it
    applies) give every message of a real run the count `count_message` gives it with tiktoken
    alone, tool calls included."""
    fast, slow = counters["o200k_base"]
    lines = TextCounts(fast).lines
    messages = read_jsonl(path)
    assert [fast.count_message_with(m, lines) for m in messages] == [
        slow.count_message(m) for m in messages
    ]
