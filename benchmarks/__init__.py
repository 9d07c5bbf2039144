"""ctxfold's benchmarks: `python -m benchmarks [topic ...] [--quick]`.

Each `bench_<topic>.py` module has ``run(quick: bool = False) -> dict`` returning
``{"title": str, "columns": [...], "rows": [[...], ...], "notes": [...]}``; the runner in
`__main__` writes ``results/<topic>.json`` and ``results/<topic>.md``. Benchmarks are never timed
inside the test suite; a smoke test may call ``run(quick=True)``.
"""

from __future__ import annotations

from pathlib import Path

from ctxfold.messages import Message

ROOT = Path(__file__).resolve().parent
TRANSCRIPTS = ROOT.parent.parent / "shared" / "data" / "transcripts"


def transcript_messages() -> list[Message]:
    """Every message of the shared agent transcripts, in file order; [] when they are absent."""
    from ctxfold.messages.jsonl import read_jsonl

    if not TRANSCRIPTS.is_dir():
        return []
    messages: list[Message] = []
    for path in sorted(TRANSCRIPTS.glob("*.jsonl")):
        messages.extend(read_jsonl(path))
    return messages
