"""Replaying real agent transcripts as a live agent would: what it costs and what it keeps.

Each shared transcript is played into a fresh in-memory session message by message through
`ctxfold.replay.replay`, with the compactor built exactly as ``ctxfold replay`` builds it
(`ctxfold.cli.replay.run_replay`): `Compactor(Budget(window=W), counter=counter("auto"),
redact=redact_secrets)` (the CLI redacts by default), so
the default extractive summarizer counts with the same exact counter as the CLI, and the
compaction counts here are the CLI's. Before every model request the automatic trigger runs, as
an agent loop calls `maybe_compact` before sending.

Two kinds of figure per transcript and window:

- speed: the median wall time of the plain replay (nothing but the public call), each one the
  first replay of a process that has only imported ctxfold and loaded its tokenizer
  (`benchmarks._replay_child`), as a ratio to one tiktoken pass over the transcript's text
  (`encode_ordinary` with the o200k encoding of ctxfold's exact counter), the least any exact
  count of the transcript can cost;
- fidelity, from one more replay with every request checked: compactions, requests that a
  provider would reject, what the summarizer read against the history, identifiers kept.

Windows 8k, 16k and 32k with the default ladder (ClearToolResults -> Summarize ->
SlidingWindow), one with no compaction at all (a window far above any transcript), and 16k with
the reference ladder (ClearToolResults -> SlidingWindow -> Summarize) for comparison. What the
figures mean is written out in the notes of the result, so the table stands on its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks import ROOT, TRANSCRIPTS
from benchmarks._common import BenchmarkError, plural, summarize
from ctxfold.compactor import CompactionReport, Compactor
from ctxfold.events import COMPACTION, MESSAGE
from ctxfold.messages import Message, validate
from ctxfold.pipeline import ClearToolResults, Pipeline, SlidingWindow, Summarize
from ctxfold.protocols import TokenCounter
from ctxfold.replay import ReplayResult, replay
from ctxfold.replay.fidelity import read_text
from ctxfold.session import Session
from ctxfold.storage import MemoryStore
from ctxfold.summarizers import SummaryRequest, SummaryResult
from ctxfold.summarizers.identifiers import extract_identifiers, kind_of
from ctxfold.summarizers.ledger import build_ledger
from ctxfold.summarizers.redact import redact_secrets, redacted_all
from ctxfold.testing.transcripts import generate
from ctxfold.tokens import Budget, TiktokenCounter
from ctxfold.tokens import counter as make_counter

NO_COMPACTION = 1_000_000
"""A window (tokens) far above any shared transcript: the trigger never fires."""
SETS = (
    ("default", 8_000),
    ("default", 16_000),
    ("default", 32_000),
    ("none", NO_COMPACTION),
    ("reference", 16_000),
)
QUICK_SETS = (
    ("default", 8_000),
    ("default", 16_000),
    ("none", NO_COMPACTION),
    ("reference", 16_000),
)
FULL_REPS = 11
"""Timed replays per row (and tiktoken passes per transcript). A replay with no compaction of the
smaller transcripts takes 2 ms; at 5 repetitions the no-compaction totals came to 1.30x one
tiktoken pass in one `make bench` and 1.60x in a run of this benchmark right after. The full set
of rows takes well under a minute at this count."""
READ_TARGET = 1.5
"""The issue's bound on summarizer reading: under 1.5× the tokens of the whole history."""

COLUMNS = [
    "transcript",
    "ladder",
    "window",
    "trigger",
    "target",
    "messages",
    "history tok",
    "requests",
    "compactions",
    "over target",
    "peak tok",
    "final tok",
    "summarizer calls",
    "tokens read",
    "read / history",
    "record tok",
    "record / history",
    "ids u/a",
    "ids summarized",
    "summarized kept %",
    "ids dropped",
    "ids in final %",
    "verifier kept %",
    "task verbatim",
    "user msgs verbatim",
    "ids in view %",
    "commands in view %",
    "probes answered",
    "summary tok / target",
    "recall finds %",
    "invalid",
    "cache reuse %",
    "tiktoken pass ms",
    "first tiktoken pass ms",
    "replay ms",
    "replay range %",
    "replay / tiktoken pass",
    "replay / first tiktoken pass",
    "reading floor ms",
    "reading floor / first tiktoken pass",
]


