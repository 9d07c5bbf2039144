"""One set of rules for reading a transcript, whatever is done with it next.

`read_transcript` is what every command of the CLI reads its input with, so that a file one
command accepts is never one another refuses:

1. every line must be readable (`parse_jsonl`: UTF-8, JSON an encoder can write back, fields of
   the right types; an error names the line and the value);
2. the transcript must hold at least one message;
3. the history must be valid for the provider it is meant for (`validate`): a tool result with
   no call, a call never answered, a split batch... are refused with the line and the problem,
   unless ``repair=True``, which fixes what `plan_repair` can fix and reports each fix. A repair
   that leaves no message at all (every line was a tool result answering no call) is refused
   too, as rule 2 refuses an empty file, rather than handing an empty history on.

Problems a provider accepts (a final call still waiting for its result) are kept as `notes`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from ctxfold.errors import InvalidInputError
from ctxfold.messages._values import Message
from ctxfold.messages.jsonl import Format, parse_jsonl
from ctxfold.messages.validity import Fix, Problem, Provider, plan_repair, validate


@dataclass(frozen=True)
class Transcript:
    """A transcript read under the rules above.

    - `source`: the path it was read from (``"<lines>"`` for an iterable of lines).
    - `messages`: the history (repaired when ``repair=True`` changed something).
    - `format`: the file's format, "openai" or "anthropic".
    - `provider`: whose rules it was checked against.
    - `lines`: the source line of each message in `messages` (an added placeholder result
      carries the line of the call it answers).
    - `fixes`: what the repair changed, with `input_lines` naming where (empty without repair).
    - `notes`: problems a provider accepts, such as a final call still pending.
    """

    source: str
    messages: list[Message]
    format: Format
    provider: Provider
    lines: tuple[int, ...]
    fixes: tuple[Fix, ...] = ()
    input_lines: tuple[int, ...] = field(default=(), repr=False)
    notes: tuple[Problem, ...] = ()

    def where(self, index: int) -> str:
        """``line N`` of message `index` of `messages`."""
        return _where(self.lines, index)

    def fix_where(self, fix: Fix) -> str:
        """``line N`` of the input message a fix is about."""
        return _where(self.input_lines, fix.index)


def read_transcript(
    source: str | os.PathLike[str] | Iterable[str],
    *,
    provider: Provider | None = None,
    repair: bool = False,
    check: bool = True,
) -> Transcript:
    """Read a JSONL transcript and hold it to the rules of `provider` (default: its format).

    Raises `InvalidInputError` naming the source, the line and the problem, for anything the
    rules refuse. ``repair=True`` repairs a history first and keeps going when that made it
    valid; ``check=False`` applies only the reading rules (1 and 2), for a caller that reports
    validity problems itself.

    >>> rows = ['{"role": "user", "content": "list the files"}',
    ...         '{"role": "tool", "tool_call_id": "c9", "content": "a.py"}']
    >>> try:
    ...     read_transcript(rows)
    ... except InvalidInputError as exc:
    ...     print(str(exc)[:31], "...", str(exc)[-24:])
    <lines>: line 2: orphan-result: ... pass --repair to fix it
    >>> fixed = read_transcript(rows, repair=True)
    >>> [m.role for m in fixed.messages], [fixed.fix_where(f) for f in fixed.fixes]
    (['user'], ['line 2'])
    """
    name = os.fspath(source) if isinstance(source, (str, os.PathLike)) else "<lines>"
    try:
        parsed = parse_jsonl(source)
    except InvalidInputError as exc:
        # A file that cannot be opened is named by the error already.
        where = "" if isinstance(exc.__cause__, OSError) else f"{name}: "
        raise _located(f"{where}{exc}", exc.line) from None
    if not parsed.messages:
        raise InvalidInputError(f"{name}: holds no messages; a history needs at least one")
    rules: Provider = provider or parsed.format
    messages, lines = parsed.messages, parsed.lines
    fixes: tuple[Fix, ...] = ()
    if repair:
        planned = plan_repair(messages)
        messages, fixes = planned.messages, planned.fixes
        lines = tuple(parsed.lines[i] for i in planned.sources)
        if not messages:
            raise _nothing_left(name, fixes, parsed.lines)
    problems = validate(messages, rules) if check or repair else []
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        first = errors[0]
        more = len(errors) - 1
        rest = f" (and {more} more; 'ctxfold validate' lists them)" if more else ""
        if repair:
            hint = "; repair fixes only results and calls that do not pair up"
        else:
            hint = "; pass --repair to fix it" if first.code in _REPAIRABLE else ""
        raise _located(
            f"{name}: {_where(lines, first.index)}: {first.code}: {first.message}{rest}{hint}",
            lines[first.index] if first.index < len(lines) else None,
        )
    return Transcript(
        source=name,
        messages=messages,
        format=parsed.format,
        provider=rules,
        lines=lines,
        fixes=fixes,
        input_lines=parsed.lines,
        notes=tuple(p for p in problems if p.severity != "error"),
    )


# The problems `plan_repair` fixes: pairing of calls and results.
_REPAIRABLE = frozenset({"orphan-result", "missing-result", "split-batch", "misplaced-result"})


def _nothing_left(name: str, fixes: tuple[Fix, ...], lines: tuple[int, ...]) -> InvalidInputError:
    """The error for a repair that dropped every message: only tool results answering no call
    are ever dropped, so each fix names one of those."""
    shown = ", ".join(f"line {lines[f.index]}: call {f.call_id!r}" for f in fixes[:3])
    more = f" and {len(fixes) - 3} more" if len(fixes) > 3 else ""
    return _located(
        f"nothing is left after repair: every message of {name} was dropped (tool results that "
        f"answer no call: {shown}{more}); a history needs at least one message, so give the "
        "whole conversation, with the assistant messages that made these calls",
        lines[fixes[0].index] if fixes else None,
    )


def _where(lines: tuple[int, ...], index: int) -> str:
    return f"line {lines[index]}" if 0 <= index < len(lines) else f"message {index + 1}"


def _located(message: str, line: int | None) -> InvalidInputError:
    error = InvalidInputError(message)
    error.line = line
    return error
