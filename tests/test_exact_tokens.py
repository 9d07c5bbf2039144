"""Exact counting: our offline encodings give tiktoken's own tokens, and fail cleanly without it."""

from __future__ import annotations

import gzip
import hashlib
import importlib.metadata
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
import tiktoken
import tiktoken.load
import tiktoken_ext.openai_public as openai_public

from conftest import transcript_params
from ctxfold.errors import MissingDependencyError
from ctxfold.messages import Message, ToolCall
from ctxfold.messages.jsonl import read_jsonl
from ctxfold.tokens import TiktokenCounter, counter
from tests._tokenizer import tokenized_by

ENCODINGS = ["o200k_base", "cl100k_base"]

SAMPLES = [
    "",
    "hello world",
    "Héllo wörld, naïve café — ½ × π ≈ 1.5708",
    "東京の天気は晴れです。明日は雨が降るでしょう。",
    "مرحبا بالعالم، كيف حالك اليوم؟",
    "Привет, мир! Ёлки-палки.",
    "emoji 👩🏽‍💻🚀🎉 and flags 🇫🇷🇯🇵 and ZWJ 👨‍👩‍👧‍👦",
    "combining: e\u0301 a\u0308 n\u0303 and a lone surrogate-free astral 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "def f(x: int) -> int:\n    return x ** 2  # square\n\n\n\tif x:\n\t\tpass\r\n",
    '{"path": "src/app.py", "line": 42, "ok": true, "items": [1, 22, 333, 4444, 55555]}',
    "    leading spaces, trailing spaces    \n\n\n   ",
    "I'm sure they'll've done it; DON'T SHOUT'S, it's THEIR'S",
    "numbers 1234567890 3.14159 -0.0001 1e-10 0x1F 0b1010",
    "a" * 5000,
    "🚀" * 300,
    "<|endoftext|> typed by a user is ordinary text <|fim_prefix|>",
]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """tiktoken's own encodings, loaded by tiktoken from its cache, never from the network."""
    cache = tmp_path_factory.mktemp("tiktoken-cache")
    with pytest.MonkeyPatch.context() as mp:
        for name in ENCODINGS:
            (cache / _cache_name(mp, name)).write_bytes(_shipped_ranks(name))
        mp.setenv("TIKTOKEN_CACHE_DIR", str(cache))
        mp.setattr(tiktoken.load, "read_file", _no_network)
        yield {name: tiktoken.get_encoding(name) for name in ENCODINGS}


def _cache_name(mp: pytest.MonkeyPatch, name: str) -> str:
    """The file name tiktoken's loader caches an encoding under: sha1 of the address it reads."""
    seen: list[str] = []

    def record(path: str, expected_hash: str | None = None) -> dict[bytes, int]:
        seen.append(path)
        return {}

    with mp.context() as inner:
        inner.setattr(openai_public, "load_tiktoken_bpe", record)
        openai_public.ENCODING_CONSTRUCTORS[name]()
    assert len(seen) == 1
    return hashlib.sha1(seen[0].encode()).hexdigest()


def _shipped_ranks(name: str) -> bytes:
    shipped = importlib.metadata.distribution("bpe-openai").locate_file(
        f"bpe_openai/data/{name}.tiktoken.gz"
    )
    return gzip.decompress(Path(str(shipped)).read_bytes())


def _no_network(path: str) -> NoReturn:
    raise AssertionError(f"the test tried to fetch {path}")


def _transcript_texts(path: Path) -> list[str]:
    texts: list[str] = []
    for message in read_jsonl(path):
        texts.extend(s for s in (message.content, message.tool_call_id) if s)
        for call in message.tool_calls:
            texts.extend((call.id, call.name, call.arguments))
    return texts


@pytest.mark.parametrize("name", ENCODINGS)
def test_tokens_equal_tiktokens_own_on_varied_text(name: str, reference: dict[str, Any]) -> None:
    """On unicode, code, whitespace and repetitive text, the offline encoding yields exactly the
    token ids tiktoken's own loader produces for the same published file."""
    ours = TiktokenCounter(name)
    for text in SAMPLES:
        expected = reference[name].encode(text, disallowed_special=())
        assert ours.encoding.encode(text, disallowed_special=()) == expected, text[:40]
        assert ours.count_text(text) == len(expected), text[:40]


@pytest.mark.transcripts
@pytest.mark.parametrize("path", transcript_params())
@pytest.mark.parametrize("name", ENCODINGS)
def test_counts_equal_tiktokens_own_on_real_transcripts(
    name: str, path: Path, reference: dict[str, Any]
) -> None:
    """Every content string, tool argument and id of a real agent run (long tool outputs
    included) counts exactly as many tokens as tiktoken's own encoding gives."""
    ours = TiktokenCounter(name)
    texts = _transcript_texts(path)
    assert texts
    for text in texts:
        assert ours.count_text(text) == len(reference[name].encode(text)), text[:60]


@pytest.mark.parametrize("name", ENCODINGS)
def test_message_count_follows_openais_chat_rule(name: str, reference: dict[str, Any]) -> None:
    """A message costs 3 tokens plus its role and each field, and an author name 1 more."""
    enc = reference[name]
    ours = TiktokenCounter(name)
    plain = Message("user", "What is the capital of France?")
    assert ours.count_message(plain) == 3 + len(enc.encode("user")) + len(enc.encode(plain.text))
    named = Message("user", "hi", name="alice")
    assert ours.count_message(named) == (
        3 + len(enc.encode("user")) + len(enc.encode("hi")) + len(enc.encode("alice")) + 1
    )