@dataclass
class Figures:
    """The raw numbers of one transcript at one window (or of several, added up for a totals
    row): fidelity from the checked replay, times from the plain ones."""

    name: str
    ladder: str
    window: int
    trigger: int
    target: int
    messages: int = 0
    history: int = 0
    requests: int = 0
    compactions: int = 0
    over_target: int = 0
    peak: int = 0
    final: int = 0
    calls: int = 0
    read: int = 0
    record: int = 0
    ids: int = 0
    summarized: int = 0
    summarized_kept: int = 0
    dropped: int = 0
    in_final: int = 0
    verifier_kept: int = 0
    verifier_left_out: int = 0
    invalid: int = 0
    remarks: int = 0
    requested: int = 0
    reused: int = 0
    tiktoken_ms: float = 0.0
    """Median milliseconds of one tiktoken pass over the transcript's text, in a process that
    made the same pass before (warm)."""
    first_tiktoken_ms: float = 0.0
    """Median milliseconds of the first tiktoken pass over the transcript's text in a process,
    timed as a replay is (`ColdReplays.first_pass`)."""
    replay_ms: float = 0.0
    """Median milliseconds of the plain replay."""
    replay_range: float = 0.0
    """(slowest - fastest) / median of the plain replays, in percent."""
    read_once: list[tuple[int, int]] = field(default_factory=list)
    """(position, seq) of each original message a summarizer's summary replaced: the messages
    some summarizer read (`_summarized_originals`)."""
    floor_ms: float = 0.0
    """Median milliseconds of the reading floor (`reading_floor`), timed as a replay is."""
    floor_parts: Counter[str] = field(default_factory=Counter)
    """The median milliseconds of each part of the reading floor (`FLOOR_PARTS`)."""
    task_runs: int = 0
    """Runs whose task fits the bound on the user's words (1 or 0; summed in totals)."""
    task_kept: int = 0
    """Of those, the runs whose task is verbatim in the final view."""
    task_over: int = 0
    """Runs whose task is past the bound, or that have no task."""
    user_within: int = 0
    user_kept: int = 0
    fid_ids: int = 0
    fid_ids_in_view: int = 0
    commands: int = 0
    commands_in_view: int = 0
    probes: int = 0
    probes_answered: int = 0
    lost: int = 0
    """Identifiers and commands not in the final view."""
    recalled: int = 0
    """Of those, the ones one recall(query=identifier) finds."""
    summary_ratio: float = 0.0
    """The highest (summary tokens in the final view, or the largest summary) / target."""
    missed: list[str] = field(default_factory=list)
    """Probes the final view did not answer, with the run that missed them."""
    missing: Counter[str] = field(default_factory=Counter)
    """Summarized identifiers absent from the final view, by kind (path, command, id, ...)."""
    short: list[str] = field(default_factory=list)
    """Compactions that landed over target: tokens after, target and pinned tokens."""

    def row(self) -> list[object]:
        return [
            self.name,
            self.ladder,
            self.window,
            self.trigger,
            self.target,
            self.messages,
            self.history,
            self.requests,
            self.compactions,
            self.over_target,
            self.peak,
            self.final,
            self.calls,
            self.read,
            _ratio(self.read, self.history),
            self.record,
            _ratio(self.record, self.history),
            self.ids,
            self.summarized,
            _percent(self.summarized_kept, self.summarized),
            self.dropped,
            _percent(self.in_final, self.ids),
            _percent(self.verifier_kept, self.verifier_kept + self.verifier_left_out),
            self._task_cell(),
            f"{self.user_kept}/{self.user_within}",
            _percent(self.fid_ids_in_view, self.fid_ids),
            _percent(self.commands_in_view, self.commands),
            f"{self.probes_answered}/{self.probes}",
            round(self.summary_ratio, 2),
            _percent(self.recalled, self.lost),
            self.invalid,
            _percent(self.reused, self.requested),
            round(self.tiktoken_ms, 1),
            round(self.first_tiktoken_ms, 1),
            round(self.replay_ms, 1),
            round(self.replay_range, 1),
            _ratio(self.replay_ms, self.tiktoken_ms),
            _ratio(self.replay_ms, self.first_tiktoken_ms),
            round(self.floor_ms, 1),
            _ratio(self.floor_ms, self.first_tiktoken_ms),
        ]

    def _task_cell(self) -> str:
        if self.task_runs + self.task_over == 1:
            if self.task_over:
                return "over bound"
            return "yes" if self.task_kept else "no"
        cell = f"{self.task_kept}/{self.task_runs}"
        return f"{cell} (+{self.task_over} over bound)" if self.task_over else cell


