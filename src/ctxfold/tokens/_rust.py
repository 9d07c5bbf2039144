"""bpe-openai's Rust tokenizer as a faster engine for exact counts, taken only where it agrees.

bpe-openai wraps the Rust `bpe-openai` crate, whose o200k_base and cl100k_base tokenizers split
and merge text as tiktoken does and can count without building the list of token ids: about
twice as fast as ``len(encoding.encode_ordinary(text))`` on agent transcripts. Counts must stay
tiktoken's, so the engine is taken only when

- the compiled module loads (it is loaded on its own: the package's ``__init__`` spends about
  0.4 s building Python-side tables we do not use, and warns about a deprecated call);
- it knows the encoding;
- it gives tiktoken's count on every string of `PROBES`, one per class of text where two
  pre-tokenizers could differ (`PROBE_COUNTS`: tiktoken's counts, pinned here so that the check
  needs no tiktoken encoding built, and held to tiktoken's by a test). A later bpe-openai that
  split any of them otherwise would be refused here, with a log record, rather than drift.

Anything else returns None and tiktoken counts. The compiled module is registered under its own
name, so an application that imports bpe_openai later gets the same module instead of a second
initialisation, which PyO3 modules refuse.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
import sys
import threading
from pathlib import Path
from typing import Any

logger = logging.getLogger("ctxfold.tokens")

_MODULE = "bpe_openai._bindings"

PROBES: tuple[str, ...] = (
    "<|endoftext|> <|endofprompt|> <|fim_prefix|>x<|fim_suffix|>",
    "a" + " " * 41 + "b" + " " * 7,
    "line\n\n\n   \n\t\n  indented\r\n\r\nend  \n",
    " \u00a0\u3000\u2028\u0085x\x0b\x0c ",
    "1234567890 3.14159 -0.0001 1e-10 0x1F 12,345,678",
    "東京の天気は晴れです。中文字符测试，你好世界 한국어",
    "emoji 👩🏽‍💻🚀🎉 flags 🇫🇷🇯🇵 family 👨‍👩‍👧‍👦",
    "combining e\u0301 a\u0308 n\u0303 ǅungla ʰmod Ⅻ ½ ① ﬁ",
    "I'm sure they'll've done it; DON'T SHOUT'S it's THEIR'S 's",
    "αβγ ΑΒΓ кириллица مرحبا हिन्दी",
    "supercalifragilisticexpialidocious" * 40,
    '{"path": "src/app.py:12", "url": "http://x.y/z?q=1&r=2"}!!!???......',
)
"""Strings the Rust engine must count as tiktoken does before it is used."""

PROBE_COUNTS: dict[str, tuple[int, ...]] = {
    "o200k_base": (27, 4, 10, 9, 30, 17, 33, 25, 16, 12, 400, 29),
    "cl100k_base": (27, 4, 10, 10, 30, 26, 47, 29, 20, 26, 518, 29),
}
"""tiktoken's counts of `PROBES`, per encoding."""

_loaded: dict[str, Any] = {}
_lock = threading.Lock()


def rust_tokenizer(encoding: str) -> Any | None:
    """bpe-openai's tokenizer for `encoding` (it has ``count(text) -> int``), or None.

    The result is cached per encoding, None included, so the check runs once per process.
    """
    with _lock:
        if encoding not in _loaded:
            _loaded[encoding] = _checked(encoding)
        return _loaded[encoding]


def _checked(encoding: str) -> Any | None:
    expected = PROBE_COUNTS.get(encoding)
    module = _bindings() if expected is not None else None
    if module is None or expected is None:
        return None
    try:
        if encoding not in module.supported_encodings():
            return None
        tokenizer = module.tokenizer_for_encoding(encoding)
        differs = [p for p, n in zip(PROBES, expected, strict=True) if tokenizer.count(p) != n]
    except Exception as exc:  # a foreign extension: any failure means "use tiktoken"
        logger.info("counting %s with tiktoken: bpe-openai's tokenizer failed: %r", encoding, exc)
        return None
    if differs:
        logger.info(
            "counting %s with tiktoken: bpe-openai's tokenizer counts %r differently",
            encoding,
            differs[0][:40],
        )
        return None
    return tokenizer


def _bindings() -> Any | None:
    """bpe-openai's compiled module, loaded without running the package's ``__init__``."""
    if _MODULE in sys.modules:
        return sys.modules[_MODULE]
    try:
        spec = importlib.util.find_spec("bpe_openai")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(location) / f"_bindings{suffix}"
            if path.is_file():
                return _load(path)
    return None


def _load(path: Path) -> Any | None:
    loader = importlib.machinery.ExtensionFileLoader(_MODULE, str(path))
    spec = importlib.util.spec_from_file_location(_MODULE, path, loader=loader)
    if spec is None:
        return None
    try:
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except ImportError as exc:
        logger.info("counting with tiktoken: bpe-openai's compiled module did not load: %r", exc)
        return None
    sys.modules[_MODULE] = module
    return module
