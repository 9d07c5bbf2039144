"""Reading messages into a ledger: tool calls, their results, the task and stated decisions.

`build_ledger` reads ``(seq, message)`` pairs once, in order, and keeps nothing of a message but
what the ledger needs, so its cost is linear in the text it reads. Messages that say nothing the
ledger records (system prompts, plain replies) cost one look each.

>>> from ctxfold.messages import Message, ToolCall
>>> ledger = build_ledger([
...     (1, Message("user", "Fix the parser")),
...     (2, Message("assistant", None, (ToolCall("c1", "bash", '{"command": "rm a.py"}'),))),
...     (3, Message("tool", "<returncode>0</returncode>", tool_call_id="c1")),
... ])
>>> [(f.path, f.status) for f in ledger.files()], ledger.commands[0].result.exit_code
([('a.py', 'deleted')], 0)
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from ctxfold.errors import InvalidInputError
from ctxfold.messages import Message, ToolCall
from ctxfold.summarizers.ledger.commands import editor_ops, patch_ops, read_shell
from ctxfold.summarizers.ledger.prose import decisions_of
from ctxfold.summarizers.ledger.testruns import test_outcome
from ctxfold.summarizers.ledger.values import (
    EDIT_KEY,
    Command,
    CommandKind,
    Decision,
    FileOp,
    Ledger,
    OpKind,
    Result,
    Task,
    merge,
)
from ctxfold.summarizers.record import read_outcome

MAX_COMMAND_CHARS = 200
"""A command is shown by its first line, clipped to this many characters."""

SHELL_TOOLS = frozenset(
    {"bash", "shell", "sh", "zsh", "terminal", "run", "exec", "execute", "run_command",
     "execute_command", "run_shell_command", "shell_command", "execute_bash", "cmd", "local_shell",
     "run_terminal_cmd", "container.exec"}
)  # fmt: skip
"""Tool names whose ``command`` (or ``cmd``) argument is a shell command line."""

NOTE_TOOLS = frozenset({"think", "thinking", "scratchpad", "reasoning", "reflect"})
"""Tools that only record the agent's thinking: read for decisions, never listed as commands."""

_COMMAND_KEYS = ("command", "cmd", "script")
_FILE_KEYS = frozenset(
    {"path", "file", "filename", "file_name", "file_path", "filepath", "target_file",
     "target_path", "notebook_path", "absolute_path", "relative_path", "paths", "files",
     "file_paths"}
)  # fmt: skip
_MOVE_KEYS = {
    "source": "from", "src": "from", "old_path": "from", "from_path": "from",
    "destination": "to", "dest": "to", "dst": "to", "new_path": "to", "to_path": "to",
}  # fmt: skip
_NAME_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_EXTENSION = re.compile(r"\.\w{1,10}$")
_TIMED_OUT = re.compile(r"\btimed out\b|\btimeout expired\b", re.IGNORECASE)
_REJECTED = re.compile(r"^Your proposed edit has introduced new syntax error", re.MULTILINE)
_LINT_LINE = re.compile(r"^- (E\d{3} .+)$", re.MULTILINE)
_DEMONSTRATION = re.compile(r"^Here is a demonstration|--- DEMONSTRATION ---")
_DEMONSTRATION_WORDS = ("Here is a demonstration", "--- DEMONSTRATION ---")
"""One of these is in every match of `_DEMONSTRATION`: `in` rules most texts out at a fraction
of the regex engine's cost."""


def build_ledger(entries: Iterable[tuple[int, Message]]) -> Ledger:
    """The ledger of a stretch of the log: ``(seq, message)`` pairs in log order.

    Seqs must increase; anything else about the messages is taken as it comes (arguments that
    are not JSON, odd shell text, empty results): the ledger never refuses what an agent wrote.
    """
    builder = _Builder()
    for position, entry in enumerate(entries):
        try:
            seq, message = entry
        except (TypeError, ValueError):
            raise InvalidInputError(
                f"ledger entry {position}: expected a (seq, message) pair, got {entry!r}"
            ) from None
        builder.add(position, seq, message)
    return builder.ledger()


def extend_ledger(ledger: Ledger, entries: Iterable[tuple[int, Message]]) -> Ledger:
    """`ledger` followed by the ledger of `entries` (``(seq, message)`` pairs that come after
    it); only the new messages are read, so repeated extension costs O(new messages) of
    parsing."""
    return merge(ledger, build_ledger(entries))