def total(name: str, runs: Sequence[Figures]) -> Figures:
    """One row for a set of runs at the same window and ladder: counts and times added, peak
    the highest; ratios are then taken over the sums, the range is the widest."""
    out = Figures(name, runs[0].ladder, runs[0].window, runs[0].trigger, runs[0].target)
    added = [
        "messages", "history", "requests", "compactions", "over_target", "final", "calls",
        "read", "record", "ids", "summarized", "summarized_kept", "dropped", "in_final",
        "verifier_kept", "verifier_left_out", "invalid", "remarks", "requested", "reused",
        "tiktoken_ms", "first_tiktoken_ms", "replay_ms", "floor_ms", "task_runs", "task_kept",
        "task_over", "user_within", "user_kept", "fid_ids", "fid_ids_in_view", "commands",
        "commands_in_view", "probes", "probes_answered", "lost", "recalled",
    ]  # fmt: skip
    for run in runs:
        for key in added:
            setattr(out, key, getattr(out, key) + getattr(run, key))
        out.peak = max(out.peak, run.peak)
        out.replay_range = max(out.replay_range, run.replay_range)
        out.summary_ratio = max(out.summary_ratio, run.summary_ratio)
        out.missing.update(run.missing)
        out.floor_parts.update(run.floor_parts)
        out.short.extend(run.short)
        out.missed.extend(run.missed)
    return out


def compactor_for(
    window: int, ladder: str, counter: TokenCounter, kind: type[Compactor] = Compactor
) -> Compactor:
    """The compactor ``ctxfold replay --window W`` builds (`run_replay`), or the same with the
    reference ladder; "none" is the default compactor at a window nothing reaches."""
    pipeline = None
    if ladder == "reference":
        pipeline = Pipeline([ClearToolResults(), SlidingWindow(), Summarize()])
    return kind(Budget(window=window), pipeline, counter=counter, redact=redact_secrets)


def replay_plain(
    messages: Sequence[Message], window: int, ladder: str, counter: TokenCounter
) -> tuple[ReplayResult, float]:
    """One replay through the public call alone; its result and wall seconds (session and
    compactor built inside the clock, as the CLI builds them for each run)."""
    started = time.perf_counter()
    session = MemoryStore().session("replay", counter=counter)
    compactor = compactor_for(window, ladder, counter)
    result = replay(session, messages, compactor, counter=counter, fidelity=False)
    return result, time.perf_counter() - started


