"""Running ctxfold over a recorded transcript, offline.

- `run`: `replay` plays a transcript into a session as a live agent would, with the compactor's
  automatic trigger before every model request, and reports every request (`ReplayResult`).
- `once`: `compact_transcript` compacts a whole transcript once, for a given window.
- `html`: `write_html` turns a `ReplayResult` into a self-contained HTML page with a chart.

The CLI's ``compact``, ``replay`` and ``demo`` commands are thin wrappers around these.
"""

from ctxfold.replay.html import render_html, write_html
from ctxfold.replay.once import compact_transcript
from ctxfold.replay.run import (
    ReplayCompaction,
    ReplayResult,
    Request,
    fresh_session_id,
    replay,
    replay_transcript,
)

__all__ = [
    "ReplayCompaction",
    "ReplayResult",
    "Request",
    "compact_transcript",
    "fresh_session_id",
    "render_html",
    "replay",
    "replay_transcript",
    "write_html",
]