class _Builder:
    def __init__(self) -> None:
        self.task: Task | None = None
        self.commands: list[Command] = []
        self.decisions: list[Decision] = []
        self.orphans: list[Result] = []
        self.waiting: dict[str, int] = {}
        self.open_file: str | None = None
        self.first_seq: int | None = None
        self.last_seq: int | None = None

    def add(self, position: int, seq: int, message: Message) -> None:
        if not isinstance(seq, int) or isinstance(seq, bool):
            raise InvalidInputError(f"ledger entry {position}: seq must be an integer, not {seq!r}")
        if not isinstance(message, Message):
            raise InvalidInputError(
                f"ledger entry {position} (seq {seq}): expected a Message, "
                f"got {type(message).__name__}"
            )
        if self.last_seq is not None and seq <= self.last_seq:
            raise InvalidInputError(
                f"ledger entry {position}: seq {seq} does not come after {self.last_seq}; "
                "give the messages in log order"
            )
        if self.first_seq is None:
            self.first_seq = seq
        self.last_seq = seq
        if message.role == "user":
            if self.task is None and is_request(message.text):
                self.task = Task(seq, message.text)
        elif message.role == "assistant":
            self.decisions += decisions_of(seq, message.text)
            for call in message.tool_calls:
                self._call(seq, call)
        elif message.role == "tool":
            result = read_result(seq, message)
            index = self.waiting.pop(result.call_id, None)
            if index is None:
                self.orphans.append(result)
            else:
                self.commands[index] = replace(self.commands[index], result=result)

    def _call(self, seq: int, call: ToolCall) -> None:
        command = read_call(seq, call)
        if command.kind == "note":
            for text in _strings(_arguments(call.arguments)):
                self.decisions += decisions_of(seq, text)
        if any(op.path is None or op.opens for op in command.ops):
            ops = []
            for op in command.ops:
                if op.path is None and self.open_file is not None:
                    op = replace(op, path=self.open_file)
                if op.opens:
                    self.open_file = op.path
                ops.append(op)
            command = replace(command, ops=tuple(ops))
        self.waiting[call.id] = len(self.commands)
        self.commands.append(command)

    def ledger(self) -> Ledger:
        return Ledger(
            task=self.task,
            commands=tuple(self.commands),
            decisions=tuple(self.decisions),
            orphans=tuple(self.orphans),
            first_seq=self.first_seq,
            last_seq=self.last_seq,
        )


def read_call(seq: int, call: ToolCall) -> Command:
    """One tool call as a ledger command: shell command lines are parsed, editor tools and
    path arguments give file operations, any other tool is listed by name and arguments."""
    arguments = _arguments(call.arguments)
    name = call.name
    lowered = name.lower()
    if lowered in NOTE_TOOLS:
        return _command(seq, call, "note", _gist(call), ())
    if isinstance(arguments, dict):
        editor = arguments.get("command")
        path = next((arguments[k] for k in ("path", "file_path", "file") if k in arguments), None)
        if isinstance(editor, str) and isinstance(path, str) and editor_ops(editor, path):
            ops = tuple(editor_ops(editor, path))
            command = _command(seq, call, "tool", _gist(call), ops)
            return command if ops[0].kind == "read" else replace(command, key=EDIT_KEY)
        line = next(
            (arguments[k] for k in _COMMAND_KEYS if isinstance(arguments.get(k), str)), None
        )
        if line is None and lowered in SHELL_TOOLS:
            array = arguments.get("command") or arguments.get("cmd")
            if isinstance(array, list) and all(isinstance(a, str) for a in array):
                line = _join_argv(array)
        if line is not None and (lowered in SHELL_TOOLS or len(arguments) <= 3):
            return _shell(seq, call, line)
        return _command(seq, call, "tool", _gist(call), tuple(_argument_ops(name, arguments)))
    if lowered in SHELL_TOOLS and call.arguments.strip():
        return _shell(seq, call, call.arguments)  # a harness that sends the bare command line
    return _command(seq, call, "tool", _gist(call), ())


def read_result(seq: int, message: Message) -> Result:
    """What a tool result shows: exit status, failure and test summary."""
    text = message.text
    outcome = read_outcome(text)
    error = outcome.error
    if error is None and _REJECTED.search(text):
        lint = _LINT_LINE.search(text)
        error = "edit rejected" + (f": {lint.group(1)}" if lint else "")
    if error is None and _TIMED_OUT.search(text[:400]):
        error = "timed out"
    return Result(message.tool_call_id or "", seq, outcome.exit_code, error, test_outcome(text))