class ColdReplays:
    """Times replays each in a fresh fork of a clean process (`benchmarks._replay_child`), where
    no memo holds the work of an earlier replay; where there is no fork, in this process, and
    `cold` says so."""

    def __init__(self, quick: bool) -> None:
        self.cold = hasattr(os, "fork")
        self._child: subprocess.Popen[str] | None = None
        if self.cold:
            self._child = subprocess.Popen(
                [sys.executable, "-m", "benchmarks._replay_child", *(["--quick"] if quick else [])],
                cwd=ROOT.parent,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            self._answer()

    def time(
        self,
        name: str,
        messages: Sequence[Message],
        window: int,
        ladder: str,
        counter: TokenCounter,
    ) -> tuple[float, int]:
        """One replay's wall seconds and its number of compactions."""
        if self._child is None:
            result, spent = replay_plain(messages, window, ladder, counter)
            return spent, len(result.compactions)
        assert self._child.stdin is not None
        self._child.stdin.write(json.dumps({"name": name, "window": window, "ladder": ladder}))
        self._child.stdin.write("\n")
        self._child.stdin.flush()
        answer = self._answer()
        return answer["ms"] / 1_000, answer["compactions"]

    def first_pass(self, name: str, messages: Sequence[Message], counter: TokenCounter) -> float:
        """Wall seconds of the first tiktoken pass over the transcript `name` in a fresh fork of
        the clean process, after the same warm-up a timed replay has, plus two passes of the
        encoder over the warm-up session's text (as the replay's tokenizer has counted it):
        the baseline measured the way the replay is. Where there is no fork, a pass in this
        process."""
        if self._child is None:
            return tiktoken_pass(messages, counter)
        assert self._child.stdin is not None
        self._child.stdin.write(json.dumps({"name": name, "tiktoken": True}) + "\n")
        self._child.stdin.flush()
        ms: float = self._answer()["ms"]
        return ms / 1_000

    def floor(
        self,
        name: str,
        messages: Sequence[Message],
        read_once: Sequence[tuple[int, int]],
        ladder: str,
        counter: TokenCounter,
    ) -> dict[str, float]:
        """Wall seconds of each part of `reading_floor` over the transcript `name`, in a fresh
        fork of the clean process after the warm-up a replay with `ladder` has: timed as the
        replay is. Where there is no fork, in this process (whose memos may hold the work)."""
        if self._child is None:
            return reading_floor(messages, read_once, counter)
        assert self._child.stdin is not None
        request = {"name": name, "floor": [list(pair) for pair in read_once], "ladder": ladder}
        self._child.stdin.write(json.dumps(request) + "\n")
        self._child.stdin.flush()
        parts: dict[str, float] = self._answer()["seconds"]
        return parts

    def _answer(self) -> dict[str, Any]:
        assert self._child is not None and self._child.stdout is not None
        line = self._child.stdout.readline()
        if not line:
            raise BenchmarkError(f"the replay timer ended (exit status {self._child.wait()})")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise BenchmarkError(f"a timed replay failed:\n{answer['error']}")
        return answer

    def close(self) -> None:
        if self._child is not None:
            assert self._child.stdin is not None and self._child.stdout is not None
            self._child.stdin.close()
            self._child.wait()
            self._child.stdout.close()
            self._child = None


class _Metered:
    """Wraps the compactor's own summarizer and counts the text of every request on the way in
    (instructions and the framed record): what an LLM summarizer would have been sent."""

    def __init__(self, inner: Any, counter: TokenCounter) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", "extractive")
        self.counter = counter
        self.sent = 0

    def __call__(self, request: SummaryRequest) -> SummaryResult:
        self.sent += self.counter.count_text(request.prompt)
        result: SummaryResult = self.inner(request)
        return result


class _CheckedCompactor(Compactor):
    """Validates, after every trigger check, the request the model would be sent."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.problems = 0
        self.remarks = 0

    def maybe_compact(self, session: Session) -> CompactionReport | None:
        report = super().maybe_compact(session)
        found = validate(session.messages())
        errors = sum(1 for p in found if p.severity == "error")
        self.problems += errors
        self.remarks += len(found) - errors
        return report


def replay_one(
    name: str, messages: Sequence[Message], window: int, ladder: str, counter: TokenCounter
) -> Figures:
    """Replay `messages` at `window` with the "default", "reference" or "none" ladder, every
    request checked; its fidelity figures (no times)."""
    compactor = compactor_for(window, ladder, counter, _CheckedCompactor)
    assert isinstance(compactor, _CheckedCompactor)
    summarizer = _Metered(compactor.summarizer, counter)
    compactor.summarizer = summarizer
    session = MemoryStore().session("replay", counter=counter)
    result = replay(session, messages, compactor, counter=counter)
    reports = [c.report for c in result.compactions]
    out = Figures(name, ladder, result.window, result.trigger, result.target)
    out.messages, out.history = result.messages, result.original_tokens
    out.requests, out.compactions = len(result.requests), len(reports)
    short = [r for r in reports if r.landed and not r.fits]
    out.over_target = len(short)
    out.short = [
        f"{name} at {window:,} ({ladder}): {r.tokens_after:,} for {r.target:,}, "
        f"pinned {r.pinned_tokens:,}"
        for r in short
    ]
    out.peak, out.final = result.peak_tokens, result.final_tokens
    out.calls = result.summarizer_calls
    out.read = sum(r.stretch_tokens for r in reports)
    out.record = summarizer.sent
    out.verifier_kept = sum(r.identifiers_kept for r in reports)
    out.verifier_left_out = sum(r.identifiers_left_out for r in reports)
    out.invalid, out.remarks = compactor.problems, compactor.remarks
    out.requested, out.reused = result.requested_tokens, result.reused_tokens
    _count_identifiers(out, messages, session)
    _fidelity(out, result)
    out.read_once = _summarized_originals(session)
    return out


FLOOR_PARTS = ("count", "identifiers", "redaction", "ledger")
"""The parts of `reading_floor`, in the order they run."""


def reading_floor(
    messages: Sequence[Message], read_once: Sequence[tuple[int, int]], counter: TokenCounter
) -> dict[str, float]:
    """Seconds of each part (`FLOOR_PARTS`) of the work a replay of `messages` cannot skip,
    each message read once: every message counted (`count_message`, as the session's tally
    counts it), and each message a summarizer's summary replaced (`read_once`: its position and
    seq) scanned for identifiers, redacted and read into the work ledger, through the functions
    the compaction uses. Every summary is checked for the identifiers of its stretch, summaries
    are redacted (this benchmark's compactors redact) and carry the ledger of what they replace,
    so no replay with these compactions does less; it also does more (selecting and fitting
    lines, rendering, verifying, reading the summaries it merges), which this leaves out."""
    read = [messages[position] for position, _ in read_once]
    pairs = [(seq, message) for (_, seq), message in zip(read_once, read, strict=True)]
    passes: tuple[Callable[[], object], ...] = (
        lambda: [counter.count_message(message) for message in messages],
        lambda: extract_identifiers(read),
        lambda: redacted_all(read, redact_secrets),
        lambda: build_ledger(pairs),
    )
    seconds: dict[str, float] = {}
    for part, work in zip(FLOOR_PARTS, passes, strict=True):
        started = time.perf_counter()
        work()
        seconds[part] = time.perf_counter() - started
    return seconds


def _summarized_originals(session: Session) -> list[tuple[int, int]]:
    """(position, seq) of each original message that a summarizer's summary replaced outright:
    what the replay's summarizers read (a message a note replaced was dropped unread; one
    replaced by a summary of summaries was read by the first)."""
    summarized: set[int] = set()
    for event in session.events():
        if event.type == COMPACTION and event.data.get("strategy") == "summarize":
            summarized.update(int(item) for item in event.data.get("replaced", ()))
    return [
        (position, seq) for position, seq in enumerate(_message_seqs(session)) if seq in summarized
    ]


def _fidelity(out: Figures, result: ReplayResult) -> None:
    """The fidelity figures `ctxfold replay` reports (`ctxfold.replay.fidelity`)."""
    fid = result.fidelity
    if fid is None:
        return
    if fid.task_fits:
        out.task_runs, out.task_kept = 1, int(bool(fid.task_kept))
    else:
        out.task_over = 1
    out.user_within, out.user_kept = fid.user_within, fid.user_kept
    out.fid_ids, out.fid_ids_in_view = fid.identifiers, fid.identifiers_in_view
    out.commands, out.commands_in_view = fid.commands, fid.commands_in_view
    out.probes, out.probes_answered = len(fid.probes), fid.probes_answered
    out.summary_ratio = max(fid.summary_tokens, fid.largest_summary) / fid.target
    out.lost, out.recalled = fid.lost, fid.recalled or 0
    out.missed = [f"{out.name} at {out.window:,} ({out.ladder}): {m}" for m in fid.missed]


def tiktoken_pass(messages: Sequence[Message], counter: TokenCounter) -> float:
    """Seconds of one `encode_ordinary` over all the text of `messages` (contents, tool call
    names, arguments and ids) with the encoding of ctxfold's exact counter."""
    encoding = counter.encoding if isinstance(counter, TiktokenCounter) else None
    if encoding is None:
        encoding = TiktokenCounter("o200k_base").encoding
    text = _text(messages)
    started = time.perf_counter()
    encoding.encode_ordinary(text)
    return time.perf_counter() - started


