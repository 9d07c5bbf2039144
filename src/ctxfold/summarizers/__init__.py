"""Summarizers: the protocol's implementations and what every summary goes through.

- `ExtractiveSummarizer`: no model, no network, deterministic; the default.
- `FallbackSummarizer`: a primary summarizer with a fallback (the extractive one by default).
- `build_request`, `SECTIONS`: ctxfold's sectioned prompt and the request it makes.
- `render_record`, `frame_summary`: the stretch as a record to read; a summary as projected.
- `extract_identifiers`, `verify`: the identifiers a summary must keep, and the check.
- `as_summarizer`, `normalize_result`, `is_decline`, `is_echo`: how the engine treats answers.
- `Redactor`, `redact_secrets`: run on every summary before it is stored.

LLM summarizers live in `ctxfold.summarizers.openai`, `.anthropic` and `.litellm` (extras).
"""

from ctxfold.summarizers._request import SummaryRequest, SummaryResult, Tier
from ctxfold.summarizers.base import (
    NormalizedSummarizer,
    as_summarizer,
    is_decline,
    is_echo,
    normalize_result,
)
from ctxfold.summarizers.extractive import ExtractiveSummarizer
from ctxfold.summarizers.fallback import FallbackSummarizer
from ctxfold.summarizers.identifiers import Verification, extract_identifiers, verify
from ctxfold.summarizers.prompt import SECTIONS, build_request, parse_sections, render_sections
from ctxfold.summarizers.record import frame_summary, render_record
from ctxfold.summarizers.redact import Redactor, redact_secrets

__all__ = [
    "SECTIONS",
    "ExtractiveSummarizer",
    "FallbackSummarizer",
    "NormalizedSummarizer",
    "Redactor",
    "SummaryRequest",
    "SummaryResult",
    "Tier",
    "Verification",
    "as_summarizer",
    "build_request",
    "extract_identifiers",
    "frame_summary",
    "is_decline",
    "is_echo",
    "normalize_result",
    "parse_sections",
    "redact_secrets",
    "render_record",
    "render_sections",
    "verify",
]
