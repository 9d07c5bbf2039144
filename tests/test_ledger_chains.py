"""A summary that takes in summaries or notes records their work ledgers by reference, and only
the ledger of its own originals as data: the log of a long session grows with its length, not
with its square, and every reading of the session (live, folded anew, from a checkpoint) gives
the same ledgers."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from ctxfold import Budget, Compactor, MemoryStore, SQLiteStore
from ctxfold.events import COMPACTION, LEDGER_PARTS, MESSAGE, Compaction, LedgerParts, NewEvent
from ctxfold.messages import Message
from ctxfold.pipeline.ledgers import read_record
from ctxfold.session import Session
from ctxfold.session.projection import Item
from ctxfold.summarizers.ledger import Ledger, build_ledger, to_data
from ctxfold.testing.transcripts import generate
from ctxfold.tokens import counter as make_counter

COUNTER = make_counter("heuristic")


def _compacted(session: Session, steps: int, window: int = 6_000) -> None:
    """Append a generated session of `steps` tool steps, compacting as an agent would."""
    compactor = Compactor(Budget(window=window), counter=COUNTER)
    for message in generate(seed=7, steps=steps):
        session.append(message)
        if message.role == "assistant":
            compactor.maybe_compact(session)


def _ledgers(items: Sequence[Item]) -> list[tuple[int, Ledger]]:
    return [(i.id, read_record(i.ledger)) for i in items if i.ledger is not None]


def _recorded_sizes(session: Session) -> list[tuple[int, int]]:
    """(version, JSON size) of the ledger every compaction event of `session` recorded."""
    out = []
    for event in session.events():
        if event.type == COMPACTION and event.data.get("ledger") is not None:
            ledger = event.data["ledger"]
            out.append((ledger["version"], len(json.dumps(ledger))))
    return out


def test_a_long_session_records_each_ledger_entry_about_once() -> None:
    """Over a long session, the ledgers the compactions record add up to about the ledger of
    the whole log, not one whole ledger per compaction; and that share stays flat as the
    session grows."""
    shares = []
    for steps in (120, 240):
        session = MemoryStore().session("long", counter=COUNTER)
        _compacted(session, steps)
        sizes = _recorded_sizes(session)
        assert sum(1 for version, _ in sizes if version == LEDGER_PARTS) >= 10, sizes
        whole = len(json.dumps(to_data(build_ledger(_originals(session)))))
        shares.append(sum(size for _, size in sizes) / whole)
    assert shares[1] < 2.5, shares
    assert shares[1] < shares[0] * 1.25, shares


def _originals(session: Session) -> list[tuple[int, Message]]:
    return [
        (e.seq, Message.from_dict(e.data["message"])) for e in session.events() if e.type == MESSAGE
    ]


def test_every_reading_of_the_log_gives_the_same_ledgers(tmp_path: Path) -> None:
    """The live session, a new one starting from the checkpoint, and one folding the log from
    the start read equal ledgers for every summary and note."""
    path = tmp_path / "log.db"
    live = SQLiteStore(path).session("s", counter=COUNTER)
    _compacted(live, 200)
    expected = _ledgers(live.items())
    assert any(isinstance(i.ledger, LedgerParts) for i in live.items())
    store = SQLiteStore(path)
    assert store.load_snapshot("s") is not None  # kept at each compaction
    assert _ledgers(store.session("s", counter=COUNTER).items()) == expected
    store.drop_snapshots("s")
    folded = SQLiteStore(path).session("s", counter=COUNTER, checkpoint_every=None)
    assert _ledgers(folded.items()) == expected


def test_a_part_naming_no_ledger_is_left_out() -> None:
    """A listed part that names a replaced item holding no ledger, or no item at all (a log
    edited by hand), is left out of the item's ledger: no error, no entry of another item."""
    session = MemoryStore().session("s", counter=COUNTER)
    session.append(
        [
            Message("user", "Fix the parser"),
            Message("assistant", "Looking."),
            Message("user", "Also the tests"),
        ]
    )
    own = to_data(Ledger(first_seq=2, last_seq=3))
    data = {"version": LEDGER_PARTS, "parts": [{"item": 0}, {"item": 7}, "x", own]}
    session.append(NewEvent.of(Compaction(1, 2, Message("user", "[summary]"), ledger=data)))
    (summary,) = [i for i in session.items() if i.ledger is not None]
    assert summary.ledger == own
    assert read_record(summary.ledger) == Ledger(first_seq=2, last_seq=3)


def test_parts_out_of_order_leave_the_later_part_out() -> None:
    """Parts whose ledgers do not follow one another (hand-edited data) read as the parts that
    do: derived data loses entries, never the read; nested parts open without recursion."""
    first = to_data(Ledger(first_seq=1, last_seq=10))
    early = to_data(Ledger(first_seq=3, last_seq=4))
    later = to_data(Ledger(first_seq=11, last_seq=12))
    assert read_record(LedgerParts((first, early))) == Ledger(first_seq=1, last_seq=10)
    nested: Mapping[str, object] | LedgerParts = first
    for seq in range(11, 3_011, 2):  # deeper than Python's recursion limit
        nested = LedgerParts((nested, to_data(Ledger(first_seq=seq, last_seq=seq + 1))))
    assert isinstance(nested, LedgerParts)
    assert len(nested.leaves()) == 1_501
    assert read_record(LedgerParts((nested, later))) == Ledger(first_seq=1, last_seq=3_010)