def _count_identifiers(out: Figures, messages: Sequence[Message], session: Session) -> None:
    """Where the identifiers of user and assistant messages ended up.

    Each original message is kept (still in the final view as itself), summarized (replaced,
    and every replacement along the way was a summary) or dropped (a sliding-window note
    replaced it or a summary of it). An identifier counts as summarized when some summarized
    message holds it and no kept message does; as dropped when only dropped messages hold it.
    """
    fate = _fates(session)
    homes: dict[str, set[str]] = {}
    for seq, message in zip(_message_seqs(session), messages, strict=True):
        if message.role in ("user", "assistant"):
            for found in extract_identifiers(message):
                homes.setdefault(found, set()).add(fate.get(seq, "kept"))
    view = read_text(session.messages())
    summarized = [i for i, where in homes.items() if "summarized" in where and "kept" not in where]
    out.ids = len(homes)
    out.summarized = len(summarized)
    out.missing = Counter(kind_of(i) for i in summarized if i not in view)
    out.summarized_kept = out.summarized - sum(out.missing.values())
    out.dropped = sum(1 for where in homes.values() if where == {"dropped"})
    out.in_final = sum(1 for i in homes if i in view)


def _message_seqs(session: Session) -> list[int]:
    """The seq of each message the replay appended, in order. Not its position plus one: every
    compaction is an event of the log too, and takes the seq after the messages before it."""
    return [event.seq for event in session.events() if event.type == MESSAGE]


