"""The compaction pipeline: strategies as small objects in a list, and the pipeline that runs
them."""

from ctxfold.pipeline.accounting import Accounts, StrategyEffect
from ctxfold.pipeline.clear import ClearToolResults
from ctxfold.pipeline.fit import CutToFit
from ctxfold.pipeline.pipeline import Pipeline
from ctxfold.pipeline.proposals import MaskResults, Replace, SummaryCall
from ctxfold.pipeline.rules import Rules, SummaryRole
from ctxfold.pipeline.strategy import Strategy
from ctxfold.pipeline.summarize import Summarize
from ctxfold.pipeline.truncate import TruncateToolResults
from ctxfold.pipeline.user_messages import CollapseRepeats, ShortenUserMessages
from ctxfold.pipeline.view import WorkingView
from ctxfold.pipeline.window import SlidingWindow

__all__ = [
    "Accounts",
    "ClearToolResults",
    "CollapseRepeats",
    "CutToFit",
    "MaskResults",
    "Pipeline",
    "Replace",
    "Rules",
    "ShortenUserMessages",
    "SlidingWindow",
    "Strategy",
    "StrategyEffect",
    "Summarize",
    "SummaryCall",
    "SummaryRole",
    "TruncateToolResults",
    "WorkingView",
]
