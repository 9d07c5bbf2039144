"""One cold start, in a process of its own: ``python -m benchmarks._coldstart_child SIDE MODE
PATH SESSION_ID`` prints one JSON object.

SIDE is ``ctxfold`` (open a `SQLiteStore`, `Session.messages()`, then the first
`Compactor.should_compact` and `Compactor.estimate`) or ``agents`` (open `agents.SQLiteSession`
and `await get_items()`). MODE is ``time`` (wall time, and how far the resident set grew) or
``memory`` (tracemalloc's peak; tracing slows allocation down, so it never shares a process with a
timing). Imports and building the token counter come first and are timed apart: an application
pays them once at start-up whatever it then loads.
"""

from __future__ import annotations

import json
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

MODEL = "gpt-4o"


def _status_kib(field: str) -> int | None:
    """A ``VmRSS``/``VmHWM`` figure of /proc/self/status in KiB, None where there is none."""
    try:
        with open("/proc/self/status", encoding="utf-8") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    """Reset the resident-set high-water mark to the current size (Linux 4.0+)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="utf-8") as refs:
            refs.write("5")
    except OSError:
        return False
    return True


def _ctxfold(path: str, session_id: str) -> Callable[[dict[str, Any]], object]:
    from ctxfold.compactor import Compactor
    from ctxfold.storage import SQLiteStore
    from ctxfold.tokens import Budget, counter

    count = counter("auto")
    compactor = Compactor(Budget.for_model(MODEL), counter=count)

    def load(out: dict[str, Any]) -> object:
        started = time.perf_counter()
        store = SQLiteStore(path)
        session = store.session(session_id, counter=count)
        messages = session.messages()
        out["messages_ms"] = (time.perf_counter() - started) * 1_000
        out["should_compact"] = compactor.should_compact(session)
        out["estimate"] = compactor.estimate(session)
        out["items"] = len(messages)
        out["counter"] = count.name
        return store, session, messages

    return load


def _agents(path: str, session_id: str) -> Callable[[dict[str, Any]], object]:
    import asyncio

    from agents import SQLiteSession

    loop = asyncio.new_event_loop()

    def load(out: dict[str, Any]) -> object:
        session = SQLiteSession(session_id, path)
        items = loop.run_until_complete(session.get_items())
        out["items"] = len(items)
        return session, items

    return load


def main(argv: list[str]) -> int:
    side, mode, path, session_id = argv
    out: dict[str, Any] = {"side": side, "mode": mode}
    started = time.perf_counter()
    load = _ctxfold(path, session_id) if side == "ctxfold" else _agents(path, session_id)
    out["imports_ms"] = (time.perf_counter() - started) * 1_000
    if mode == "memory":
        tracemalloc.start()
    rss_before = _status_kib("VmRSS")
    out["peak_reset"] = _reset_peak()
    started = time.perf_counter()
    kept = load(out)
    out["load_ms"] = (time.perf_counter() - started) * 1_000
    if mode == "memory":
        out["traced_peak_bytes"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    peak = _status_kib("VmHWM")
    if rss_before is not None and peak is not None and out["peak_reset"]:
        out["rss_growth_bytes"] = max(0, peak - rss_before) * 1024
    del kept
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
