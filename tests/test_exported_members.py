"""The public surface of `ctxfold` is deliberate: this pins it."""

from __future__ import annotations

import ctxfold


def test_all_is_sorted_and_every_name_resolves() -> None:
    """`ctxfold.__all__` is sorted, and every name in it can be imported."""
    names = [n for n in ctxfold.__all__ if n != "__version__"]
    assert names == sorted(names)
    for name in ctxfold.__all__:
        assert getattr(ctxfold, name) is not None, name


def test_public_surface_is_pinned() -> None:
    """Adding or removing a public name is a conscious change to this list."""
    assert set(ctxfold.__all__) == {
        "AsyncSession", "Budget", "BudgetError", "ClearToolResults", "CollapseRepeats", "Compacted",
        "CompactionContext", "CompactionReport", "CompactionStart", "Compactor", "ConflictError",
        "CtxfoldError", "Event", "EventStore", "ExtractiveSummarizer", "FallbackSummarizer",
        "HeuristicCounter", "InvalidHistoryError", "InvalidInputError", "Item", "MemoryStore",
        "Message", "MissingDependencyError", "ModelInfo", "NewEvent", "Pipeline", "PostgresStore",
        "Problem", "Recall", "Recalled", "SQLiteStore", "Session", "ShortenUserMessages",
        "SlidingWindow", "Strategy",
        "Summarize", "SummarizerError", "SummaryRequest", "SummaryResult", "Tally",
        "TiktokenCounter", "TokenCounter", "ToolCall", "Trim", "TruncateToolResults",
        "UnknownRefError", "__version__", "acompact", "acompact_messages", "compact",
        "compact_messages", "counter", "from_anthropic", "from_openai", "is_context_overflow",
        "is_valid", "open_store", "read_jsonl", "recall_tool", "redact_secrets", "repair",
        "to_anthropic", "to_openai", "validate", "write_jsonl",
    }  # fmt: skip


def test_errors_share_one_root() -> None:
    """Every error ctxfold raises on purpose is a CtxfoldError."""
    for name in ("BudgetError", "ConflictError", "InvalidHistoryError", "InvalidInputError",
                 "MissingDependencyError", "SummarizerError", "UnknownRefError"):  # fmt: skip
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
