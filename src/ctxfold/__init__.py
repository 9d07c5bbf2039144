"""ctxfold: keep long-running LLM agent conversations inside the context window."""

from ctxfold.errors import (
    BudgetError,
    ConflictError,
    CtxfoldError,
    InvalidHistoryError,
    InvalidInputError,
    MissingDependencyError,
    SummarizerError,
)
from ctxfold.messages import Message, ToolCall

__version__ = "0.1.0"

__all__ = [
    "BudgetError",
    "ConflictError",
    "CtxfoldError",
    "InvalidHistoryError",
    "InvalidInputError",
    "Message",
    "MissingDependencyError",
    "SummarizerError",
    "ToolCall",
    "__version__",
]
