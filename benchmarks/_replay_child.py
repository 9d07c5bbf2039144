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
``{"error"}``) back and exits; its memos die with it. A request ``{"name", "tiktoken": true}``
times, the same way, the first tiktoken pass over that transcript (`_first_pass`), the baseline
the replay is set against; a request ``{"name", "floor": [[position, seq], ...], "ladder"}``
the reading floor of that replay (`_floor`, `bench_replay.reading_floor`). The answers go to
stdout, one JSON line each, after a first ``{"ready": true}``.

A forked child shares its parent's memory page by page until it writes to a page; reading a Python
object writes its reference count, so the child's first touch of each page the replay uses copies
that page, a cost no process of its own pays (in one run, 60 ms became 45 ms over the seven shared
transcripts with no compaction when the child stopped paying it). Before its clock starts the child
therefore repeats the generated warm-up (which finds its work remembered: it only touches the code
and the structures a replay uses) and reads its transcript again from disk, as a ``ctxfold replay``
process reads it into memory of its own.
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
        if request.get("tiktoken"):
            _send(_in_a_fork(lambda r=request: _first_pass(r["name"], found, warm_up, counter)))
            continue
        if "floor" in request:
            _send(_in_a_fork(lambda r=request: _floor(r, found, warm_up, counter)))
            continue

        def replay(r: dict[str, Any] = request) -> Any:
            replay_plain(warm_up, 4_000, r["ladder"], counter)  # the pages, not the work
            messages = _read_again(r["name"], found)
            result, seconds = replay_plain(messages, r["window"], r["ladder"], counter)
            return {"ms": seconds * 1_000, "compactions": len(result.compactions)}

        _send(_in_a_fork(replay))
    return 0


def _first_pass(name: str, found: dict[str, Any], warm_up: Any, counter: Any) -> Any:
    """``{"ms"}`` of the first tiktoken pass over transcript `name` in this (forked) process,
    after what a timed replay does before its clock: the warm-up replay, and the transcript read
    again from disk; and, as the replay's tokenizer has counted the warm-up's text, two passes of
    the encoder over that text. A first pass in a fork costs more than a repeated one (in one
    run, 48 ms against 37 over the seven transcripts), and the replay pays that too."""
    from benchmarks.bench_replay import replay_plain, tiktoken_pass

    replay_plain(warm_up, 4_000, "default", counter)
    tiktoken_pass(warm_up, counter)
    tiktoken_pass(warm_up, counter)
    messages = _read_again(name, found)
    return {"ms": tiktoken_pass(messages, counter) * 1_000}


def _floor(request: dict[str, Any], found: dict[str, Any], warm_up: Any, counter: Any) -> Any:
    """``{"seconds"}``, each part of `reading_floor` over transcript ``request["name"]`` in
    this (forked) process, after what a timed replay with ``request["ladder"]`` does before its
    clock."""
    from benchmarks.bench_replay import reading_floor, replay_plain

    replay_plain(warm_up, 4_000, request["ladder"], counter)
    messages = _read_again(request["name"], found)
    read_once = [(position, seq) for position, seq in request["floor"]]
    return {"seconds": reading_floor(messages, read_once, counter)}


def _read_again(name: str, found: dict[str, Any]) -> Any:
    """The transcript `name` read from disk into this process's own memory; a generated stand-in
    (no transcripts here) as the parent made it."""
    from benchmarks import TRANSCRIPTS
    from ctxfold.messages.jsonl import read_jsonl

    path = TRANSCRIPTS / f"{name}.jsonl"
    return read_jsonl(path) if path.is_file() else found[name]


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
