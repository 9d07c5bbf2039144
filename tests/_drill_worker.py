"""A process for tests/test_drills.py to kill: a writer or a compactor on one shared session.

    python tests/_drill_worker.py writer URL SESSION NAME LOG [RETRY_KEY]
    python tests/_drill_worker.py compactor URL SESSION NAME LOG

Every line goes to LOG, one write per line, before and after the action it reports:

- writer: ``try KEY`` before an append, ``ack KEY SEQ`` once it returned (SEQ: its first seq).
  With RETRY_KEY, it first sends again the append a killed writer tried under that key.
- compactor: ``summarizing`` when its summarizer starts (it then sleeps), then ``landed`` or
  ``declined`` when the compaction is over.
"""

from __future__ import annotations

import sys
import time

from ctxfold import Budget, Compactor, ConflictError, Message, ToolCall
from ctxfold.events import NewEvent
from ctxfold.storage import open_store


def batch(key: str) -> list[NewEvent]:
    """The four messages of one writer turn; the same key always gives the same messages."""
    call = ToolCall(f"call-{key}", "read_file", f'{{"path": "src/{key}.py"}}')
    messages = [
        Message("user", f"[{key}] look at src/{key}.py", extra={"drill": key}),
        Message("assistant", None, (call,), extra={"drill": key}),
        Message(
            "tool", f"[{key}] contents of src/{key}.py", tool_call_id=call.id, extra={"drill": key}
        ),
        Message("assistant", f"[{key}] read it", extra={"drill": key}),
    ]
    return [NewEvent.message(m) for m in messages]


def write(url: str, session_id: str, name: str, log: object, retry: str | None) -> None:
    with open_store(url) as store:
        keys = [retry] if retry else []
        n = 0
        while True:
            key = keys.pop() if keys else f"{name}-{n}"
            if key.startswith(f"{name}-"):
                n += 1
            print(f"try {key}", file=log, flush=True)
            events = store.append(session_id, batch(key), idempotency_key=key)
            print(f"ack {key} {events[0].seq}", file=log, flush=True)
            # An agent's turns are seconds apart (the model is thinking); a short pause keeps the
            # drill's pace busy but not a lock-step race no compactor could ever land in.
            time.sleep(0.02)


def compact(url: str, session_id: str, log: object) -> None:
    def summarize(request: object) -> str:
        print("summarizing", file=log, flush=True)
        time.sleep(0.3)
        return "## Objective\n- drill\n## Work done\n- read files"

    # Every batch opens a turn with a short user message: unprotected, whole turns summarize.
    compactor = Compactor(Budget(window=4000, keep_user_tokens=0), summarizer=summarize)
    with open_store(url) as store:
        session = store.session(session_id)
        while True:
            try:
                report = compactor.compact(session, target=600)
            except ConflictError:
                report = None
            # For the log only: whether it landed, and why not (the report's shape may vary).
            landed = getattr(report, "landed", report is not None)
            last = report or getattr(compactor, "last_report", None)
            reason = f" {getattr(last, 'error', None) or ''}".rstrip()
            print(("landed" if landed else "declined") + reason, file=log, flush=True)
            if not landed:
                time.sleep(0.05)  # nothing to do yet: let the writers add some history


def main(role: str, url: str, session_id: str, name: str, path: str, *rest: str) -> None:
    with open(path, "a", buffering=1, encoding="utf-8") as log:
        if role == "writer":
            write(url, session_id, name, log, rest[0] if rest else None)
        else:
            compact(url, session_id, log)


if __name__ == "__main__":
    main(*sys.argv[1:])
