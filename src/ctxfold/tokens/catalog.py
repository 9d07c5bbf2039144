"""Context windows and output limits of common chat models, and how to count their tokens.

The figures are the providers' published limits at the time of writing; a deployment can have
smaller ones (an inference host often serves open-weight models with a shorter window), and new
models appear monthly. `register` adds or corrects an entry; `Budget(window=...)` bypasses the
catalog altogether.

`lookup` accepts the names people actually pass: ``"gpt-4o"``, ``"openai/gpt-4o"``,
``"gpt-4o-2024-08-06"``, ``"anthropic/claude-3.7-sonnet:thinking"``,
``"meta-llama/Llama-3.3-70B-Instruct"``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ctxfold.errors import InvalidInputError


@dataclass(frozen=True)
class ModelInfo:
    """What ctxfold needs to know about a model to budget for it.

    >>> ModelInfo("my-model", window=32_768, max_output=4_096, provider="acme").encoding
    'o200k_base'
    """

    name: str
    """The canonical model name, lower case."""
    window: int
    """Context window in tokens: prompt and output together."""
    max_output: int | None = None
    """Most tokens one response may hold, or None when the provider publishes no limit."""
    encoding: str = "o200k_base"
    """The tiktoken encoding that counts (OpenAI) or best approximates (others) its tokens."""
    provider: str = "unknown"
    """Who serves or publishes it: "openai", "anthropic", "google", ..."""

    def __post_init__(self) -> None:
        if self.window <= 0:
            raise InvalidInputError(
                f"model {self.name!r}: window must be positive, not {self.window}"
            )
        if self.max_output is not None and self.max_output <= 0:
            raise InvalidInputError(
                f"model {self.name!r}: max_output must be positive or None, not {self.max_output}"
            )

    @property
    def exact_encoding(self) -> bool:
        """True when `encoding` is the model's own tokenizer rather than a stand-in."""
        return self.provider == "openai"


_O200K = "o200k_base"
_CL100K = "cl100k_base"

# (name, window, max_output, encoding, provider)
_KNOWN: list[tuple[str, int, int | None, str, str]] = [
    ("gpt-4o", 128_000, 16_384, _O200K, "openai"),
    ("gpt-4o-mini", 128_000, 16_384, _O200K, "openai"),
    ("chatgpt-4o-latest", 128_000, 16_384, _O200K, "openai"),
    ("gpt-4.1", 1_047_576, 32_768, _O200K, "openai"),
    ("gpt-4.1-mini", 1_047_576, 32_768, _O200K, "openai"),
    ("gpt-4.1-nano", 1_047_576, 32_768, _O200K, "openai"),
    ("gpt-4.5-preview", 128_000, 16_384, _O200K, "openai"),
    ("o1", 200_000, 100_000, _O200K, "openai"),
    ("o1-pro", 200_000, 100_000, _O200K, "openai"),
    ("o1-mini", 128_000, 65_536, _O200K, "openai"),
    ("o1-preview", 128_000, 32_768, _O200K, "openai"),
    ("o3", 200_000, 100_000, _O200K, "openai"),
    ("o3-pro", 200_000, 100_000, _O200K, "openai"),
    ("o3-mini", 200_000, 100_000, _O200K, "openai"),
    ("o4-mini", 200_000, 100_000, _O200K, "openai"),
    ("gpt-5", 400_000, 128_000, _O200K, "openai"),
    ("gpt-5-mini", 400_000, 128_000, _O200K, "openai"),
    ("gpt-5-nano", 400_000, 128_000, _O200K, "openai"),
    ("gpt-5-codex", 400_000, 128_000, _O200K, "openai"),
    ("gpt-5-pro", 400_000, 272_000, _O200K, "openai"),
    ("gpt-5-chat-latest", 128_000, 16_384, _O200K, "openai"),
    ("gpt-5.1", 400_000, 128_000, _O200K, "openai"),
    ("gpt-4-turbo", 128_000, 4_096, _CL100K, "openai"),
    ("gpt-4", 8_192, 8_192, _CL100K, "openai"),
    ("gpt-3.5-turbo", 16_385, 4_096, _CL100K, "openai"),
    ("claude-3-haiku", 200_000, 4_096, _O200K, "anthropic"),
    ("claude-3-opus", 200_000, 4_096, _O200K, "anthropic"),
    ("claude-3-5-haiku", 200_000, 8_192, _O200K, "anthropic"),
    ("claude-3-5-sonnet", 200_000, 8_192, _O200K, "anthropic"),
    ("claude-3-7-sonnet", 200_000, 64_000, _O200K, "anthropic"),
    ("claude-sonnet-4", 200_000, 64_000, _O200K, "anthropic"),
    ("claude-opus-4", 200_000, 32_000, _O200K, "anthropic"),
    ("claude-opus-4-1", 200_000, 32_000, _O200K, "anthropic"),
    ("claude-sonnet-4-5", 200_000, 64_000, _O200K, "anthropic"),
    ("claude-haiku-4-5", 200_000, 64_000, _O200K, "anthropic"),
    ("claude-opus-4-5", 200_000, 64_000, _O200K, "anthropic"),
    ("gemini-1.5-pro", 2_097_152, 8_192, _O200K, "google"),
    ("gemini-1.5-flash", 1_048_576, 8_192, _O200K, "google"),
    ("gemini-2.0-flash", 1_048_576, 8_192, _O200K, "google"),
    ("gemini-2.0-flash-lite", 1_048_576, 8_192, _O200K, "google"),
    ("gemini-2.5-pro", 1_048_576, 65_536, _O200K, "google"),
    ("gemini-2.5-flash", 1_048_576, 65_536, _O200K, "google"),
    ("gemini-2.5-flash-lite", 1_048_576, 65_536, _O200K, "google"),
    ("gemini-3-pro", 1_048_576, 65_536, _O200K, "google"),
    ("deepseek-chat", 128_000, 8_192, _O200K, "deepseek"),
    ("deepseek-reasoner", 128_000, 64_000, _O200K, "deepseek"),
    # Open-weight models: the output limit is the host's choice, so none is recorded.
    ("llama-3.1-8b", 131_072, None, _O200K, "meta"),
    ("llama-3.1-70b", 131_072, None, _O200K, "meta"),
    ("llama-3.1-405b", 131_072, None, _O200K, "meta"),
    ("llama-3.3-70b", 131_072, None, _O200K, "meta"),
    ("llama-4-scout", 10_000_000, None, _O200K, "meta"),
    ("llama-4-maverick", 1_000_000, None, _O200K, "meta"),
    ("qwen2.5-32b", 131_072, 8_192, _O200K, "qwen"),
    ("qwen2.5-72b", 131_072, 8_192, _O200K, "qwen"),
    ("qwen2.5-coder-32b", 131_072, 8_192, _O200K, "qwen"),
    ("qwen3-32b", 131_072, 32_768, _O200K, "qwen"),
    ("qwen3-30b-a3b", 131_072, 32_768, _O200K, "qwen"),
    ("qwen3-235b-a22b", 131_072, 32_768, _O200K, "qwen"),
    ("qwen3-coder", 262_144, 65_536, _O200K, "qwen"),
    ("mistral-large", 131_072, None, _O200K, "mistral"),
    ("mistral-medium", 131_072, None, _O200K, "mistral"),
    ("mistral-small", 131_072, None, _O200K, "mistral"),
    ("codestral", 256_000, None, _O200K, "mistral"),
]

