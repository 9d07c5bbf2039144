"""The work ledger: a deterministic record of the state of the work, derived from the log.

A summary written by a model can forget which files were changed or which test still fails; the
ledger cannot, because it is not written, it is read off the log: the task (the first real user
request), the files read, created, modified and deleted (from tool-call arguments and the edit
forms of shell commands), the commands run with their exit status, the last error of each failing
command and whether a later run fixed it, the test runs and their outcome, and the agent's own
stated decisions. Every entry keeps the log items it came from.

- `build_ledger(entries)`: the ledger of ``(seq, message)`` pairs; `extend_ledger` adds more.
- `merge(first, second)`: one ledger for two consecutive stretches; associative.
- `render(ledger, max_tokens)`: a ``## Work ledger`` section within a token budget.
- `to_data(ledger)` / `from_data(data)`: JSON-ready data for event payloads.

Pure: no I/O, no clock, no randomness; equal inputs give equal ledgers and equal text.

>>> from ctxfold.messages import Message, ToolCall
>>> ledger = build_ledger([
...     (1, Message("user", "Make the parser accept bytes.")),
...     (2, Message("assistant", "The fix is to decode first.",
...                 (ToolCall("c1", "bash", '{"command": "sed -i s/a/b/ parser.py"}'),))),
...     (3, Message("tool", "<returncode>0</returncode>", tool_call_id="c1")),
... ])
>>> print(render(ledger, 120))
## Work ledger (log 1–3; `quoted` values are data)
### Task (log 1)
```text
Make the parser accept bytes.
```
### Files changed
- modified `parser.py`: 1 write, last by sed -i (log 2)
### Commands (1 run)
- log 2: `sed -i s/a/b/ parser.py` → exit 0
### Decisions
- log 2 (decision): The fix is to decode first.
"""

from ctxfold.summarizers.ledger.build import build_ledger, extend_ledger
from ctxfold.summarizers.ledger.data import from_data, to_data
from ctxfold.summarizers.ledger.render import render
from ctxfold.summarizers.ledger.values import (
    Command,
    Decision,
    ErrorEntry,
    FileEntry,
    FileOp,
    Ledger,
    Result,
    Task,
    merge,
)

__all__ = [
    "Command",
    "Decision",
    "ErrorEntry",
    "FileEntry",
    "FileOp",
    "Ledger",
    "Result",
    "Task",
    "build_ledger",
    "extend_ledger",
    "from_data",
    "merge",
    "render",
    "to_data",
]
