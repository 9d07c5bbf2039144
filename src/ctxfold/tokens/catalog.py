"""Context windows and output limits of common chat models, and how to count their tokens.

The figures are the providers' published limits at the time of writing; a deployment can have
smaller ones (an inference host often serves open-weight models with a shorter window), and new
models appear monthly. `register` adds or corrects an entry; `Budget(window=...)` bypasses the
catalog altogether.

`lookup` accepts the names people actually pass: ``"gpt-4o"``, ``"openai/gpt-4o"``,
``"gpt-4o-2024-08-06"``, ``"anthropic/claude-3.7-sonnet:thinking"``, ``"claude-4-sonnet"``,
``"us.anthropic.claude-sonnet-4-5-20250929-v1:0"``, ``"meta-llama/Llama-3.3-70B-Instruct"``,
and finds a variant's own entry before its family's: ``"gpt-5.1-chat"`` is ChatGPT's model with
a 128,000-token window, not the API's ``gpt-5.1`` with 400,000.
"""

from __future__ import annotations

import re
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
    # ChatGPT's chat models ("-chat-latest", "-chat" at routers and Azure) have a smaller
    # window than the API model of the same number.
    ("gpt-5-chat-latest", 128_000, 16_384, _O200K, "openai"),
    ("gpt-5.1", 400_000, 128_000, _O200K, "openai"),
    ("gpt-5.1-chat-latest", 128_000, 16_384, _O200K, "openai"),
    ("gpt-5.2", 400_000, 128_000, _O200K, "openai"),
    ("gpt-5.2-chat-latest", 128_000, 16_384, _O200K, "openai"),
    # GPT-5.4 has a 1,050,000-token window; prompts over 272,000 tokens are billed at a higher
    # rate, which is the provider's business, not the window's.
    ("gpt-5.4", 1_050_000, 128_000, _O200K, "openai"),
    ("gpt-5.4-mini", 400_000, 128_000, _O200K, "openai"),
    ("gpt-4-turbo", 128_000, 4_096, _CL100K, "openai"),
    ("gpt-4", 8_192, 8_192, _CL100K, "openai"),
    ("gpt-3.5-turbo", 16_385, 4_096, _CL100K, "openai"),
    # A completions model, not a snapshot of gpt-3.5-turbo: its window is the old 4,096.
    ("gpt-3.5-turbo-instruct", 4_096, 4_096, _CL100K, "openai"),
    ("claude-3-haiku", 200_000, 4_096, _O200K, "anthropic"),
    ("claude-3-opus", 200_000, 4_096, _O200K, "anthropic"),
    ("claude-3-5-haiku", 200_000, 8_192, _O200K, "anthropic"),
    ("claude-3-5-sonnet", 200_000, 8_192, _O200K, "anthropic"),
    ("claude-3-7-sonnet", 200_000, 64_000, _O200K, "anthropic"),
    # Claude 4: Sonnet 4 and 4.5 take 1M tokens only behind a beta header, so the catalog keeps
    # the standard 200,000 (a larger window is one window= away; a smaller one never overflows).
    ("claude-sonnet-4", 200_000, 64_000, _O200K, "anthropic"),
    ("claude-opus-4", 200_000, 32_000, _O200K, "anthropic"),
    ("claude-opus-4-1", 200_000, 32_000, _O200K, "anthropic"),
    ("claude-sonnet-4-5", 200_000, 64_000, _O200K, "anthropic"),
    ("claude-haiku-4-5", 200_000, 64_000, _O200K, "anthropic"),
    ("claude-opus-4-5", 200_000, 64_000, _O200K, "anthropic"),
    # Anthropic's model pages (2026) give 1M tokens and 128K of output for these. Uncertain: a
    # 4.6 model reached through a platform that has not enabled 1M may still cap at 200,000.
    ("claude-opus-4-6", 1_000_000, 128_000, _O200K, "anthropic"),
    ("claude-sonnet-4-6", 1_000_000, 128_000, _O200K, "anthropic"),
    ("claude-opus-5", 1_000_000, 128_000, _O200K, "anthropic"),
    ("claude-sonnet-5", 1_000_000, 128_000, _O200K, "anthropic"),
    ("claude-opus-5-5", 1_000_000, 128_000, _O200K, "anthropic"),
    ("claude-sonnet-5-5", 1_000_000, 128_000, _O200K, "anthropic"),
    ("claude-haiku-5-5", 1_000_000, 128_000, _O200K, "anthropic"),
    ("claude-fable-5", 1_000_000, 128_000, _O200K, "anthropic"),
    ("claude-fable-5-1", 1_000_000, 128_000, _O200K, "anthropic"),
    ("gemini-1.5-pro", 2_097_152, 8_192, _O200K, "google"),
    ("gemini-1.5-flash", 1_048_576, 8_192, _O200K, "google"),
    ("gemini-2.0-flash", 1_048_576, 8_192, _O200K, "google"),
    ("gemini-2.0-flash-lite", 1_048_576, 8_192, _O200K, "google"),
    ("gemini-2.5-pro", 1_048_576, 65_536, _O200K, "google"),
    ("gemini-2.5-flash", 1_048_576, 65_536, _O200K, "google"),
    ("gemini-2.5-flash-lite", 1_048_576, 65_536, _O200K, "google"),
    ("gemini-3-pro", 1_048_576, 65_536, _O200K, "google"),
    # DeepSeek's API serves DeepSeek-V4 (1M tokens, up to 384K of output) since April 2026, and
    # maps the old names deepseek-chat and deepseek-reasoner onto V4-Flash. Routers and
    # self-hosted deployments still serve the previous generation under those names, so they
    # keep its smaller figures.
    ("deepseek-v4-flash", 1_000_000, 384_000, _O200K, "deepseek"),
    ("deepseek-v4-pro", 1_000_000, 384_000, _O200K, "deepseek"),
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
    # Codestral 25.01 and later take 256,000 tokens; the first release (24.05, the open-weight
    # Codestral-22B) took 32,768.
    ("codestral", 256_000, None, _O200K, "mistral"),
    ("codestral-2405", 32_768, None, _O200K, "mistral"),
    ("codestral-22b", 32_768, None, _O200K, "mistral"),
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
    # Routers and Azure name ChatGPT's models without "-latest".
    "gpt-5-chat": "gpt-5-chat-latest",
    "gpt-5.1-chat": "gpt-5.1-chat-latest",
    "gpt-5.2-chat": "gpt-5.2-chat-latest",
}

