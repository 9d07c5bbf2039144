"""Exact o200k_base / cl100k_base counts that work offline.

tiktoken downloads its BPE files on first use, which fails on a machine without internet. The
`bpe-openai` package ships the same files, gzipped. We read them from there, check them against
the SHA-256 that tiktoken itself pins for each file (so the ranks are the genuine ones, byte for
byte), and build a `tiktoken.Encoding` from them. Loading takes about a second, so each encoding
is built once per process and shared.

Counting goes through bpe-openai's own Rust tokenizer when it loads and agrees with tiktoken
(`ctxfold.tokens._rust`): it counts the same tokens about twice as fast, without building the
list of ids. tiktoken stays the reference and the engine everywhere else.

Message framing follows OpenAI's published rule for chat models: every message costs 3 tokens
on top of its role and field values, an author `name` costs 1 more, and every request is primed
with 3 tokens for the reply (see `REPLY_PRIMING_TOKENS` in `ctxfold.tokens.tally`). OpenAI does
not publish the framing of tool calls or tool schemas; for those we count the JSON text with the
tokenizer and add a small documented overhead, so those parts are close but not exact.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ctxfold.errors import InvalidInputError, MissingDependencyError
from ctxfold.messages import Message
from ctxfold.tokens._evict import evict_oldest
from ctxfold.tokens._parts import call_strings, message_strings, not_text, tools_json
from ctxfold.tokens._rust import rust_tokenizer
from ctxfold.tokens.attachments import attachment_tokens

MESSAGE_OVERHEAD = 3
"""Tokens OpenAI's chat format adds to every message (start marker, role separator, end)."""

NAME_OVERHEAD = 1
"""Extra token OpenAI's chat format charges when a message carries an author `name`."""

CALL_OVERHEAD = 3
"""Tokens charged per tool call for its framing (not published by OpenAI; an approximation)."""

TOOL_OVERHEAD = 3
"""Tokens charged per tool schema for its framing (not published by OpenAI; an approximation)."""


@dataclass(frozen=True)
class _Spec:
    sha256: str
    pat_str: str
    special_tokens: Mapping[str, int]


