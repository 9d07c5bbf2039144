"""Real concurrency and real crashes against the stores that several processes share.

Threads are covered for every store by the contract suite; here several processes (spawned, so
nothing is shared but the database) append to one session, race on one expected seq, and a
writer is killed with SIGKILL in the middle of its stream.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxfold.errors import ConflictError
from ctxfold.events import NewEvent
from ctxfold.storage import open_store
from tests._stores import SHARED_KINDS, empty_store_url

SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture(params=SHARED_KINDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL to an empty store that other processes can open: a SQLite file or a fresh schema."""
    yield from empty_store_url(request.param, request, tmp_path)


def _append_many(url: str, worker: int, count: int, barrier: Any) -> None:
    with open_store(url) as store:
        barrier.wait()
        for n in range(count):
            store.append("shared", [NewEvent("turn", {"worker": worker, "n": n})])


def _append_expecting(url: str, worker: int, expected: int, barrier: Any, results: Any) -> None:
    with open_store(url) as store:
        barrier.wait()
        try:
            events = store.append("race", [NewEvent("turn", {"worker": worker})] * 2, expected)
            results.put(("landed", worker, [e.seq for e in events]))
        except ConflictError as exc:
            results.put(("conflict", worker, exc.actual_seq))


def _run(processes: list[Any]) -> None:
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [p.exitcode for p in processes] == [0] * len(processes)


def test_processes_appending_to_one_session_lose_nothing(store_url: str) -> None:
    """Four processes appending 50 events each: all 200 land once, seqs 1 to 200."""
    processes, count = 4, 50
    open_store(store_url).close()  # create the schema once, before the race
    barrier = SPAWN.Barrier(processes)
    _run(
        [
            SPAWN.Process(target=_append_many, args=(store_url, w, count, barrier))
            for w in range(processes)
        ]
    )
    with open_store(store_url) as store:
        events = store.read("shared")
    assert [e.seq for e in events] == list(range(1, processes * count + 1))
    assert sorted((e.data["worker"], e.data["n"]) for e in events) == [
        (w, n) for w in range(processes) for n in range(count)
    ]
    for worker in range(processes):
        # Each process's own appends keep their order in the log.
        mine = [e.data["n"] for e in events if e.data["worker"] == worker]
        assert mine == list(range(count))


def test_processes_racing_on_one_expected_seq_let_exactly_one_in(store_url: str) -> None:
    """Four processes released together, all expecting seq 1: one lands, three conflict."""
    processes = 4
    with open_store(store_url) as store:
        store.append("race", [NewEvent("turn", {"worker": -1})])
    barrier = SPAWN.Barrier(processes)
    results = SPAWN.Queue()
    _run(
        [
            SPAWN.Process(target=_append_expecting, args=(store_url, w, 1, barrier, results))
            for w in range(processes)
        ]
    )
    outcomes = [results.get(timeout=10) for _ in range(processes)]
    landed = [o for o in outcomes if o[0] == "landed"]
    conflicts = [o for o in outcomes if o[0] == "conflict"]
    assert len(landed) == 1
    assert landed[0][2] == [2, 3]
    assert [o[2] for o in conflicts] == [3] * (processes - 1)
    with open_store(store_url) as store:
        events = store.read("race")
    assert [e.data["worker"] for e in events] == [-1, landed[0][1], landed[0][1]]


FOLLOWED = """
import sys, time
from ctxfold.events import NewEvent
from ctxfold.storage import open_store

with open_store(sys.argv[1]) as store:
    for n in range(60):
        store.append("live", [NewEvent("turn", {"n": n})] * (1 + n % 3))
        time.sleep(0.003)
"""


def test_a_subscriber_sees_another_process_append_every_event_once(store_url: str) -> None:
    """A writer in another process (SQLite: seen by polling; PostgreSQL: by LISTEN/NOTIFY): the
    subscriber gets every event once, in seq order."""
    open_store(store_url).close()
    writer = subprocess.Popen(
        [sys.executable, "-c", FOLLOWED, store_url],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    expected = sum(1 + n % 3 for n in range(60))
    seen = []
    try:
        with open_store(store_url) as store:
            for event in store.subscribe("live", idle_timeout=30):
                seen.append(event.seq)
                if len(seen) == expected:
                    break
            stored = [e.seq for e in store.read("live")]
    finally:
        writer.wait(timeout=60)
    assert seen == list(range(1, expected + 1)) == stored


WRITER = """
import sys
from ctxfold.events import NewEvent
from ctxfold.storage import open_store

store = open_store(sys.argv[1])
batch = 0
while True:
    data = [{"batch": batch, "part": part, "pad": "x" * 4000} for part in range(3)]
    events = store.append("crash", [NewEvent("turn", d) for d in data])
    print(batch, events[-1].seq, flush=True)
    batch += 1
"""


def test_a_killed_writer_loses_no_acknowledged_append_and_leaves_no_half_batch(
    store_url: str,
) -> None:
    """SIGKILL mid-stream: every acknowledged batch is there after reopening, and every batch of
    three is all there or not at all; the session takes appends again right away."""
    open_store(store_url).close()
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, store_url],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    acknowledged: dict[int, int] = {}
    assert writer.stdout is not None
    for line in writer.stdout:
        batch, seq = map(int, line.split())
        acknowledged[batch] = seq
        if len(acknowledged) >= 40:
            break
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=30)
    writer.stdout.close()
    assert writer.returncode == -signal.SIGKILL

    with open_store(store_url) as store:
        events = store.read("crash")
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert len(events) % 3 == 0
        batches: dict[int, list[tuple[int, int]]] = {}
        for event in events:
            batches.setdefault(event.data["batch"], []).append((event.seq, event.data["part"]))
        for batch, seq in acknowledged.items():
            assert batches[batch] == [(seq - 2, 0), (seq - 1, 1), (seq, 2)]
        assert all([part for _, part in rows] == [0, 1, 2] for rows in batches.values())
        assert sorted(batches) == list(range(len(batches)))
        after = store.append("crash", [NewEvent("turn", {"after": True})], len(events))
        assert after[0].seq == len(events) + 1