def _fates(session: Session) -> dict[int, str]:
    """For every replaced item id: "summarized" or "dropped", following later compactions."""
    parent: dict[int, tuple[int, bool]] = {}
    for event in session.events():
        if event.type == COMPACTION:
            is_note = event.data.get("kind") == "note"
            for item_id in event.data.get("replaced", ()):
                parent[int(item_id)] = (event.seq, is_note)
    fate: dict[int, str] = {}
    for item_id in parent:
        current, dropped = item_id, False
        while current in parent:
            current, is_note = parent[current]
            dropped = dropped or is_note
        fate[item_id] = "dropped" if dropped else "summarized"
    return fate


def _text(messages: Iterable[Message]) -> str:
    """The text of `messages` one tiktoken pass reads: contents, tool names, arguments as sent
    and call ids."""
    parts: list[str] = []
    for message in messages:
        parts.append(message.content or "")
        parts.extend(f"{c.id} {c.name} {c.arguments}" for c in message.tool_calls)
        parts.append(message.tool_call_id or "")
    return "\n".join(parts)


def sources(quick: bool) -> tuple[list[tuple[str, list[Message]]], list[str]]:
    """The transcripts replayed (the two shortest in a quick run), or a generated session when
    they are absent; and a note saying which."""
    from ctxfold.messages.jsonl import read_jsonl

    paths = sorted(TRANSCRIPTS.glob("*.jsonl")) if TRANSCRIPTS.is_dir() else []
    if not paths:
        demo = generate(seed=7, steps=40 if quick else 300)
        note = f"{TRANSCRIPTS} is absent: a generated coding-agent session stands in for it."
        return [("demo (generated)", demo)], [note]
    if quick:
        paths = sorted(paths, key=lambda p: p.stat().st_size)[:2]
    return [(p.stem, read_jsonl(p)) for p in paths], []


def run(quick: bool = False) -> dict[str, Any]:
    """Replay every shared transcript at each window; one row per run plus a totals row per set."""
    counter = make_counter("auto")
    found, notes = sources(quick)
    reps = 1 if quick else FULL_REPS
    passes = {
        name: summarize([tiktoken_pass(msgs, counter) for _ in range(reps)]).median * 1_000
        for name, msgs in found
    }
    rows: list[list[object]] = []
    runs: list[Figures] = []
    timer = ColdReplays(quick)
    try:
        first = {
            name: summarize([timer.first_pass(name, msgs, counter) for _ in range(reps)]).median
            * 1_000
            for name, msgs in found
        }
        _replay_all(found, quick, reps, timer, counter, (passes, first), rows, runs)
    finally:
        timer.close()
    return {
        "title": "Replaying agent transcripts: cost against one tiktoken pass, and what is kept",
        "columns": COLUMNS,
        "rows": rows,
        "notes": notes + _notes(runs, counter, reps, timer.cold),
    }


def _replay_all(
    found: Sequence[tuple[str, list[Message]]],
    quick: bool,
    reps: int,
    timer: ColdReplays,
    counter: TokenCounter,
    passes: tuple[dict[str, float], dict[str, float]],
    rows: list[list[object]],
    runs: list[Figures],
) -> None:
    for ladder, window in QUICK_SETS if quick else SETS:
        batch = []
        for name, msgs in found:
            figures = replay_one(name, msgs, window, ladder, counter)
            seconds = []
            for _ in range(reps):
                spent, compactions = timer.time(name, msgs, window, ladder, counter)
                seconds.append(spent)
                if compactions != figures.compactions:
                    raise BenchmarkError(
                        f"{name} at {window:,} ({ladder}): the plain replay made "
                        f"{compactions} compactions, the checked one "
                        f"{figures.compactions}; the fidelity columns would not describe it"
                    )
            timing = summarize([s * 1_000 for s in seconds])
            floors = [
                timer.floor(name, msgs, figures.read_once, ladder, counter) for _ in range(reps)
            ]
            figures.floor_ms = summarize([sum(f.values()) * 1_000 for f in floors]).median
            for part in FLOOR_PARTS:
                figures.floor_parts[part] = summarize([f[part] * 1_000 for f in floors]).median
            figures.tiktoken_ms, figures.first_tiktoken_ms = passes[0][name], passes[1][name]
            figures.replay_ms, figures.replay_range = timing.median, timing.range_percent
            batch.append(figures)
        runs.extend(batch)
        rows.extend(f.row() for f in batch)
        rows.append(total(f"all ({len(batch)})", batch).row())


