"""What a replay kept of what matters, measured on its final view against the whole transcript.

- **The task**: the first real user request (a harness's demonstration is not one), verbatim as a
  user message of the final view; and whether it fits the bound on the user's words.
- **The user's messages**: the distinct ones, and of those the bound holds (chosen as the
  compactor chooses: the task, the newest, then back from the newest), how many are verbatim
  user messages of the final view.
- **Identifiers** that the user and assistant messages hold: paths, URLs, hashes, error strings
  and ids or codes, the share found verbatim in the final view's text; and apart from them the
  shell commands the agent ran (the identifier check keeps those too, but a command is a way of
  doing something, not a thing the work is about).
- **Probes**, derived mechanically from the whole transcript with the work ledger's builder:
  the task's first line, every file modified (created, changed or deleted), the last error of
  each command that ever failed, and the last test command with its outcome. A probe is answered
  when its text is a substring of the final view's text (contents, tool names, arguments, and
  the string values of JSON arguments).
- **Bounds**: the tokens of the summaries and notes in the final view, and of the largest
  summary written, against the target; what summarizers read against the history.

- **Recall**: of the identifiers (commands included) not in the final view, how many one
  ``recall(query=identifier)`` finds: a message that holds it is among what comes back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ctxfold.messages import Message
from ctxfold.pipeline.user_words import Candidate, select_user_words
from ctxfold.session.projection import Item
from ctxfold.summarizers.identifiers import extract_identifiers, kind_of
from ctxfold.summarizers.ledger import build_ledger

ProbeKind = Literal["task", "file", "error", "test"]

_MARKUP_LINE = re.compile(r"^\s*(?:</?[\w:-]+[^>]*>|```\w*|[-=#*_]{3,})\s*$")
_CTXFOLD_PREFIX = re.compile(r"^(?:exit -?\d+|edit rejected): ")
"""What the ledger puts before an error line it quotes."""
_OWN_WORDS = re.compile(r"^(?:exit -?\d+|edit rejected|timed out|Traceback|failed)?$")
"""An error the ledger states in its own words, quoting no line of the output."""


@dataclass(frozen=True)
class Probe:
    """One question the final view should answer: `kind`, and the `needles` that must all be
    in its text."""

    kind: ProbeKind
    needles: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.kind}: {' / '.join(self.needles)}"


@dataclass(frozen=True)
class Fidelity:
    """What the final view of a replay kept (see the module docstring). Tokens are the replay
    counter's."""

    user_bound: int
    """The bound on the user's words kept verbatim, in tokens."""
    task_tokens: int | None
    """Tokens of the task message; None when the transcript has no real request."""
    task_kept: bool | None
    """The task is a user message of the final view, verbatim; None without a task."""
    user_messages: int
    """Distinct user messages of the transcript."""
    user_within: int
    """Of those, the ones the bound holds."""
    user_kept: int
    """Of those within the bound, the ones verbatim in the final view."""
    user_kept_all: int
    """Of all distinct user messages, the ones verbatim in the final view."""
    identifiers: int
    """Distinct paths, URLs, hashes, error strings and ids the user and assistant wrote."""
    identifiers_in_view: int
    commands: int
    """Distinct commands the assistant ran (identifiers of kind "command")."""
    commands_in_view: int
    probes: tuple[Probe, ...]
    answered: tuple[bool, ...]
    summary_tokens: int
    """Tokens of the summaries and notes in the final view."""
    largest_summary: int
    """Tokens of the largest summary written during the replay."""
    target: int
    read_tokens: int
    """Tokens summarizers read over the replay."""
    history_tokens: int
    lost: int = 0
    """Identifiers and commands not in the final view."""
    recalled: int | None = None
    """Of those, how many one ``recall(query=identifier)`` finds; None: not measured."""
    missed: tuple[str, ...] = field(default=())
    """The probes not answered, as labels."""

    @property
    def task_fits(self) -> bool:
        return self.task_tokens is not None and self.task_tokens <= self.user_bound

    @property
    def probes_answered(self) -> int:
        return sum(self.answered)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `docs/cli.md` documents its keys."""
        return {
            "user_bound": self.user_bound,
            "task_tokens": self.task_tokens,
            "task_fits": self.task_fits,
            "task_kept": self.task_kept,
            "user_messages": self.user_messages,
            "user_within_bound": self.user_within,
            "user_kept_within_bound": self.user_kept,
            "user_kept": self.user_kept_all,
            "identifiers": self.identifiers,
            "identifiers_in_view": self.identifiers_in_view,
            "commands": self.commands,
            "commands_in_view": self.commands_in_view,
            "probes": len(self.probes),
            "probes_answered": self.probes_answered,
            "probes_missed": list(self.missed),
            "summary_tokens": self.summary_tokens,
            "largest_summary_tokens": self.largest_summary,
            "read_tokens": self.read_tokens,
            "history_tokens": self.history_tokens,
            "not_in_view": self.lost,
            "recalled": self.recalled,
        }


def measure(
    messages: Sequence[Message],
    final: Sequence[Item],
    size: Callable[[Message], int],
    *,
    user_bound: int,
    target: int,
    largest_summary: int = 0,
    read_tokens: int = 0,
    history_tokens: int | None = None,
    seqs: Sequence[int] | None = None,
    recall: Callable[[str], Iterable[int]] | None = None,
) -> Fidelity:
    """The fidelity of `final` (the replay's last projected items) to `messages` (the whole
    transcript), with the user's words bound at `user_bound` tokens; `size(message)` gives a
    message's tokens (a replay passes the counts it already has, so nothing is counted twice).
    With `seqs` (each message's seq in the log) and `recall(query) -> seqs found`, each
    identifier not in view is searched for once."""
    users = [(i, m) for i, m in enumerate(messages) if m.role == "user"]
    candidates = [Candidate(i, m.text, size(m)) for i, m in users]
    words = select_user_words(candidates, user_bound)
    kept_texts = {
        item.message.text
        for item in final
        if item.kind == "message" and item.message.role == "user" and item.original is None
    }
    distinct = list(dict.fromkeys(m.text.strip() for _, m in users if m.text.strip()))
    within = list(dict.fromkeys(c.text.strip() for c in candidates if c.position in words.kept))
    kept_stripped = {t.strip() for t in kept_texts}
    task = next((m for i, m in users if i == words.task), None)
    view_text = read_text(item.message for item in final)
    where: dict[str, set[int]] = {}
    for position, message in enumerate(messages):
        if message.role in ("user", "assistant"):
            seq = seqs[position] if seqs is not None else position
            for identifier in extract_identifiers(message):
                where.setdefault(identifier, set()).add(seq)
    homes = set(where)
    commands = {i for i in homes if kind_of(i) == "command"}
    homes -= commands
    lost = [i for i in where if i not in view_text]
    recalled = None
    if recall is not None and seqs is not None:
        recalled = sum(1 for i in lost if set(recall(i)) & where[i])
    probes = tuple(probes_of(messages))
    answered = tuple(all(n in view_text for n in p.needles) for p in probes)
    summaries = sum(size(i.message) for i in final if i.synthetic)
    return Fidelity(
        user_bound=user_bound,
        task_tokens=size(task) if task is not None else None,
        task_kept=None if task is None else task.text in kept_texts,
        user_messages=len(distinct),
        user_within=len(within),
        user_kept=sum(1 for t in within if t in kept_stripped),
        user_kept_all=sum(1 for t in distinct if t in kept_stripped),
        identifiers=len(homes),
        identifiers_in_view=sum(1 for i in homes if i in view_text),
        commands=len(commands),
        commands_in_view=sum(1 for i in commands if i in view_text),
        probes=probes,
        answered=answered,
        summary_tokens=summaries,
        largest_summary=largest_summary,
        target=target,
        read_tokens=read_tokens,
        history_tokens=(
            history_tokens if history_tokens is not None else sum(size(m) for m in messages)
        ),
        lost=len(lost),
        recalled=recalled,
        missed=tuple(p.label for p, ok in zip(probes, answered, strict=True) if not ok),
    )


def probes_of(messages: Sequence[Message]) -> Iterator[Probe]:
    """The probes of a transcript, from the work ledger of all of it: the task's first line,
    every file modified, the last error of each command that failed, the last test run."""
    ledger = build_ledger(enumerate(messages, start=1))
    if ledger.task is not None:
        first = next(
            (
                line.strip()
                for line in ledger.task.text.splitlines()
                if line.strip() and not _MARKUP_LINE.match(line)
            ),
            None,
        )
        if first:
            yield Probe("task", (first,))
    for entry in ledger.files():
        if entry.status != "read":
            yield Probe("file", (entry.path,))
    for error in ledger.errors():
        result = error.command.result
        message = (result.error if result else None) or ""
        yield Probe("error", (_error_needle(message, error.command.text),))
    tests = ledger.tests()
    if tests:
        last = tests[-1]
        outcome = last.result.tests if last.result else None
        needles: tuple[str, ...] = (_shown(last.text),)
        if outcome:
            needles += (outcome.split(": ", 1)[0] if outcome.startswith("Ran ") else outcome,)
        yield Probe("test", needles)


def _error_needle(error: str, command: str) -> str:
    """What shows the final view knows an error: the line the tool printed, which the ledger
    quotes after its own prefix; or, when the ledger quotes none ("exit 1"), the command."""
    said = _CTXFOLD_PREFIX.sub("", error)
    if _OWN_WORDS.match(said):
        return _shown(command)
    return said


def _shown(text: str) -> str:
    """A ledger's one-line text of a command, as it appears verbatim: without the ellipsis a
    clipped one ends with."""
    return text[:-1] if text.endswith("…") else text


def read_text(messages: Iterable[Message]) -> str:
    """Everything the model reads of `messages`: contents, tool names, arguments (and the string
    values inside JSON arguments, as the model reads them) and call ids. An identifier is in a
    view when it is a substring of this text: one taken from a JSON argument is unescaped there
    (``grep "x" f`` in ``{"command": "grep \\"x\\" f"}``)."""
    parts: list[str] = []
    for message in messages:
        parts.append(message.content or "")
        for call in message.tool_calls:
            parts.append(f"{call.id} {call.name} {call.arguments}")
            parts.extend(_strings(call.arguments))
        parts.append(message.tool_call_id or "")
    return "\n".join(parts)


def _strings(arguments: str) -> list[str]:
    try:
        parsed = json.loads(arguments) if arguments.strip() else None
    except ValueError:
        return []
    out: list[str] = []
    stack = [parsed]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return out


def describe(fid: Fidelity) -> list[str]:
    """The figures as a few lines of text, for ``ctxfold replay``."""
    if fid.task_kept is None:
        task = "no task (no real user request)"
    else:
        kept = "verbatim" if fid.task_kept else "NOT verbatim"
        fits = "within" if fid.task_fits else "past"
        task = f"{kept} ({fid.task_tokens:,} tokens, {fits} the {fid.user_bound:,}-token bound)"
    lines = [
        f"task: {task}",
        f"user messages verbatim: {fid.user_kept}/{fid.user_within} within the bound "
        f"({fid.user_kept_all}/{fid.user_messages} of all)",
        f"identifiers in view: {_share(fid.identifiers_in_view, fid.identifiers)} (paths, URLs, "
        f"hashes, errors, ids); commands {_share(fid.commands_in_view, fid.commands)}",
        f"probes answered: {fid.probes_answered}/{len(fid.probes)}",
        f"summaries in view: {fid.summary_tokens:,} tokens (target {fid.target:,}; largest "
        f"summary written {fid.largest_summary:,}); summarizers read "
        f"{fid.read_tokens / fid.history_tokens if fid.history_tokens else 0:.2f}x the history",
    ]
    if fid.recalled is not None:
        lines.append(
            f"recall: {_share(fid.recalled, fid.lost)} of the identifiers not in view found by "
            "one recall(query=identifier)"
        )
    lines += [f"  missed: {label}" for label in fid.missed]
    return lines


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({part / whole:.0%})" if whole else "0/0"
