"""ctxfold: keep long-running LLM agent conversations inside the context window.

A session's log is durable and append-only; compactions are events in it; the projection is what
the model is sent; a ladder of strategies (clear old tool output, summarize, drop as a last
resort) brings the projection back under budget.

>>> import ctxfold
>>> session = ctxfold.MemoryStore().session("demo")
>>> compactor = ctxfold.Compactor(ctxfold.Budget.for_model("gpt-4o"))
"""

from ctxfold._version import __version__
from ctxfold.compactor import CompactionReport, Compactor, acompact_messages, compact_messages
from ctxfold.errors import (
    BudgetError,
    ConflictError,
    CtxfoldError,
    InvalidHistoryError,
    InvalidInputError,
    SummarizerError,
)
from ctxfold.messages import (
    Message,
    ToolCall,
    from_anthropic,
    from_openai,
    is_valid,
    read_jsonl,
    repair,
    to_anthropic,
    to_openai,
    validate,
    write_jsonl,
)
from ctxfold.overflow import is_context_overflow
from ctxfold.pipeline import (
    ClearToolResults,
    Pipeline,
    SlidingWindow,
    Summarize,
    TruncateToolResults,
)
from ctxfold.session import AsyncSession, Session
from ctxfold.session.recall import recall_tool
from ctxfold.storage import MemoryStore, PostgresStore, SQLiteStore, open_store
from ctxfold.summarizers import ExtractiveSummarizer, FallbackSummarizer, redact_secrets
from ctxfold.tokens import Budget

# What a user writes in an agent loop. Everything else is public in its own package, one name
# per thing: ctxfold.compactor (Compacted, CompactionContext, Trim, Background), ctxfold.events,
# ctxfold.pipeline (Strategy and every rung), ctxfold.session (Item, recall), ctxfold.storage,
# ctxfold.summarizers (SummaryRequest, the LLM summarizers), ctxfold.tokens (counters, Tally,
# the model catalog), ctxfold.errors (the whole error tree), ctxfold.testing.
__all__ = [
    "AsyncSession",
    "Budget",
    "BudgetError",
    "ClearToolResults",
    "CompactionReport",
    "Compactor",
    "ConflictError",
    "CtxfoldError",
    "ExtractiveSummarizer",
    "FallbackSummarizer",
    "InvalidHistoryError",
    "InvalidInputError",
    "MemoryStore",
    "Message",
    "Pipeline",
    "PostgresStore",
    "SQLiteStore",
    "Session",
    "SlidingWindow",
    "Summarize",
    "SummarizerError",
    "ToolCall",
    "TruncateToolResults",
    "__version__",
    "acompact_messages",
    "compact_messages",
    "from_anthropic",
    "from_openai",
    "is_context_overflow",
    "is_valid",
    "open_store",
    "read_jsonl",
    "recall_tool",
    "redact_secrets",
    "repair",
    "to_anthropic",
    "to_openai",
    "validate",
    "write_jsonl",
]
