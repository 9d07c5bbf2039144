"""ctxfold: keep long-running LLM agent conversations inside the context window.

A session's log is durable and append-only; compactions are events in it; the projection is what
the model is sent; a ladder of strategies (clear old tool output, summarize, drop as a last
resort) brings the projection back under budget.

>>> import ctxfold
>>> session = ctxfold.MemoryStore().session("demo")
>>> compactor = ctxfold.Compactor(ctxfold.Budget.for_model("gpt-4o"))
"""

from ctxfold._version import __version__
from ctxfold.compactor import (
    Compacted,
    CompactionContext,
    CompactionReport,
    CompactionStart,
    Compactor,
    Trim,
    acompact_messages,
    compact_messages,
)
from ctxfold.errors import (
    BudgetError,
    ConflictError,
    CtxfoldError,
    InvalidHistoryError,
    InvalidInputError,
    MissingDependencyError,
    SummarizerError,
    UnknownRefError,
)
from ctxfold.events import Event, NewEvent
from ctxfold.messages import (
    Message,
    Problem,
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
    CollapseRepeats,
    Pipeline,
    ShortenUserMessages,
    SlidingWindow,
    Strategy,
    Summarize,
    TruncateToolResults,
)
from ctxfold.protocols import TokenCounter
from ctxfold.session import AsyncSession, Item, Session
from ctxfold.session.recall import Recall, Recalled, recall_tool
from ctxfold.storage import EventStore, MemoryStore, PostgresStore, SQLiteStore, open_store
from ctxfold.summarizers import (
    ExtractiveSummarizer,
    FallbackSummarizer,
    SummaryRequest,
    SummaryResult,
    redact_secrets,
)
from ctxfold.tokens import Budget, HeuristicCounter, ModelInfo, Tally, TiktokenCounter, counter

compact = compact_messages
"""`ctxfold.compact(messages, budget, ...)`: compact a plain list; see `compact_messages`."""
acompact = acompact_messages


__all__ = [
    "AsyncSession",
    "Budget",
    "BudgetError",
    "ClearToolResults",
    "CollapseRepeats",
    "Compacted",
    "CompactionContext",
    "CompactionReport",
    "CompactionStart",
    "Compactor",
    "ConflictError",
    "CtxfoldError",
    "Event",
    "EventStore",
    "ExtractiveSummarizer",
    "FallbackSummarizer",
    "HeuristicCounter",
    "InvalidHistoryError",
    "InvalidInputError",
    "Item",
    "MemoryStore",
    "Message",
    "MissingDependencyError",
    "ModelInfo",
    "NewEvent",
    "Pipeline",
    "PostgresStore",
    "Problem",
    "Recall",
    "Recalled",
    "SQLiteStore",
    "Session",
    "ShortenUserMessages",
    "SlidingWindow",
    "Strategy",
    "Summarize",
    "SummarizerError",
    "SummaryRequest",
    "SummaryResult",
    "Tally",
    "TiktokenCounter",
    "TokenCounter",
    "ToolCall",
    "Trim",
    "TruncateToolResults",
    "UnknownRefError",
    "__version__",
    "acompact",
    "acompact_messages",
    "compact",
    "compact_messages",
    "counter",
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
