"""Redactors: functions the compactor runs on every summary before it is stored
(`summaries-redacted`).

A `Redactor` takes text and returns it with secrets replaced. `redact_secrets` is the default: it
replaces the shapes of secret that are unmistakable (provider API keys, GitHub and Slack tokens,
AWS access keys, bearer tokens, private key blocks, ``password=...`` style assignments) with
``[redacted]``, and leaves everything else, identifiers included, as it was.
"""

from __future__ import annotations

import re
from collections.abc import Callable

Redactor = Callable[[str], str]
"""Takes a summary's text and returns the text to store."""

REDACTED = "[redacted]"

_WHOLE = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----"
    r"|\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{16,}"
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"
    r"|\bgithub_pat_[A-Za-z0-9_]{20,}"
    r"|\bxox[abposr]-[A-Za-z0-9-]{10,}"
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"
    r"|\bAIza[0-9A-Za-z_-]{35}"
    r"|\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",  # a JSON web token
    re.DOTALL,
)
# Keep the label, replace the value: "Authorization: Bearer [redacted]", "password=[redacted]".
_LABELLED = re.compile(
    r"(\b(?:Bearer|Basic|Token)\s+)[A-Za-z0-9._~+/=-]{8,}"
    r"|(\b[\w-]*(?:password|passwd|pwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token)"
    r"[\"']?\s*[:=]\s*[\"']?)([^\s\"',;&]{4,})",
    re.IGNORECASE,
)


def redact_secrets(text: str) -> str:
    """`text` with obvious secrets replaced by ``[redacted]``.

    >>> redact_secrets("export OPENAI_API_KEY=sk-abcdefghijklmnopqrstuv and password=hunter22")
    'export OPENAI_API_KEY=[redacted] and password=[redacted]'
    """
    text = _WHOLE.sub(REDACTED, text)
    return _LABELLED.sub(_keep_label, text)


def _keep_label(match: re.Match[str]) -> str:
    if match.group(1):
        return f"{match.group(1)}{REDACTED}"
    value = match.group(3)
    return match.group(0) if value == REDACTED else f"{match.group(2)}{REDACTED}"
