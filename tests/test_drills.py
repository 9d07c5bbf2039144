"""Crash and concurrency drills, small: SIGKILL writers and compactors sharing one session.

On SQLite and on PostgreSQL: four writer processes append keyed four-message turns while two
compactor processes compact the same session with a summarizer that sleeps. Ten writers are
killed with SIGKILL (half of them while a compactor is inside its summarizer) and three compactors
are killed inside their summarizer; each dead process is replaced, and a dead writer's last
unacknowledged append is retried by its replacement with the same key. Then every process is
killed and the log is checked: every acknowledged append is there, once and whole; no turn is
there twice; the projection is a valid history. The processes write what they do to log files
(``try`` before an append, ``ack`` after), which is how the test knows what was acknowledged.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ctxfold import Message, is_valid
from ctxfold.storage import open_store
from tests._stores import SHARED_KINDS, empty_store_url

pytestmark = pytest.mark.slow

WORKER = Path(__file__).with_name("_drill_worker.py")
SESSION = "drill"
WRITER_KILLS = 10
COMPACTOR_KILLS = 3
# Bounds on waiting for a worker to show progress; a drill that needs them has already failed.
PATIENCE = 60.0


@dataclass
class Worker:
    role: str
    name: str
    log: Path
    process: subprocess.Popen[bytes]

    def lines(self) -> list[str]:
        return self.log.read_text(encoding="utf-8").splitlines() if self.log.exists() else []


@dataclass
class Drill:
    url: str
    folder: Path
    rng: random.Random = field(default_factory=lambda: random.Random(2024))
    workers: list[Worker] = field(default_factory=list)
    dead: list[Worker] = field(default_factory=list)
    count: int = 0

    def start(self, role: str, retry: str | None = None) -> Worker:
        self.count += 1
        name = f"{role[0]}{self.count}"
        log = self.folder / f"{name}.log"
        args = [sys.executable, str(WORKER), role, self.url, SESSION, name, str(log)]
        process = subprocess.Popen(
            [*args, *([retry] if retry else [])],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        worker = Worker(role, name, log, process)
        self.workers.append(worker)
        return worker

    def live(self, role: str) -> list[Worker]:
        return [w for w in self.workers if w.role == role]

    def wait_for(self, worker: Worker, what: str, times: int) -> None:
        """Until `worker` has logged `times` lines starting with `what` since it started."""
        deadline = time.monotonic() + PATIENCE
        while sum(line.startswith(what) for line in worker.lines()) < times:
            if worker.process.poll() is not None:
                stderr = worker.process.stderr.read().decode() if worker.process.stderr else ""
                raise AssertionError(f"{worker.name} exited early: {stderr}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{worker.name} never logged {times} {what!r} lines")
            time.sleep(0.01)

    def summarizing(self) -> list[Worker]:
        """The compactors whose last logged line says they are inside their summarizer."""
        return [w for w in self.live("compactor") if (w.lines() or [""])[-1] == "summarizing"]

    def kill(self, worker: Worker) -> None:
        worker.process.send_signal(signal.SIGKILL)
        worker.process.wait(timeout=30)
        if worker.process.stderr is not None:
            worker.process.stderr.close()
        self.workers.remove(worker)
        self.dead.append(worker)

    def kill_writer(self, during_compaction: bool) -> bool:
        """Kill the oldest writer once it has a few acks; True when a compactor was summarizing."""
        victim = self.live("writer")[0]
        self.wait_for(victim, "ack", self.rng.randint(1, 4))
        if during_compaction:
            deadline = time.monotonic() + PATIENCE
            while not self.summarizing():
                assert time.monotonic() < deadline, "no compactor ever started summarizing"
                time.sleep(0.005)
        mid_compaction = bool(self.summarizing())
        self.kill(victim)
        self.start("writer", retry=unacknowledged(victim))
        return mid_compaction

    def kill_compactor(self) -> None:
        """Kill a compactor while it is inside its summarizer."""
        victim = self.live("compactor")[0]
        self.wait_for(victim, "summarizing", 1)
        deadline = time.monotonic() + PATIENCE
        while victim not in self.summarizing():
            assert time.monotonic() < deadline, f"{victim.name} never summarized again"
            time.sleep(0.005)
        self.kill(victim)
        self.start("compactor")

    def wait_for_a_compaction(self) -> None:
        """Until some compaction has landed in the log (the compactors run while writers write)."""
        deadline = time.monotonic() + PATIENCE
        with open_store(self.url) as store:
            while not any(e.type == "compaction" for e in store.stream(SESSION)):
                assert time.monotonic() < deadline, "no compaction ever landed"
                time.sleep(0.1)

    def everyone(self) -> list[Worker]:
        return self.dead + self.workers


def unacknowledged(worker: Worker) -> str | None:
    """The key a killed writer tried last without seeing its acknowledgement, if any."""
    lines = worker.lines()
    if lines and lines[-1].startswith("try "):
        return lines[-1].split()[1]
    return None


@pytest.fixture(params=SHARED_KINDS)
def drill_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from empty_store_url(request.param, request, tmp_path)


@pytest.mark.guarantee("crash-loses-no-acknowledged-append")
def test_killed_writers_and_compactors_lose_and_double_nothing(
    drill_url: str, tmp_path: Path
) -> None:
    """Ten writer kills (half mid-compaction) and three compactor kills on one session: every
    acknowledged append is in the log once and whole, nothing is doubled, seqs are contiguous,
    and the projection is a valid history."""
    with open_store(drill_url) as store:
        store.session(SESSION).append(
            [Message("system", "You read files."), Message("user", "Read every file.")]
        )
    drill = Drill(drill_url, tmp_path)
    try:
        for _ in range(4):
            drill.start("writer")
        for _ in range(2):
            drill.start("compactor")
        mid_compaction = 0
        for kill in range(WRITER_KILLS):
            mid_compaction += drill.kill_writer(during_compaction=kill % 2 == 0)
            if kill % 3 == 2:
                drill.kill_compactor()
        drill.wait_for_a_compaction()
        for worker in drill.live("writer"):
            drill.wait_for(worker, "ack", 1)
        for worker in drill.workers:
            assert worker.process.poll() is None, f"{worker.name} died on its own"
    finally:
        for worker in list(drill.workers):
            drill.kill(worker)

    with open_store(drill_url) as store:
        events = store.read(SESSION)
        messages = store.session(SESSION).messages()
    assert [e.seq for e in events] == list(range(1, len(events) + 1))

    # Each turn's four messages, by key, with their seqs.
    turns: dict[str, list[int]] = {}
    for event in events:
        if event.type == "message" and "extra" in event.data["message"]:
            turns.setdefault(event.data["message"]["extra"]["drill"], []).append(event.seq)
    acknowledged = {
        line.split()[1]: int(line.split()[2])
        for worker in drill.everyone()
        for line in worker.lines()
        if line.startswith("ack ")
    }
    tried = Counter(
        line.split()[1] for w in drill.everyone() for line in w.lines() if line.startswith("try ")
    )
    assert acknowledged, "no append was ever acknowledged"
    for key, first in acknowledged.items():
        assert turns.get(key) == [first, first + 1, first + 2, first + 3], key
    for key, seqs in turns.items():
        # Whole and once: four consecutive seqs, never eight; only keys a writer tried.
        assert seqs == list(range(seqs[0], seqs[0] + 4)), key
        assert key in tried
    assert is_valid(messages)

    kills = len(drill.dead)
    writers_killed = sum(w.role == "writer" for w in drill.dead)
    compactions = sum(e.type == "compaction" for e in events)
    retried = sum(count > 1 for count in tried.values())
    assert writers_killed >= WRITER_KILLS
    assert mid_compaction >= WRITER_KILLS // 2
    assert compactions >= 1
    print(
        f"\n{drill_url.split(':')[0]}: {kills} kills ({writers_killed} writers, "
        f"{mid_compaction} of them mid-compaction), {len(acknowledged)} acknowledged turns, "
        f"{retried} retried by key, {compactions} compactions, {len(events)} events"
    )
