"""The public surface of `ctxfold` is deliberate: this pins it."""

from __future__ import annotations

import importlib

import pytest

import ctxfold


def test_all_is_sorted_and_every_name_resolves() -> None:
    """`ctxfold.__all__` is sorted, and every name in it can be imported."""
    names = [n for n in ctxfold.__all__ if n != "__version__"]
    assert names == sorted(names)
    for name in ctxfold.__all__:
        assert getattr(ctxfold, name) is not None, name


def test_public_surface_is_pinned() -> None:
    """Adding or removing a public name is a conscious change to this list. The package root
    holds what an agent loop writes, at most 40 names, one per thing."""
    assert set(ctxfold.__all__) == {
        "AsyncSession", "Budget", "BudgetError", "ClearToolResults", "CompactionReport",
        "Compactor", "ConflictError", "CtxfoldError", "ExtractiveSummarizer", "FallbackSummarizer",
        "InvalidHistoryError", "InvalidInputError", "MemoryStore", "Message", "Pipeline",
        "PostgresStore", "SQLiteStore", "Session", "SlidingWindow", "Summarize",
        "SummarizerError", "ToolCall", "TruncateToolResults", "__version__", "acompact_messages",
        "compact_messages", "from_anthropic", "from_openai", "is_context_overflow", "is_valid",
        "open_store", "read_jsonl", "recall_tool", "redact_secrets", "repair", "to_anthropic",
        "to_openai", "validate", "write_jsonl",
    }  # fmt: skip
    assert len(ctxfold.__all__) <= 40


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("ctxfold.compactor", "Compacted"),
        ("ctxfold.compactor", "CompactionContext"),
        ("ctxfold.compactor", "CompactionStart"),
        ("ctxfold.compactor", "Trim"),
        ("ctxfold.events", "Event"),
        ("ctxfold.events", "NewEvent"),
        ("ctxfold.pipeline", "Strategy"),
        ("ctxfold.pipeline", "CollapseRepeats"),
        ("ctxfold.pipeline", "ShortenUserMessages"),
        ("ctxfold.session", "Item"),
        ("ctxfold.session.recall", "Recall"),
        ("ctxfold.session.recall", "Recalled"),
        ("ctxfold.storage", "EventStore"),
        ("ctxfold.summarizers", "SummaryRequest"),
        ("ctxfold.summarizers", "SummaryResult"),
        ("ctxfold.tokens", "counter"),
        ("ctxfold.tokens", "Tally"),
        ("ctxfold.tokens", "TiktokenCounter"),
        ("ctxfold.tokens", "HeuristicCounter"),
        ("ctxfold.protocols", "TokenCounter"),
        ("ctxfold.messages", "Problem"),
        ("ctxfold.errors", "MissingDependencyError"),
        ("ctxfold.errors", "UnknownRefError"),
    ],
)
def test_what_left_the_root_is_public_in_its_own_package(module: str, name: str) -> None:
    """Names that are not in the root stay importable, and listed, where they belong."""
    package = importlib.import_module(module)
    assert getattr(package, name) is not None
    assert name in getattr(package, "__all__", [name])


def test_one_name_per_function() -> None:
    """No alias: the list API is compact_messages, not also ctxfold.compact."""
    assert not hasattr(ctxfold, "compact") and not hasattr(ctxfold, "acompact")


def test_errors_share_one_root() -> None:
    """Every error ctxfold raises on purpose is a CtxfoldError."""
    for name in ("BudgetError", "ConflictError", "InvalidHistoryError", "InvalidInputError",
                 "SummarizerError"):  # fmt: skip
        assert issubclass(getattr(ctxfold, name), ctxfold.CtxfoldError)


def test_importing_ctxfold_needs_no_optional_dependency() -> None:
    """`import ctxfold` loads no SDK or database driver (the core install stays light)."""
    import subprocess
    import sys

    code = (
        "import sys, ctxfold; "
        "print(sorted(m for m in ('openai', 'anthropic', 'psycopg', 'litellm', 'tiktoken') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
