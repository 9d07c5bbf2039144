"""A log written by an earlier ctxfold still reads, and projects exactly as that version did.

`tests/fixtures/log_v1` holds a session log in the format of commit cd9d5c0 (before event payloads
were typed): a SQLite file, the same events as JSONL, and the projection that version read from
them, after every event and at the end (see its `generate.py`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ctxfold.events import NewEvent
from ctxfold.storage import MemoryStore, SQLiteStore

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "log_v1"
SESSION = "legacy-v1"


def rows(name: str) -> list[dict[str, Any]]:
    with (FIXTURE / name).open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


@pytest.mark.guarantee("old-logs-read")
def test_a_sqlite_log_from_the_first_format_projects_as_it_did(tmp_path: Path) -> None:
    """Opening the old SQLite file gives the same items (ids, kinds, covered seqs, messages)."""
    path = tmp_path / "log.db"
    shutil.copy(FIXTURE / "log.db", path)
    with SQLiteStore(path) as store:
        session = store.session(SESSION)
        got = [
            {
                "id": item.id,
                "kind": item.kind,
                "covers": list(item.covers) if item.covers else None,
                "message": item.message.to_dict(),
            }
            for item in session.items()
        ]
        events = session.events()
    assert got == rows("projection.jsonl")
    assert [(e.seq, e.type, e.data) for e in events] == [
        (r["seq"], r["type"], r["data"]) for r in rows("events.jsonl")
    ]


@pytest.mark.guarantee("old-logs-read")
def test_every_event_of_the_first_format_folds_as_it_did() -> None:
    """Appending the old events one by one gives, after each, the projection and the pins the
    old version had: compactions of every strategy, masks, usage, pins and unpins included."""
    store = MemoryStore()
    session = store.session(SESSION)
    for event, expected in zip(rows("events.jsonl"), rows("steps.jsonl"), strict=True):
        (stored,) = store.append(SESSION, [NewEvent(event["type"], event["data"])])
        assert stored.seq == event["seq"] == expected["seq"]
        assert [[i.id, i.kind] for i in session.items()] == expected["items"], event["seq"]
        assert sorted(session.pinned) == expected["pinned"], event["seq"]
