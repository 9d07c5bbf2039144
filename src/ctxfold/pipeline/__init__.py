"""The compaction pipeline: strategies as small objects in a list, and the driver that runs them."""

from ctxfold.pipeline.base import Pipeline, Strategy, StrategyEffect, SummaryCall
from ctxfold.pipeline.clear import ClearToolResults
from ctxfold.pipeline.summarize import Summarize
from ctxfold.pipeline.view import RunStats, WorkingView
from ctxfold.pipeline.window import SlidingWindow

__all__ = [
    "ClearToolResults",
    "Pipeline",
    "RunStats",
    "SlidingWindow",
    "Strategy",
    "StrategyEffect",
    "Summarize",
    "SummaryCall",
    "WorkingView",
]
