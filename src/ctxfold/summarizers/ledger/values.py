"""The ledger's values: what was asked, run, touched, decided; how two ledgers merge.

A `Ledger` stores only what the log said, in log order: the task, every tool call with its result
(`Command`), and the agent's stated decisions. Files, errors and test outcomes are derived from
the commands when asked for (`files()`, `errors()`, `tests()`), so merging two ledgers is
concatenation plus two small fix-ups at the seam (a result whose call is in the first ledger, an
editor ``edit`` of the file the first ledger opened). That is what makes `merge` associative and
the ledger of a whole log equal to the merge of the ledgers of its parts. Files and errors are
folds over the commands: a ledger merged onto one that worked them out (`Ledger.folded`) folds on
from there, so the ledger a view renders at each compaction, the summary's ledger and a few
messages, costs those messages rather than the whole session again.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, TypeAlias, cast

from ctxfold.errors import InvalidInputError

if TYPE_CHECKING:
    pass

OpKind = Literal["read", "create", "modify", "delete"]
CommandKind = Literal["shell", "tool", "note"]
DecisionKind = Literal["decision", "plan"]
FileStatus = Literal["read", "created", "modified", "deleted", "created and deleted"]

EDIT_KEY = "edit a file"
"""The `Command.key` of an editor edit: its errors are keyed by the file it edits (known only
once an SWE-agent ``edit`` is bound to the file last opened), so that a later successful edit of
the same file resolves a rejected one."""


@dataclass(frozen=True)
class FileOp:
    """One thing a call does to one file.

    - `path`: as the agent wrote it, normalized (``./a//b.py`` is ``a/b.py``); None for an
      SWE-agent ``edit``, which applies to the file last opened, until that file is known;
    - `kind`: read, create (written whole), modify (changed in place) or delete;
    - `via`: what did it (``"sed -i"``, ``">"``, ``"rm"``, ``"editor str_replace"``);
    - `opens`: it makes `path` the file that a later ``edit`` changes.
    """

    path: str | None
    kind: OpKind
    via: str
    opens: bool = False


@dataclass(frozen=True)
class Result:
    """What the tool result of a call showed.

    - `call_id`, `seq`: the call it answers and the log item that holds it;
    - `exit_code`: as the output reports it (``<returncode>1</returncode>``, ``exit code 1``),
      None when it says nothing;
    - `error`: why the call looks failed (``"exit 1: TypeError: ..."``), None when it does not;
    - `tests`: a test summary found in the output (``"3 failed, 42 passed"``, ``"OK"``).
    """

    call_id: str
    seq: int
    exit_code: int | None = None
    error: str | None = None
    tests: str | None = None


@dataclass(frozen=True)
class Command:
    """One tool call and, once it came, its result.

    - `seq`: the log item of the assistant message that made the call;
    - `kind`: ``"shell"`` (a command line), ``"tool"`` (any other tool) or ``"note"`` (a
      think/scratchpad tool, kept for the seam but never listed);
    - `text`: one line to show: the command's first line, or ``name(key="value")``;
    - `lines`: how many lines the full command has (heredoc bodies included);
    - `key`: equal for two runs of the same command, so a later success resolves an error;
    - `test`: the test target key when the call runs tests (``"pytest tests/test_x.py"``);
    - `ops`: its file operations, in order;
    - `single`: one simple command, so a failed result means its file operations did not happen;
    - `no_match_exit`: exit status 1 means "nothing found" (grep, diff), not a failure.
    """

    seq: int
    call_id: str
    tool: str
    kind: CommandKind
    text: str
    lines: int
    key: str
    test: str | None = None
    ops: tuple[FileOp, ...] = ()
    single: bool = True
    no_match_exit: bool = False
    result: Result | None = None

    @property
    def failed(self) -> bool:
        """The result shows a failure (a grep that found nothing is not one)."""
        result = self.result
        if result is None or result.error is None:
            return False
        return not (self.no_match_exit and result.error == "exit 1")

    @property
    def applied(self) -> bool:
        """Its file operations count: it has not failed as a single command. A call still
        waiting for its result counts, since the agent asked for it."""
        return not (self.single and self.failed)


@dataclass(frozen=True)
class Decision:
    """A sentence of the agent's own prose that states a decision or a plan step, verbatim."""

    seq: int
    kind: DecisionKind
    text: str
    clipped: bool = False


@dataclass(frozen=True)
class Task:
    """The first real user request, verbatim, and the log item that holds it."""

    seq: int
    text: str


@dataclass(frozen=True)
class FileEntry:
    """A file the work touched, with its net status over the ledger.

    Its status comes from two facts: whether the file existed before the first operation
    (a read, an in-place edit or a delete says it did; a whole write says it did not) and whether
    it exists after the last write. So created then modified is created, modified then deleted is
    deleted, deleted then written again is modified, and created then deleted says so.
    """

    path: str
    existed: bool
    exists: bool | None  # None: only read
    seqs: tuple[int, ...]
    writes: int
    via: str  # how it was last written (or read, when never written)

    @property
    def status(self) -> FileStatus:
        if self.exists is None:
            return "read"
        if self.exists:
            return "modified" if self.existed else "created"
        return "deleted" if self.existed else "created and deleted"


@dataclass(frozen=True)
class ErrorEntry:
    """The last failure of one command (or one test target), and whether a later run passed.

    `resolved_seq` is the log item of the later successful run, None while the error is open.
    """

    key: str
    command: Command
    resolved_seq: int | None

    @property
    def open(self) -> bool:
        return self.resolved_seq is None


@dataclass(frozen=True)
class Ledger:
    """The state of the work, derived deterministically from a stretch of the log.

    Build one with `build_ledger`, extend it with `extend_ledger`, combine two with `merge`, show it
    with `render`. Equal logs give equal ledgers; a ledger of a whole log equals the merge of the
    ledgers of its consecutive parts.

    - `task`: the first real user request in the stretch;
    - `commands`: every tool call, in log order, with its result once it came;
    - `decisions`: the agent's stated decisions and plan steps, in log order;
    - `orphans`: results whose call is before the stretch (matched when merged after it);
    - `first_seq`, `last_seq`: the stretch of log items read (None when empty).
    """

    task: Task | None = None
    commands: tuple[Command, ...] = ()
    decisions: tuple[Decision, ...] = ()
    orphans: tuple[Result, ...] = ()
    first_seq: int | None = None
    last_seq: int | None = None
    _derived: dict[str, object] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    def files(self) -> tuple[FileEntry, ...]:
        """Every file touched, by first appearance; see `FileEntry` for the status rule."""
        if "files" not in self._derived:
            self._derived["files"] = tuple(self._file_state().values())
        return cast("tuple[FileEntry, ...]", self._derived["files"])

    def errors(self) -> tuple[ErrorEntry, ...]:
        """For each command or test target that ever failed: its last failure and whether a
        later run succeeded; in the order of their last failure."""
        if "errors" not in self._derived:
            failed, passed = self._error_state()
            self._derived["errors"] = tuple(_error_entries(failed, passed))
        return cast("tuple[ErrorEntry, ...]", self._derived["errors"])

    def folded(self) -> Ledger:
        """This ledger, its files and errors worked out now: a ledger that others are merged
        onto (a summary's) is worked out once, and every ledger merged from it folds on from
        it, a few commands at a time, instead of all of them again."""
        self._file_state()
        self._error_state()
        return self

    def _file_state(self) -> _FileState:
        """Path -> its entry so far, by first appearance: `files()` before it is a tuple, and
        what a ledger merged after this one folds on from (see `merge`)."""
        state = cast("_FileState | None", self._derived.get("file_state"))
        if state is None:
            base = cast("tuple[int, _FileState] | None", self._derived.pop("file_base", None))
            if base is None:
                state = _fold_files({}, self.commands)
            else:
                state = _fold_files(dict(base[1]), self.commands[base[0] :])
            self._derived["file_state"] = state
        return state

    def _error_state(self) -> _ErrorState:
        """The last failure of each error key and the last success of each, as `errors()`
        folds them: what a ledger merged after this one folds on from (see `merge`)."""
        state = cast("_ErrorState | None", self._derived.get("error_state"))
        if state is None:
            base = cast("tuple[int, _ErrorState] | None", self._derived.pop("error_base", None))
            if base is None:
                state = _fold_errors({}, {}, self.commands)
            else:
                failed, passed = base[1]
                state = _fold_errors(dict(failed), dict(passed), self.commands[base[0] :])
            self._derived["error_state"] = state
        return state

    def tests(self) -> tuple[Command, ...]:
        """Every test run with a result, in log order."""
        return tuple(c for c in self.commands if c.test is not None and c.result is not None)

    def open_file(self) -> str | None:
        """The file an SWE-agent ``edit`` after this stretch would change, if the stretch says."""
        if "open" not in self._derived:
            self._derived["open"] = _open_file(self.commands)
        return cast("str | None", self._derived["open"])

    def without_task(self) -> Ledger:
        """This ledger with no task; what it derives from its commands stays worked out."""
        out = replace(self, task=None)
        out._derived.update(self._derived)
        return out

    def _file_fold(self) -> tuple[int, _FileState] | None:
        """How many of its commands a file fold took in, and its state: worked out, or the
        one it is to fold on from; None when neither is known."""
        state = cast("_FileState | None", self._derived.get("file_state"))
        if state is not None:
            return len(self.commands), state
        return cast("tuple[int, _FileState] | None", self._derived.get("file_base"))

    def _error_fold(self) -> tuple[int, _ErrorState] | None:
        """As `_file_fold`, for the errors."""
        state = cast("_ErrorState | None", self._derived.get("error_state"))
        if state is not None:
            return len(self.commands), state
        return cast("tuple[int, _ErrorState] | None", self._derived.get("error_base"))

    def _waiting(self) -> dict[str, int]:
        """Call id -> index of the latest command with that id, if it still waits for its
        result (a later call reusing an id hides an earlier one, as it does while building).
        Shared: a caller copies it before changing it."""
        if "waiting" not in self._derived:
            self._derived["waiting"] = _waiting(self.commands)
        return cast("dict[str, int]", self._derived["waiting"])


def merge(first: Ledger, second: Ledger) -> Ledger:
    """One ledger for two consecutive stretches: `second` must start after `first` ends.

    Commands and decisions are appended; the task is the first one's when it has one; a result in
    `second` answers its call in `first`; an ``edit`` in `second` before any ``open`` applies to
    the file `first` left open. Files, errors and tests follow from that: the latest status of a
    file wins by the rule of `FileEntry`, and an error of `first` is resolved by a later success
    in `second`. Associative and deterministic.
    """
    if first.first_seq is None:
        return second
    if second.first_seq is None:
        return first
    if first.last_seq is not None and second.first_seq <= first.last_seq:
        raise InvalidInputError(
            f"cannot merge ledgers out of order: the second starts at log item "
            f"{second.first_seq}, at or before item {first.last_seq} where the first ends"
        )
    if not first.commands:
        return _onto_no_commands(first, second)
    commands = list(first.commands)
    waiting = dict(first._waiting())
    orphans = list(first.orphans)
    answered = len(commands)  # the first of `first`'s commands a result of `second` changes
    # A result of `second` answers a waiting call of `first` only if no call of `second` with
    # its id came before it: that call hides the older one, as it does while building (a
    # result for an id reused and answered already stays an orphan).
    called: dict[str, int] = {}
    if second.orphans:
        for command in second.commands:
            called.setdefault(command.call_id, command.seq)
    for result in second.orphans:
        hidden = called.get(result.call_id)
        index = (
            None
            if hidden is not None and hidden < result.seq
            else waiting.pop(result.call_id, None)
        )
        if index is None:
            orphans.append(result)
        else:
            commands[index] = replace(commands[index], result=result)
            answered = min(answered, index)
    opened = first.open_file()
    for command in _bind_edits(second.commands, opened):
        # The later call with an id decides whether that id waits, as in `_waiting`.
        if command.result is None:
            waiting[command.call_id] = len(commands)
        else:
            waiting.pop(command.call_id, None)
        commands.append(command)
    merged = Ledger(
        task=first.task or second.task,
        commands=tuple(commands),
        decisions=first.decisions + second.decisions,
        orphans=tuple(orphans),
        first_seq=first.first_seq,
        last_seq=second.last_seq,
    )
    # Worked out from the parts, so that merging a long ledger with a short one costs the
    # short one's length (plus copying references), not a walk of the long one: a view's
    # ledger is merged item by item at every compaction. The bound edits open nothing.
    second_opened = second.open_file()
    merged._derived["waiting"] = waiting
    merged._derived["open"] = second_opened if second_opened is not None else opened
    # Files and errors are folded on from what `first` folded (or was to fold on from), so
    # that a view's ledger, the summary's before it and a few messages, costs those messages:
    # only when no result of `second` changed a command that fold took in. Left until asked.
    for name, fold in (("file", first._file_fold), ("error", first._error_fold)):
        base = fold()
        if base is not None and base[0] <= answered:
            merged._derived[f"{name}_base"] = base
    return merged


def _onto_no_commands(first: Ledger, second: Ledger) -> Ledger:
    """`merge(first, second)` for a `first` that holds no command (the task before a summary):
    no call waits for a result of `second` and no edit is bound, so the commands are
    `second`'s as they are, and so is what is worked out from them; no walk of them."""
    merged = Ledger(
        task=first.task or second.task,
        commands=second.commands,
        decisions=first.decisions + second.decisions,
        orphans=first.orphans + second.orphans,
        first_seq=first.first_seq,
        last_seq=second.last_seq,
    )
    derived = merged._derived
    derived["waiting"] = second._waiting()  # shared, as every ledger's: copied to be changed
    derived["open"] = second.open_file()
    for name, fold in (("file", second._file_fold), ("error", second._error_fold)):
        base = fold()
        if base is not None:
            derived[f"{name}_base"] = base
    return merged


def _waiting(commands: tuple[Command, ...]) -> dict[str, int]:
    latest: dict[str, int] = {}
    for index, command in enumerate(commands):
        latest[command.call_id] = index
    return {cid: i for cid, i in latest.items() if commands[i].result is None}


def _open_file(commands: tuple[Command, ...]) -> str | None:
    for command in reversed(commands):
        for op in reversed(command.ops):
            if op.opens and op.path is not None:
                return op.path
    return None


def _bind_edits(commands: tuple[Command, ...], open_file: str | None) -> Iterator[Command]:
    if open_file is None:
        yield from commands
        return
    bound = False
    for command in commands:
        if bound or not any(op.path is None or op.opens for op in command.ops):
            yield command
            continue
        ops = []
        for op in command.ops:
            bound = bound or op.opens
            ops.append(replace(op, path=open_file) if op.path is None and not bound else op)
        yield replace(command, ops=tuple(ops))


def _fold_files(state: _FileState, commands: tuple[Command, ...]) -> _FileState:
    """`state` (path -> entry so far, by first appearance; changed in place) with `commands`
    folded in: every file they touch, the status rule of `FileEntry`. From ``{}`` it is the
    whole fold of a ledger; from a copy of another ledger's state, the fold on from it (see
    `merge`), costing the commands since: entries are immutable, so one they do not touch is
    shared with the state folded on from."""
    # Mutable while folding, so that a file touched k times costs O(k), not O(k²).
    touched: dict[str, tuple[bool, list[bool | None], list[int], list[int], list[str]]] = {}
    for command in commands:
        if not command.applied:
            continue
        for op in command.ops:
            if op.path is None:
                continue
            entry = touched.get(op.path)
            if entry is None:
                before = state.get(op.path)
                if before is None:
                    # Whether it existed before the first operation: only a whole write says no.
                    entry = (op.kind != "create", [None], [], [0], [op.via])
                else:
                    entry = (
                        before.existed,
                        [before.exists],
                        list(before.seqs),
                        [before.writes],
                        [before.via],
                    )
                touched[op.path] = entry
            _existed, exists, seqs, writes, via = entry
            if not seqs or seqs[-1] != command.seq:
                seqs.append(command.seq)
            if op.kind != "read":
                exists[0] = op.kind != "delete"
                writes[0] += 1
                via[0] = op.via
    for path, (existed, exists, seqs, writes, via) in touched.items():
        state[path] = FileEntry(path, existed, exists[0], tuple(seqs), writes[0], via[0])
    return state


def _error_key(command: Command) -> str:
    if command.test is not None:
        return f"test: {command.test}"
    if command.key == EDIT_KEY and command.ops and command.ops[0].path is not None:
        return f"edit {command.ops[0].path}"
    return command.key


def _fold_errors(
    failed: dict[str, Command], passed: dict[str, int], commands: tuple[Command, ...]
) -> _ErrorState:
    """`failed` and `passed` (copies, changed in place) with `commands` folded in: the last
    failure of each key, in the order of their last failure, and the last success of each."""
    for command in commands:
        if command.result is None or command.kind == "note":
            continue
        key = _error_key(command)
        if command.failed:
            failed.pop(key, None)  # re-inserted: the order is that of the last failure
            failed[key] = command
        else:
            passed[key] = max(passed.get(key, 0), command.result.seq)
    return failed, passed


def _error_entries(failed: dict[str, Command], passed: dict[str, int]) -> Iterator[ErrorEntry]:
    for key, command in failed.items():
        seq = command.result.seq if command.result else command.seq
        ok = passed.get(key)
        yield ErrorEntry(key, command, ok if ok is not None and ok > seq else None)


_FileState: TypeAlias = "dict[str, FileEntry]"
_ErrorState: TypeAlias = "tuple[dict[str, Command], dict[str, int]]"