# Facts about each encoding: the SHA-256 tiktoken pins for the uncompressed rank file, the
# pre-tokenizer pattern and the special tokens. They must match tiktoken's definitions exactly,
# or counts would drift from the real tokenizer; tests compare against tiktoken's own loader.
_O200K_PATTERN = "|".join(
    [
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"\p{N}{1,3}",
        r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
        r"\s*[\r\n]+",
        r"\s+(?!\S)",
        r"\s+",
    ]
)
_CL100K_PATTERN = (
    r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"
    r"|\s++$|\s*[\r\n]|\s+(?!\S)|\s"
)
_SPECS: dict[str, _Spec] = {
    "o200k_base": _Spec(
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pat_str=_O200K_PATTERN,
        special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
    "cl100k_base": _Spec(
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        pat_str=_CL100K_PATTERN,
        special_tokens={
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
}

ENCODINGS: tuple[str, ...] = tuple(_SPECS)
"""The encodings `TiktokenCounter` can load offline."""

_MAX_ROLES = 16
"""Role strings whose counts a counter keeps (a role from a strange source is still counted)."""
LONG_TEXT_CHARS = 256
"""Texts of at least this many characters have their counts remembered by the counter that made
them: a tool output is counted when it is appended and again when a compaction reads it, and
hashing it once costs far less than a tokenizer pass. Shorter texts are counted every time."""
REMEMBERED_CHARS = 8_000_000
"""How many characters of long texts a counter remembers counts for (the oldest go first)."""

_loaded: dict[str, Any] = {}
_load_lock = threading.Lock()


def _bpe_data_dir() -> Path:
    """Where bpe-openai keeps its rank files, found without importing it.

    Importing bpe_openai builds its own tokenizers (about a second) and warns about a deprecated
    resources call; we only need its data files.
    """
    try:
        import tiktoken  # noqa: F401

        spec = importlib.util.find_spec("bpe_openai")
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    for location in locations:
        data = Path(location) / "data"
        if data.is_dir():
            return data
    raise MissingDependencyError("exact token counting", "tiktoken and bpe-openai", "exact")


def _read_ranks(encoding: str, spec: _Spec, data_dir: Path) -> dict[bytes, int]:
    path = data_dir / f"{encoding}.tiktoken.gz"
    if not path.is_file():
        raise MissingDependencyError(
            f"exact {encoding} counting", "a bpe-openai that ships this encoding", "exact"
        )
    data = gzip.decompress(path.read_bytes())
    digest = hashlib.sha256(data).hexdigest()
    if digest != spec.sha256:
        raise InvalidInputError(
            f"{path} has SHA-256 {digest}, not the published {spec.sha256}; "
            "reinstall bpe-openai or count with counter('heuristic')"
        )
    ranks: dict[bytes, int] = {}
    # The hash check above already vouches for the format: one "base64-token rank" per line.
    for line in data.splitlines():
        if line:
            token, _, rank = line.partition(b" ")
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _available(encoding: str) -> tuple[Path, _Spec]:
    """Where the rank files are and the facts of `encoding`; raises as `load_encoding` does."""
    data_dir = _bpe_data_dir()
    spec = _SPECS.get(encoding)
    if spec is None:
        raise InvalidInputError(
            f"unknown encoding {encoding!r}; expected one of {', '.join(ENCODINGS)}"
        )
    return data_dir, spec


def load_encoding(encoding: str) -> Any:
    """The `tiktoken.Encoding` for ``"o200k_base"`` or ``"cl100k_base"``, built offline once.

    Raises `MissingDependencyError` without tiktoken or bpe-openai, and `InvalidInputError` for
    any other encoding name.
    """
    data_dir, spec = _available(encoding)
    with _load_lock:
        if encoding not in _loaded:
            import tiktoken

            _loaded[encoding] = tiktoken.Encoding(
                encoding,
                pat_str=spec.pat_str,
                mergeable_ranks=_read_ranks(encoding, spec, data_dir),
                special_tokens=dict(spec.special_tokens),
            )
        return _loaded[encoding]


class TiktokenCounter:
    """Exact token counts with OpenAI's o200k_base or cl100k_base tokenizer, offline.

    ``approximation_for`` names a model whose own tokenizer is different (Claude, Gemini, Llama,
    ...): the counts are then a stand-in, `exact` is False and the name says so.
    Special-token strings such as ``<|endoftext|>`` in a message count as ordinary text, which is
    how a chat API treats text a user typed. ``engine="auto"`` (the default) counts with
    bpe-openai's Rust tokenizer when it agrees with tiktoken (`engine` says which counts);
    ``engine="tiktoken"`` always counts with tiktoken. The counts are the same.

    >>> TiktokenCounter("o200k_base").count_text("hello world")
    2
    """

    def __init__(
        self,
        encoding: str = "o200k_base",
        *,
        approximation_for: str | None = None,
        engine: Literal["auto", "tiktoken"] = "auto",
        remember_chars: int | None = None,
    ):
        self.encoding_name = encoding
        _available(encoding)  # the errors `load_encoding` raises, without building anything
        rust = rust_tokenizer(encoding) if engine == "auto" else None
        # With the Rust tokenizer counting, the tiktoken encoding (the larger part of a cold
        # start) is built only when something asks for it: `encoding`, or a string the Rust
        # tokenizer cannot take.
        self._encoding: Any = None if rust is not None else load_encoding(encoding)
        self.engine = "bpe-openai" if rust is not None else "tiktoken"
        """What counts: ``"bpe-openai"`` (its Rust tokenizer, which counted a set of probes as
        tiktoken does when it loaded) or ``"tiktoken"`` (``engine="tiktoken"``, or bpe-openai's
        tokenizer could not be loaded or disagreed). The counts are the same either way; only
        the speed differs."""
        self._fast: Callable[[str], int] = rust.count if rust is not None else self._encode_count
        self.line_additive = True
        """Counts add up over the pieces `split_lines` cuts a text into (`TextCounts.lines`)."""
        self.exact = approximation_for is None
        self.name = (
            encoding
            if approximation_for is None
            else f"{encoding} (approximation for {approximation_for})"
        )
        # Every message encodes its role, one of a handful of short strings: their counts are
        # kept rather than encoded again (a quarter of the tokenizer calls of a replay).
        self._roles: dict[str, int] = {}
        self.remember_chars = REMEMBERED_CHARS if remember_chars is None else remember_chars
        """Characters of long texts whose counts this counter remembers (`REMEMBERED_CHARS`
        unless given); 0 remembers none, so that every count goes through the tokenizer (a
        benchmark's recount that must measure counting, not lookups)."""
        self._long: dict[str, int] = {}
        self._long_chars = 0
        self._long_lock = threading.Lock()

    @property
    def encoding(self) -> Any:
        """The underlying `tiktoken.Encoding` (built on first use when bpe-openai counts)."""
        if self._encoding is None:
            self._encoding = load_encoding(self.encoding_name)
        return self._encoding

    def count_text(self, text: str) -> int:
        """Tokens of a bare string (remembered for a long one: see `LONG_TEXT_CHARS`); anything
        else is an `InvalidInputError`."""
        try:
            size = len(text)
            long = size >= LONG_TEXT_CHARS
            if long:
                known = self._long.get(text)
                if known is not None:
                    return known
            tokens = self._fast(text)
        except UnicodeEncodeError:
            # A lone surrogate is not UTF-8, which the Rust tokenizer takes; tiktoken replaces it.
            tokens = self._encode_count(text)
        except TypeError:
            # Caught, not checked first: this runs for every string of every appended message.
            if isinstance(text, str):
                raise
            raise not_text(text) from None
        if long and size <= self.remember_chars:
            self._remember(text, tokens)
        return tokens

    def _remember(self, text: str, tokens: int) -> None:
        # Compactors may count in several threads: eviction walks the dict under one lock.
        with self._long_lock:
            if text in self._long:
                return
            self._long[text] = tokens
            self._long_chars += len(text)
            if self._long_chars > self.remember_chars:
                self._long_chars = evict_oldest(self._long, self._long_chars, self.remember_chars)

    def _encode_count(self, text: str) -> int:
        return len(self.encoding.encode_ordinary(text))

    def count_message(
        self, message: Message, count_text: Callable[[str], int] | None = None
    ) -> int:
        """Tokens of one message under OpenAI's chat rule, tool calls included.

        3 framing tokens, the role, each field's tokens, 1 more for an author name; each tool call
        adds its id, name and arguments plus `CALL_OVERHEAD`. Call ids are counted although a
        model may not see them verbatim: over-counting a few tokens is safer than under-counting.
        Images, documents and audio cost what their provider bills
        (`ctxfold.tokens.attachments`), never the characters of their data.

        `count_text`, when given, counts the fields instead of `self.count_text`
        (`count_message_with`). One method, so that a tally's count of each appended message
        costs one call.
        """
        count = self.count_text if count_text is None else count_text
        role = self._roles.get(message.role)
        if role is None:
            role = self.count_text(message.role)
            if len(self._roles) < _MAX_ROLES:
                self._roles[message.role] = role
        tokens = MESSAGE_OVERHEAD + role
        for text in message_strings(message):
            tokens += count(text)
        if message.name:
            tokens += NAME_OVERHEAD
        for call in message.tool_calls:
            tokens += CALL_OVERHEAD
            for text in call_strings(call):
                tokens += count(text)
        if message.extra:  # only kept provider parts can hold attachments
            tokens += attachment_tokens(message, self.count_text)
        return tokens

    def count_message_with(self, message: Message, count_text: Callable[[str], int]) -> int:
        """`count_message`, with the message's content, name, tool_call_id and tool calls
        counted by `count_text`, which must give this counter's count of any text: a memo of
        counts made before (`ctxfold.tokens.tally.TextCounts`, or its ``lines`` for a text
        made mostly of lines counted before, such as a summary its summarizer fitted line by
        line). The same number as `count_message`, from counts the caller already has."""
        return self.count_message(message, count_text)

    def count_tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of the tool schemas: each schema's compact JSON plus `TOOL_OVERHEAD`."""
        return sum(TOOL_OVERHEAD + self.count_text(text) for text in tools_json(tools))

    def __repr__(self) -> str:
        return (
            f"TiktokenCounter({self.encoding_name!r}, name={self.name!r}, engine={self.engine!r})"
        )
