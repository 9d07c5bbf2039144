"""Summarizers: what a user picks, writes or configures to turn a stretch of history into a summary.

- `ExtractiveSummarizer`: no model, no network, deterministic; the default.
- `FallbackSummarizer`: a primary summarizer with a fallback (the extractive one by default).
- `SummaryRequest`, `SummaryResult`, `Tier`: what a summarizer is asked and may answer; a custom
  summarizer is any callable from a `SummaryRequest` to a `str`, a `SummaryResult` or None.
- `SECTIONS`, `build_request`, `render_record`, `parse_sections`, `render_sections`: ctxfold's
  sectioned prompt, the framed record of a stretch, and reading and writing sectioned summaries,
  for a custom summarizer that wants them.
- `Redactor`, `redact_secrets`: scrub secrets from what an LLM summarizer sends and from what is
  stored.

LLM summarizers live in `ctxfold.summarizers.openai`, `.anthropic` and `.litellm` (extras). What
the engine uses to treat every summarizer alike (`base`), the identifier check (`identifiers`)
and the framing of a stored summary (`record`) are imported from their modules.
"""

from ctxfold.summarizers.extractive import ExtractiveSummarizer
from ctxfold.summarizers.fallback import FallbackSummarizer
from ctxfold.summarizers.prompt import SECTIONS, build_request, parse_sections, render_sections
from ctxfold.summarizers.record import render_record
from ctxfold.summarizers.redact import Redactor, redact_secrets
from ctxfold.summarizers.request import SummaryRequest, SummaryResult, Tier

__all__ = [
    "SECTIONS",
    "ExtractiveSummarizer",
    "FallbackSummarizer",
    "Redactor",
    "SummaryRequest",
    "SummaryResult",
    "Tier",
    "build_request",
    "parse_sections",
    "redact_secrets",
    "render_record",
    "render_sections",
]