MODELS: dict[str, ModelInfo] = {
    name: ModelInfo(name, window, max_output, encoding, provider)
    for name, window, max_output, encoding, provider in _KNOWN
}
"""The catalog, keyed by lower-case name (aliases included). Prefer `register` to editing it."""
MODELS.update({alias: MODELS[name] for alias, name in _ALIASES.items()})

# A snapshot or variant suffix starts at one of these: gpt-4o-2024-08-06, model@version, qwen3:32b.
_SUFFIX_SEPARATORS = "-@:"

# Words that make an OpenAI name another model, with limits of its own, rather than a snapshot
# of the model it starts with: ChatGPT's "-chat" models, the completions model "-instruct".
_OWN_VARIANTS = frozenset({"chat", "instruct"})
_WORDS = re.compile(r"[a-z]+")


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
    "meta-llama/...", a cloud's "us.anthropic."), with a Claude version written first
    ("claude-4-5-sonnet" for "claude-sonnet-4-5"), then the longest catalog name that the model
    name starts with, followed by a separator: a dated snapshot such as ``gpt-4o-2024-08-06`` is
    found as ``gpt-4o``. The longest name is the closest family, so a variant with an entry of
    its own is found as that entry (``gpt-5.1-chat-2025-11-13`` as ``gpt-5.1-chat``, not as
    ``gpt-5.1``). An OpenAI variant named "chat" or "instruct" is another model, with limits of
    its own: it never falls back to the model it starts with, and is unknown when the catalog
    has no entry for it (``gpt-5.4-chat-latest`` is not ``gpt-5.4``, whose window is eight times
    larger).

    >>> lookup("claude-4-sonnet").name, lookup("deepseek-v4-pro-0813").window
    ('claude-sonnet-4', 1000000)
    >>> lookup("openai/gpt-5.1-chat").window, lookup("gpt-5.4-chat-latest") is None
    (128000, True)
    """
    if not isinstance(name, str):
        raise InvalidInputError(f"a model name is a string such as 'gpt-4o', not {name!r}")
    key = name.strip().lower()
    if key in MODELS:
        return MODELS[key]
    key = key.rsplit("/", 1)[-1]
    cloud = _CLOUD_PREFIX.match(key)
    if cloud is not None:
        key = key[cloud.end() :]
    # Claude 3 writes its version first (claude-3-7-sonnet), Claude 4 its family first; routers
    # mix the two, so both spellings are tried.
    for candidate in dict.fromkeys((key, _claude_family_first(key))):
        if candidate in MODELS:
            return MODELS[candidate]
        for end in range(len(candidate) - 1, 0, -1):
            if candidate[end] in _SUFFIX_SEPARATORS and candidate[:end] in MODELS:
                info = MODELS[candidate[:end]]
                if not _another_variant(info, candidate[end:]):
                    return info
    return None


def _another_variant(family: ModelInfo, rest: str) -> bool:
    """Whether `rest`, what a name adds to the catalog's `family`, names a variant that is a model
    of its own (see `lookup`) rather than a snapshot of `family`."""
    return family.provider == "openai" and not _OWN_VARIANTS.isdisjoint(_WORDS.findall(rest))


# Bedrock and Vertex spell a model "us.anthropic.claude-..." or "anthropic.claude-...".
_CLOUD_PREFIX = re.compile(r"^(?:[a-z]{2,6}\.)?anthropic\.")
# "claude-4-5-sonnet", "claude-4.1-opus-latest": the version before the family name.
_VERSION_FIRST = re.compile(r"^claude-(\d+(?:[.-]\d+)?)-(opus|sonnet|haiku|fable)(?=$|[-@:])")


def _claude_family_first(key: str) -> str:
    found = _VERSION_FIRST.match(key)
    if found is None:
        return key
    version = found.group(1).replace(".", "-").removesuffix("-0")
    return f"claude-{found.group(2)}-{version}{key[found.end() :]}"