def _notes(runs: Sequence[Figures], counter: TokenCounter, reps: int, cold: bool) -> list[str]:
    compacting = [f for f in runs if f.ladder != "none"]
    worst = max(compacting, key=lambda f: f.read / f.history if f.history else 0.0)
    missed = [f for f in compacting if f.history and f.read / f.history >= READ_TARGET]
    verdict = (
        f"met in every run (highest {worst.read / worst.history:.2f}× for {worst.name} at "
        f"{worst.window:,} with the {worst.ladder} ladder)"
        if not missed
        else "missed in " + ", ".join(f"{f.name} at {f.window:,} ({f.ladder})" for f in missed)
    )
    remarks = sum(f.remarks for f in runs)
    most = max(compacting, key=lambda f: f.record / f.history if f.history else 0.0)
    missing: Counter[str] = Counter()
    for f in runs:
        missing.update(f.missing)
    lost = ", ".join(f"{kind} {n:,}" for kind, n in missing.most_common()) or "none"
    short = "; ".join(s for f in runs for s in f.short) or "none"
    unanswered = "; ".join(m for f in compacting for m in f.missed) or "none"
    return [
        "Each run: `replay(MemoryStore().session(...), messages, compactor, counter=c)` "
        "(ctxfold.replay) with c = counter('auto') and compactor = Compactor(Budget(window=W), "
        "counter=c, redact=redact_secrets), as `ctxfold replay --window W` runs it; tokens are "
        f"counted exactly with {getattr(counter, 'name', counter)}, by the compactor and by its "
        "default "
        "extractive summarizer alike. Ladder 'none' is that compactor at a "
        f"{NO_COMPACTION:,}-token window, which no transcript reaches: the cost of replaying "
        "and counting alone. Budget(window=W) defaults: trigger = window - reserve, target = "
        "40% of the window.",
        "Speed: tiktoken pass ms is the median of one `encode_ordinary` over all the "
        "transcript's text (contents, tool names, arguments, call ids, joined) with the o200k "
        "encoding of ctxfold's exact counter, in this process, which has made the same pass "
        "before (warm); first tiktoken pass ms the same pass timed as a replay is timed below: "
        "the first over the transcript in a fresh fork of the clean process, after the replay's "
        "warm-up and two passes over the warm-up session's text, with the transcript read "
        "again from disk (a first pass in a process costs more than a repeated one, and the "
        "replay pays that too); replay ms the median wall time of the plain "
        "replay (building the session and compactor included), "
        + (
            "each the first replay of a fresh fork of a process that has imported ctxfold, "
            "loaded the tokenizer, read the transcripts and replayed only a small generated "
            "session, so no memo holds "
            "an earlier replay's work (as in a new `ctxfold replay` process after its imports); "
            "before its clock the child repeats the warm-up on a generated session and reads "
            "the transcript from disk again, so it does not time the copy-on-write of pages "
            "shared with its parent, a cost of forking that no process of its own pays, "
            if cold
            else "in this process (no fork here), where memos keep an earlier replay's work, "
        )
        + "over "
        f"{plural(reps, 'repetition')} each; replay range % is (slowest - fastest) / median; "
        "replay / tiktoken pass and replay / first tiktoken pass divide the medians (totals "
        "rows: the sums); the second sets like against like. The fidelity "
        "figures come from one more replay per row whose every request is validated, not "
        "timed; its compactions are checked equal to the plain replays'.",
        _floor_note(runs),
        "A request is what the model would be sent before each assistant message (and at the end "
        "when the transcript stops on a user or tool message). Peak and final tok are the "
        "compactor's estimate of the projected history at those requests, after any compaction; "
        "history tok is the whole transcript uncompacted.",
        "Over target counts compactions that landed without reaching the target: the pinned "
        f"messages alone took it, or all but a note's worth of it. Here: {short}.",
        "Tokens read is the history handed to summarizers (sum of stretch_tokens over all "
        "compactions); record tok is the text actually sent (instructions plus framed record). "
        f"The target for tokens read is under {READ_TARGET}× the history: {verdict}. The "
        f"record sent, with the instructions every call carries, reaches "
        f"{most.record / most.history:.2f}× at most ({most.name} at {most.window:,}).",
        "Identifiers come from every user and assistant message of the original transcript "
        "(extract_identifiers, tool call arguments and call ids included). A message is kept, "
        "summarized (replaced only by summaries) or dropped (a sliding-window note replaced it or "
        "its summary). Ids summarized: held by a summarized message and by no kept one; "
        "summarized kept %: of those, the share found verbatim in the final view (the main "
        "figure). Ids dropped: held only by dropped messages. Ids in final %: of all, the share "
        "verbatim in the final view. Verbatim in the view means a substring of its text as the "
        "model reads it: contents, tool names, arguments and the strings inside JSON arguments "
        "(read_text), so a command taken from an argument is found unescaped. Summarized "
        "identifiers missing from the final view, by "
        f"kind, over all runs: {lost}.",
        "Verifier kept %: of the identifiers of every replaced stretch (tool output included), "
        "the share the compaction reports say each summary kept when it was written.",
        "Fidelity, as `ctxfold replay` reports it (ctxfold.replay.fidelity, on the final view): "
        "task verbatim says whether the task (the first real user request; a harness's "
        "demonstration is not one) is a user message of the final view word for word, when it "
        "fits the bound on the user's words (the smaller of 20,000 tokens and half the target); "
        "totals rows count the runs. User msgs verbatim: of the distinct user messages the "
        "bound holds (the task, the newest, then back from the newest), those verbatim as user "
        "messages of the final view. Ids in view %: of the paths, URLs, hashes, error strings "
        "and ids or codes that user and assistant messages hold, the share verbatim in the "
        "final view's text (contents, tool names, arguments and their string values); commands "
        "in view % the same for the shell commands the agent ran. Probes answered: derived "
        "from the whole transcript by the work ledger's builder (the task's first line, every "
        "file modified, the last error of each command that failed, the last test command with "
        "its outcome), each answered when its text is a substring of the final view's text. "
        f"Probes not answered: {unanswered}. Summary tok / target: the larger of the summaries "
        "and notes in the final view and the largest summary written, over the target. Recall "
        "finds %: of the identifiers (commands included) the final view no longer shows, the "
        "share one session.recall(query=identifier) finds (a message holding it comes back). "
        "The timed plain replays leave these measurements out (replay(..., fidelity=False)).",
        "Invalid: validity errors (what a provider would reject) over every request the model "
        f"would be sent; should be 0. Informational findings are not counted ({remarks:,} in "
        "all, e.g. call ids reused by the original tau transcripts, which the checker notes). "
        "Cache reuse %: share of all request tokens that repeat the previous request's prefix.",
    ]


