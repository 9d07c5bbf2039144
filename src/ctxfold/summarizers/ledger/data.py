"""A ledger as JSON-ready data and back, for event payloads.

`to_data` writes plain dicts, lists, strings, integers and booleans (defaults left out);
`from_data` reads them back into an equal `Ledger`, and names the exact place of anything it
cannot read (``"commands[3].ops[0].kind: expected one of read, create, modify, delete"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, get_args

from ctxfold.errors import InvalidInputError
from ctxfold.summarizers.ledger.values import (
    Command,
    CommandKind,
    Decision,
    DecisionKind,
    FileOp,
    Ledger,
    OpKind,
    Result,
    Task,
)

VERSION = 1
"""The shape `to_data` writes; `from_data` refuses data of another version."""

_T = TypeVar("_T")


def to_data(ledger: Ledger) -> dict[str, Any]:
    """`ledger` as JSON-ready data; ``from_data(to_data(x)) == x``."""
    out: dict[str, Any] = {"version": VERSION}
    if ledger.first_seq is not None:
        out["first_seq"] = ledger.first_seq
        out["last_seq"] = ledger.last_seq
    if ledger.task is not None:
        out["task"] = {"seq": ledger.task.seq, "text": ledger.task.text}
    out["commands"] = [_command_data(c) for c in ledger.commands]
    out["decisions"] = [
        {"seq": d.seq, "kind": d.kind, "text": d.text, **({"clipped": True} if d.clipped else {})}
        for d in ledger.decisions
    ]
    if ledger.orphans:
        out["orphans"] = [_result_data(r) for r in ledger.orphans]
    return out


def from_data(data: Mapping[str, Any]) -> Ledger:
    """The ledger that `to_data` wrote. Raises `InvalidInputError` naming the bad field."""
    if not isinstance(data, Mapping):
        raise InvalidInputError(f"ledger data must be an object, not {type(data).__name__}")
    version = data.get("version")
    if version != VERSION:
        raise InvalidInputError(f"ledger data version {version!r} is not {VERSION}")
    first_seq = _opt(data, "first_seq", int, "ledger")
    last_seq = _opt(data, "last_seq", int, "ledger")
    task = None
    if data.get("task") is not None:
        raw = _object(data["task"], "task")
        task = Task(_get(raw, "seq", int, "task"), _get(raw, "text", str, "task"))
    commands = tuple(
        _command(_object(item, f"commands[{i}]"), f"commands[{i}]")
        for i, item in enumerate(_list(data, "commands", "ledger"))
    )
    decisions = []
    for i, item in enumerate(_list(data, "decisions", "ledger")):
        where = f"decisions[{i}]"
        raw = _object(item, where)
        decisions.append(
            Decision(
                _get(raw, "seq", int, where),
                _choice(raw, "kind", get_args(DecisionKind), where),
                _get(raw, "text", str, where),
                bool(_opt(raw, "clipped", bool, where)),
            )
        )
    orphans = tuple(
        _result(_object(item, f"orphans[{i}]"), f"orphans[{i}]")
        for i, item in enumerate(_list(data, "orphans", "ledger"))
    )
    return Ledger(task, commands, tuple(decisions), orphans, first_seq, last_seq)


def _command_data(command: Command) -> dict[str, Any]:
    out: dict[str, Any] = {
        "seq": command.seq,
        "call_id": command.call_id,
        "tool": command.tool,
        "kind": command.kind,
        "text": command.text,
        "lines": command.lines,
        "key": command.key,
    }
    if command.test is not None:
        out["test"] = command.test
    if command.ops:
        out["ops"] = [
            {
                "path": op.path,
                "kind": op.kind,
                "via": op.via,
                **({"opens": True} if op.opens else {}),
            }
            for op in command.ops
        ]
    if not command.single:
        out["single"] = False
    if command.no_match_exit:
        out["no_match_exit"] = True
    if command.result is not None:
        out["result"] = _result_data(command.result)
    return out


def _result_data(result: Result) -> dict[str, Any]:
    out: dict[str, Any] = {"call_id": result.call_id, "seq": result.seq}
    for name in ("exit_code", "error", "tests"):
        value = getattr(result, name)
        if value is not None:
            out[name] = value
    return out


def _command(raw: Mapping[str, Any], where: str) -> Command:
    ops = []
    for i, item in enumerate(_list(raw, "ops", where)):
        at = f"{where}.ops[{i}]"
        op = _object(item, at)
        ops.append(
            FileOp(
                _opt(op, "path", str, at),
                _choice(op, "kind", get_args(OpKind), at),
                _get(op, "via", str, at),
                bool(_opt(op, "opens", bool, at)),
            )
        )
    result = raw.get("result")
    single = _opt(raw, "single", bool, where)
    return Command(
        seq=_get(raw, "seq", int, where),
        call_id=_get(raw, "call_id", str, where),
        tool=_get(raw, "tool", str, where),
        kind=_choice(raw, "kind", get_args(CommandKind), where),
        text=_get(raw, "text", str, where),
        lines=_get(raw, "lines", int, where),
        key=_get(raw, "key", str, where),
        test=_opt(raw, "test", str, where),
        ops=tuple(ops),
        single=True if single is None else single,
        no_match_exit=bool(_opt(raw, "no_match_exit", bool, where)),
        result=None
        if result is None
        else _result(_object(result, f"{where}.result"), f"{where}.result"),
    )


def _result(raw: Mapping[str, Any], where: str) -> Result:
    return Result(
        _get(raw, "call_id", str, where),
        _get(raw, "seq", int, where),
        _opt(raw, "exit_code", int, where),
        _opt(raw, "error", str, where),
        _opt(raw, "tests", str, where),
    )


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"{where}: expected an object, got {value!r}")
    return value


def _list(raw: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = raw.get(key, [])
    if not isinstance(value, list):
        raise InvalidInputError(f"{where}.{key}: expected a list, got {value!r}")
    return value


def _get(raw: Mapping[str, Any], key: str, kind: type[_T], where: str) -> _T:
    value = _opt(raw, key, kind, where)
    if value is None:
        raise InvalidInputError(f"{where}.{key}: missing")
    return value


def _opt(raw: Mapping[str, Any], key: str, kind: type[_T], where: str) -> _T | None:
    value = raw.get(key)
    if value is None:
        return None
    # bool is an int in Python; a seq of True is still a mistake.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise InvalidInputError(f"{where}.{key}: expected {kind.__name__}, got {value!r}")
    return value


def _choice(raw: Mapping[str, Any], key: str, allowed: tuple[Any, ...], where: str) -> Any:
    value = raw.get(key)
    if value not in allowed:
        raise InvalidInputError(
            f"{where}.{key}: expected one of {', '.join(allowed)}, got {value!r}"
        )
    return value
