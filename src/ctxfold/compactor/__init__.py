"""The compactor: triggers, the compaction run, reports, and the list-in/list-out entry point."""

from ctxfold.compactor.background import Background
from ctxfold.compactor.compactor import Compactor
from ctxfold.compactor.context import CompactionContext
from ctxfold.compactor.lists import Compacted, acompact_messages, compact_messages
from ctxfold.compactor.report import CompactionReport, CompactionStart, Outcome, Reason, Trim

__all__ = [
    "Background",
    "Compacted",
    "CompactionContext",
    "CompactionReport",
    "CompactionStart",
    "Compactor",
    "Outcome",
    "Reason",
    "Trim",
    "acompact_messages",
    "compact_messages",
]