def _floor_note(runs: Sequence[Figures]) -> str:
    """What the reading floor is, and where the replay stands against it in the totals rows."""
    sets: dict[int, list[Figures]] = {}
    for f in runs:
        if f.ladder == "default":
            sets.setdefault(f.window, []).append(f)
    where = "; ".join(
        f"at {window:,}, {_ratio(t.floor_ms, t.first_tiktoken_ms)}× a first tiktoken pass ("
        + ", ".join(
            f"{part} {_ratio(t.floor_parts[part], t.first_tiktoken_ms)}×" for part in FLOOR_PARTS
        )
        + f"), the replay {_ratio(t.replay_ms, t.first_tiktoken_ms)}×"
        for window, t in ((w, total("all", fs)) for w, fs in sorted(sets.items()))
    )
    return (
        "Reading floor ms: the work a replay of the row cannot skip, each message read once, "
        "timed as the replay is (the first in a fresh fork, after the same warm-up): every "
        "message counted (count_message, as the session's tally counts it) and each original "
        "message a summarizer's summary replaced outright (what the row's summarizers read) "
        "scanned for identifiers (extract_identifiers: every summary is checked for its "
        "stretch's), "
        "redacted (redact_secrets: these compactors redact) and read into the work ledger "
        "(build_ledger: every summary carries the ledger of what it replaces). Selecting and "
        "fitting lines, rendering, verifying and reading the summaries a summary merges are "
        "left out, so a replay with these compactions costs more than its floor, and a goal "
        "below the floor cannot be met unless those passes get faster or one of them goes. "
        "Totals rows, "
        f"default ladder: {where or 'none measured'}."
    )


def _ratio(part: float, whole: float) -> float | str:
    return round(part / whole, 2) if whole else "—"


def _percent(part: int, whole: int) -> float | str:
    return round(100 * part / whole, 1) if whole else "—"