# Spellings some routers use for the same models (dots where Anthropic writes dashes).
_ALIASES: dict[str, str] = {
    "claude-3.5-haiku": "claude-3-5-haiku",
    "claude-3.5-sonnet": "claude-3-5-sonnet",
    "claude-3.7-sonnet": "claude-3-7-sonnet",
    "claude-opus-4.1": "claude-opus-4-1",
    "claude-sonnet-4.5": "claude-sonnet-4-5",
    "claude-haiku-4.5": "claude-haiku-4-5",
    "claude-opus-4.5": "claude-opus-4-5",
}

MODELS: dict[str, ModelInfo] = {
    name: ModelInfo(name, window, max_output, encoding, provider)
    for name, window, max_output, encoding, provider in _KNOWN
}
"""The catalog, keyed by lower-case name (aliases included). Prefer `register` to editing it."""
MODELS.update({alias: MODELS[name] for alias, name in _ALIASES.items()})

# A snapshot or variant suffix starts at one of these: gpt-4o-2024-08-06, model@version, qwen3:32b.
_SUFFIX_SEPARATORS = "-@:"


def register(info: ModelInfo, aliases: Iterable[str] = ()) -> None:
    """Add a model to the catalog (or replace an entry), under its name and any aliases.

    >>> register(ModelInfo("acme-7b", window=32_768, provider="acme"))
    >>> lookup("acme/acme-7b-instruct").window
    32768
    """
    for key in (info.name, *aliases):
        MODELS[key.strip().lower()] = info


def lookup(name: str) -> ModelInfo | None:
    """The catalog entry for a model name, or None when nothing matches.

    Tries the name as given (case-insensitive), then without a provider prefix ("openai/...",
    "meta-llama/..."), then the longest catalog name that the model name starts with, followed
    by a separator: a dated snapshot such as ``gpt-4o-2024-08-06`` is found as ``gpt-4o``.
    """
    key = name.strip().lower()
    if key in MODELS:
        return MODELS[key]
    key = key.rsplit("/", 1)[-1]
    if key in MODELS:
        return MODELS[key]
    for end in range(len(key) - 1, 0, -1):
        if key[end] in _SUFFIX_SEPARATORS and key[:end] in MODELS:
            return MODELS[key[:end]]
    return None
