"""Token accounting: counters, running tallies, the model catalog and budgets.

>>> from ctxfold.tokens import Budget, Tally, counter
>>> budget = Budget.for_model("gpt-4o")
>>> tally = Tally(counter("heuristic"))
"""

from ctxfold.tokens.budget import Budget
from ctxfold.tokens.catalog import MODELS, ModelInfo, lookup, register
from ctxfold.tokens.counters import counter, encoding_for_model
from ctxfold.tokens.exact import ENCODINGS, TiktokenCounter, load_encoding
from ctxfold.tokens.heuristic import HeuristicCounter
from ctxfold.tokens.tally import (
    REPLY_PRIMING_TOKENS,
    CachedCounter,
    Tally,
    cached,
    count_messages,
)

__all__ = [
    "ENCODINGS",
    "MODELS",
    "REPLY_PRIMING_TOKENS",
    "Budget",
    "CachedCounter",
    "HeuristicCounter",
    "ModelInfo",
    "Tally",
    "TiktokenCounter",
    "cached",
    "count_messages",
    "counter",
    "encoding_for_model",
    "load_encoding",
    "lookup",
    "register",
]
