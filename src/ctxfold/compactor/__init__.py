"""The compactor: triggers, the compaction run, reports, and the list-in/list-out entry point."""

from ctxfold.compactor.callback import CompactionContext
from ctxfold.compactor.core import Compactor
from ctxfold.compactor.functional import Compacted, acompact_messages, compact_messages
from ctxfold.compactor.report import CompactionReport, CompactionStart

__all__ = [
    "Compacted",
    "CompactionContext",
    "CompactionReport",
    "CompactionStart",
    "Compactor",
    "acompact_messages",
    "compact_messages",
]
