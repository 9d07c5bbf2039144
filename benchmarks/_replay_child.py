"""Timed replays that start cold: ``python -m benchmarks._replay_child [--quick]``.

ctxfold remembers work by content across a process (identifier scans, redaction, ledger lines,
record framing), so a second replay of one transcript in one process finds much of the first's
work done. The replay benchmark's own process has replayed every row once, checked, before it
times anything, so timing there would measure a replay whose work was already done: about half
the cost of a first replay at 16,000 tokens. An agent pays the first replay's cost.

This process is the clean start. It imports ctxfold, builds the counter (loading the tokenizer),
reads the transcripts, and replays only a small generated session, once per ladder: that pays
for what a process does once (modules imported on first use, the tokenizer's first calls) and
remembers nothing of the transcripts. For each request it reads, one JSON object per line
on stdin (``{"name", "window", "ladder"}``), it forks: the child replays once, as a new
``ctxfold replay`` process would once its imports are done, writes ``{"ms", "compactions"}`` (or
``{"error"}``) back and exits; its memos die with it. The answers go to stdout, one JSON line
each, after a first ``{"ready": true}``.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any


def main(argv: list[str]) -> int:
    from benchmarks.bench_replay import replay_plain, sources
    from ctxfold.testing.transcripts import generate
    from ctxfold.tokens import counter as make_counter

    counter = make_counter("auto")
    warm_up = generate(seed=5, steps=30)
    for ladder in ("default", "reference"):
        replay_plain(warm_up, 4_000, ladder, counter)
    found = dict(sources("--quick" in argv)[0])
    _send({"ready": True})
    for line in sys.stdin:
        request: dict[str, Any] = json.loads(line)
        _send(_in_a_fork(lambda r=request: _replay(found, r, counter, replay_plain)))
    return 0


def _replay(found: dict[str, Any], request: dict[str, Any], counter: Any, replay: Any) -> Any:
    result, seconds = replay(found[request["name"]], request["window"], request["ladder"], counter)
    return {"ms": seconds * 1_000, "compactions": len(result.compactions)}


def _in_a_fork(work: Any) -> Any:
    """``work()`` in a child forked from this process; its JSON answer, or ``{"error"}``."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer, then leave without running this process's exit hooks
        os.close(read)
        try:
            answer = work()
        except BaseException:  # the parent reports it; a child must never go back up the stack
            answer = {"error": traceback.format_exc()}
        with os.fdopen(write, "w", encoding="utf-8") as pipe:
            json.dump(answer, pipe)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, encoding="utf-8") as pipe:
        text = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(text) if text else {"error": "the replay's child died without an answer"}


def _send(answer: Any) -> None:
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