def _shell(seq: int, call: ToolCall, line: str) -> Command:
    reading = read_shell(line)
    lines = line.strip().split("\n")
    first = lines[0].strip()
    swe_edit = [op.via for op in reading.ops] == ["edit"]
    return Command(
        seq=seq,
        call_id=call.id,
        tool=call.name,
        kind="shell",
        text=_clip(first),
        lines=len(lines),
        key=EDIT_KEY if swe_edit else _key(" ".join(line.split())),
        test=reading.test,
        ops=reading.ops,
        single=reading.single,
        no_match_exit=reading.no_match_exit,
    )


def _command(
    seq: int, call: ToolCall, kind: CommandKind, text: str, ops: tuple[FileOp, ...]
) -> Command:
    arguments = _arguments(call.arguments)
    canonical = (
        json.dumps(arguments, sort_keys=True, ensure_ascii=False)
        if arguments is not None
        else " ".join(call.arguments.split())
    )
    return Command(
        seq, call.id, call.name, kind, text, 1, _key(f"{call.name}({canonical})"), ops=ops
    )


def _argument_ops(name: str, arguments: dict[str, Any]) -> list[FileOp]:
    """File operations from the arguments of a tool that is not a shell: path-like values of
    file keys, and the files of a patch."""
    words = {w.lower() for w in _NAME_WORD.findall(name)}
    ops: list[FileOp] = []
    for value in arguments.values():
        if isinstance(value, str) and (
            "*** Begin Patch" in value or value.startswith(("--- ", "diff --git"))
        ):
            ops += patch_ops(value, name)
    moving = words & {"move", "rename", "mv", "copy", "cp"}
    for key, value in arguments.items():
        role = _MOVE_KEYS.get(key.lower()) if moving else None
        if role is None and key.lower() not in _FILE_KEYS:
            continue
        for path in _path_values(value):
            kind: OpKind | None
            if role == "from":
                kind = "read" if words & {"copy", "cp"} else "delete"
            elif role == "to":
                kind = "create"
            else:
                kind = _verb(words, path)
            if kind is not None:
                ops.append(FileOp(path, kind, name))
    return ops


def _verb(words: set[str], path: str) -> OpKind | None:
    if words & {"write", "create", "save", "new"}:
        return "create"
    if words & {"delete", "remove", "rm", "unlink"}:
        return "delete"
    if words & {"edit", "replace", "patch", "insert", "append", "update", "modify", "apply"}:
        return "modify"
    if words & {"list", "ls", "glob", "find", "search", "grep", "tree", "dir", "directory"}:
        # Searched or listed places are scopes, not files read, unless they name one file.
        return "read" if _EXTENSION.search(path) else None
    return "read"


def _path_values(value: Any) -> list[str]:
    values = value if isinstance(value, list) else [value]
    out = []
    for item in values:
        if (
            isinstance(item, str)
            and 0 < len(item) <= 500
            and not any(c.isspace() for c in item.strip())
            and "://" not in item
        ):
            stripped = item.strip()
            out.append(stripped[2:] if stripped.startswith("./") else stripped)
    return out


def _arguments(text: str) -> Any:
    try:
        return json.loads(text) if text.strip() else {}
    except ValueError:
        return None


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _join_argv(argv: list[str]) -> str:
    # ["bash", "-lc", "sed -i ... f"]: the script is what runs.
    shell = argv[0].split("/")[-1] in ("bash", "sh", "zsh")
    if len(argv) >= 3 and shell and argv[1] in ("-c", "-lc"):
        return argv[2]
    return " ".join(argv)


def _gist(call: ToolCall) -> str:
    """``name(key="value", ...)`` on one line, clipped as a whole."""
    arguments = _arguments(call.arguments)
    if isinstance(arguments, dict):
        inner = ", ".join(
            f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in arguments.items()
        )
    else:
        inner = call.arguments
    return _clip(" ".join(f"{call.name}({inner})".split()))


def _clip(text: str) -> str:
    return text if len(text) <= MAX_COMMAND_CHARS else text[: MAX_COMMAND_CHARS - 1] + "…"


def _key(text: str) -> str:
    # Long commands (heredoc scripts) are keyed by a digest: equal text, equal key.
    if len(text) <= 300:
        return text
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _is_demonstration(text: str) -> bool:
    return any(word in text for word in _DEMONSTRATION_WORDS) and bool(_DEMONSTRATION.search(text))


def is_request(text: str) -> bool:
    """Whether a user message's `text` is a real request: not empty, not a note ctxfold wrote,
    and not a harness's demonstration of how to use its interface."""
    stripped = text.strip()
    return (
        bool(stripped)
        and not stripped.startswith("[ctxfold:")
        and not _is_demonstration(stripped[:4000])
    )