@pytest.mark.guarantee("tool-calls-counted")
def test_exact_count_includes_tool_call_names_and_arguments() -> None:
    """an assistant message that only calls a tool is charged for the call's name and
    arguments; longer arguments cost more tokens."""
    ours = TiktokenCounter("o200k_base")
    short = Message("assistant", None, (ToolCall("call_1", "bash", '{"cmd": "ls"}'),))
    long_args = '{"cmd": "grep -rn \\"def main\\" src/ tests/ benchmarks/ | sort | head -50"}'
    long = Message("assistant", None, (ToolCall("call_1", "bash", long_args),))
    bare = Message("assistant", "")
    assert ours.count_message(short) > ours.count_message(bare) + ours.count_text('{"cmd": "ls"}')
    assert ours.count_message(long) - ours.count_message(short) == (
        ours.count_text(long_args) - ours.count_text('{"cmd": "ls"}')
    )


def test_special_token_text_counts_as_ordinary_text() -> None:
    """Text that spells a special token (a user pasting "<|endoftext|>") is counted, not refused."""
    ours = TiktokenCounter("o200k_base")
    assert ours.count_text("<|endoftext|>") > 1
    assert ours.count_message(Message("user", "see <|endoftext|> here")) > 0


def test_encoding_is_loaded_once_per_process() -> None:
    """Counters for the same encoding share one loaded tokenizer, so a second one is instant."""
    assert TiktokenCounter("o200k_base").encoding is TiktokenCounter("o200k_base").encoding


def test_unknown_encoding_is_a_clear_error() -> None:
    """Asking for an encoding we cannot load offline names it and the ones that work."""
    with pytest.raises(ValueError, match=r"'p50k_base'.*o200k_base, cl100k_base"):
        TiktokenCounter("p50k_base")


@pytest.mark.parametrize("missing", ["tiktoken", "bpe_openai"])
def test_missing_dependency_names_the_extra(missing: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without tiktoken or bpe-openai, exact counting fails with the pip command to fix it."""
    monkeypatch.setitem(sys.modules, missing, None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'ctxfold\[exact\]'"):
        TiktokenCounter("o200k_base")
    with pytest.raises(MissingDependencyError):
        counter("cl100k_base")


def test_auto_falls_back_to_the_heuristic_and_logs_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Without the exact extra, counter("auto") still works, says it estimates, and logs why."""
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    with caplog.at_level("INFO", logger="ctxfold.tokens"):
        fallback = counter("auto")
    assert not fallback.exact
    assert "heuristic" in fallback.name
    assert any("ctxfold[exact]" in record.getMessage() for record in caplog.records)


def test_model_name_falls_back_to_the_heuristic_without_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A model name without the exact extra gives the heuristic rather than an error."""
    monkeypatch.setitem(sys.modules, "bpe_openai", None)
    assert counter("gpt-4o").name.startswith("heuristic")


def test_a_long_text_counted_again_is_not_tokenized_again() -> None:
    """A text of `LONG_TEXT_CHARS` or more (a tool output counted on append and again by a
    compaction) goes through the tokenizer once per counter, and keeps its exact count; a short
    one is counted every time."""
    from ctxfold.tokens import exact

    ours = TiktokenCounter("o200k_base")
    with tokenized_by(ours) as tokenized:
        long = "def f(x):\n    return x + 1\n" * (exact.LONG_TEXT_CHARS // 10)
        short = "hello world"
        expected = len(tiktoken.get_encoding("o200k_base").encode_ordinary(long))
        assert [ours.count_text(long) for _ in range(3)] == [expected] * 3
        assert [ours.count_text(short) for _ in range(3)] == [2] * 3
        assert tokenized == [long, short, short, short]


def test_a_counter_remembers_a_bounded_number_of_characters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The remembered counts stay within `REMEMBERED_CHARS` characters, the oldest going first;
    a forgotten text is counted again, to the same count."""
    from ctxfold.tokens import exact

    monkeypatch.setattr(exact, "REMEMBERED_CHARS", 3 * exact.LONG_TEXT_CHARS)
    ours = TiktokenCounter("o200k_base")
    with tokenized_by(ours) as tokenized:
        texts = [f"{i} " + "x" * exact.LONG_TEXT_CHARS for i in range(5)]
        first = [ours.count_text(text) for text in texts]
        assert ours._long_chars <= exact.REMEMBERED_CHARS
        assert [ours.count_text(text) for text in texts[-2:]] == first[-2:]
        assert ours.count_text(texts[0]) == first[0]
        assert tokenized == [*texts, texts[0]]


def test_a_counter_told_to_remember_nothing_tokenizes_every_time() -> None:
    """``remember_chars=0`` gives a counter whose every count goes through the tokenizer (what a
    benchmark's recount must time), with the same counts."""
    from ctxfold.tokens import exact

    ours = TiktokenCounter("o200k_base", remember_chars=0)
    with tokenized_by(ours) as tokenized:
        long = "def f(x):\n    return x + 1\n" * (exact.LONG_TEXT_CHARS // 10)
        expected = TiktokenCounter("o200k_base").count_text(long)
        assert [ours.count_text(long) for _ in range(3)] == [expected] * 3
        assert tokenized == [long] * 3
