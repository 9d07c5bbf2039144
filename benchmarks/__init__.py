"""ctxfold's benchmarks: `python -m benchmarks [topic ...] [--quick] [--out DIR]`.

Each `bench_<topic>.py` module has ``run(quick: bool = False) -> dict`` returning
``{"title": str, "columns": [...], "rows": [[...], ...], "notes": [...]}``; the runner in
`__main__` adds a note naming the machine and writes ``results/<topic>.json`` and
``results/<topic>.md``. A new topic is a new ``bench_<topic>.py``; nothing else to register.

The topics measure what a user calls, the public API, with the peers side by side in the same
run, as ratios of medians (`benchmarks._common` says how samples are summarised):

- ``turn``: `Session.append` + `Compactor.should_compact` per turn, against recounting;
- ``coldstart``: a new process loading a session, against `agents.SQLiteSession`;
- ``writes``: `Session.append` throughput, against `agents.SQLiteSession.add_items`;
- ``messages``: `Session.messages()` after one append;
- ``replay``: `ctxfold.replay.replay` against one tiktoken pass, with its fidelity figures;
- ``background``: the wait of the turn at which a compaction lands.

Benchmarks are never timed inside the test suite; smoke tests call ``run(quick=True)`` and check
the shape of the result, never a speed.
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
