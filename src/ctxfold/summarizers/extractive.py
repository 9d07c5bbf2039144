"""`ExtractiveSummarizer`: ctxfold's default summarizer, with no model and no network.

It writes the five sections from the stretch itself: the user's requests quoted, the assistant's
statements of choice, one line per tool call with its outcome, every identifier verbatim, and what
is still open. Earlier summaries in the stretch are folded in section by section, which is what
lets summaries be combined. The output is deterministic and fits the request's token budget,
giving up the least useful lines first (old successful calls, then old decisions), identifiers
last.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from ctxfold.messages.frames import frame_kind
from ctxfold.summarizers._substrings import SubstringIndex
from ctxfold.summarizers.identifiers import (
    MAX_IDENTIFIER_CHARS,
    PRIORITY,
    Kind,
    approximate_tokens,
    extract_identifiers,
    kinds_of,
)
from ctxfold.summarizers.prompt import parse_sections, quoted_sections
from ctxfold.summarizers.quoting import code_span
from ctxfold.summarizers.record import Outcome, read_outcome
from ctxfold.summarizers.request import Sections, SummaryRequest, SummaryResult

LOW_PRIORITY = frozenset({"command", "url", "id", "hash"})
"""Identifier kinds given up before work lines; error strings and paths are kept longer."""

QUOTE_CHARS = 200
"""A quoted request or statement is cut after this many characters."""

_SHELL_KEYS = ("command", "cmd", "script")
_CTXFOLD_NOTE = "[ctxfold:"
"""How every note and placeholder ctxfold writes into a history begins."""
_MARKUP = re.compile(r"^\s*(?:</?[\w:-]+[^>]*>|```\w*|[-=#*_]{3,})\s*$")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(])|\n+")
_DECISION = re.compile(
    r"\b(?:decid\w*|chose|choos\w*|instead|rather than|because|so that|ruled out|won't|"
    r"will not|(?:do|does) not need|the (?:fix|solution|approach|issue|problem|cause|bug) "
    r"(?:is|was|will be|seems)|root cause|I will use|I'll use|opt(?:ed)? (?:to|for)|"
    r"confirm(?:ed|s)?)\b",
    re.IGNORECASE,
)
# One of these is in every match of `_DECISION` in ASCII text, once lowered.
_DECISION_WORDS = (
    "decid", "chose", "choos", "instead", "rather than", "because", "so that", "ruled out",
    "won't", "will not", "not need", "the fix", "the solution", "the approach", "the issue",
    "the problem", "the cause", "the bug", "root cause", "i will use", "i'll use", "opt",
    "confirm",
)  # fmt: skip
_PLAN = re.compile(
    r"\b(?:I'll|I will|I'm going to|I am going to|let's|let me|next,? I|now,? I|I need to|"
    r"we need to|next step|plan(?:ning)? to|then I)\b",
    re.IGNORECASE,
)
# One of these is in every match of `_PLAN` in ASCII text, once lowered.
_PLAN_WORDS = (
    "i'll", "i will", "i'm going to", "i am going to", "let's", "let me", "next", "now",
    "i need to", "we need to", "plan", "then i",
)  # fmt: skip
# The command at the start of a work line: "bash: `pytest -x` → ...".
_LABEL = re.compile(r"^(?:THOUGHT|Thought|PLAN|Plan):\s*")
_COMMAND_SPAN = re.compile(r"^\S+: (`+)( ?)(.+?)\2\1(?!`)")
_FAILED_TEST = re.compile(r"^FAILED[ \t]+(\S+)", re.MULTILINE)
_PASSED_TEST = re.compile(r"^(\S+::\S+)[ \t]+PASSED|^PASSED[ \t]+(\S+)", re.MULTILINE)


@dataclass
class _Work:
    text: str
    failed: bool


@dataclass
class _Draft:
    objective: deque[str] = field(default_factory=deque)
    decisions: deque[str] = field(default_factory=deque)
    work: list[_Work] = field(default_factory=list)
    outstanding_old: deque[str] = field(default_factory=deque)
    outstanding: deque[str] = field(default_factory=deque)
    identifiers: list[str] = field(default_factory=list)
    """Ranked, most worth keeping first, once `_read` is done."""
    hidden_work: int = 0
    hidden_failed: int = 0
    failed_ahead: int = 0
    """How many of the oldest work lines are known to have failed (`_drop_work`)."""
    holders: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """For each identifier, the higher-ranked identifiers that hold it verbatim."""
    kinds: dict[str, Kind] = field(default_factory=dict)
    """The kind of each ranked identifier."""
    dropped: set[str] = field(default_factory=set)
    """The identifiers given up since the last `sections()`, which takes them out of
    `identifiers` in one pass (`drop_identifier`)."""
    listed: list[str] = field(default_factory=list)
    """The identifiers the last `sections()` listed, in rank order."""
    # What `sections` needs to tell which identifiers a line of the other sections quotes: an
    # index of the identifiers, and what it found in each line met so far.
    _index: SubstringIndex | None = None
    _quoted: dict[str, tuple[str, ...]] = field(default_factory=dict)
    _spanning: list[str] = field(default_factory=list)
    _spans: dict[str, str] = field(default_factory=dict)
    # Lines already in the objective and decisions, so that a repeated one is seen in O(1).
    _objective_seen: set[str] = field(default_factory=set)
    _decisions_seen: set[str] = field(default_factory=set)

    def add_objective(self, item: str) -> None:
        """Add `item` to the objective unless it is there already."""
        if item not in self._objective_seen:
            self._objective_seen.add(item)
            self.objective.append(item)

    def add_decision(self, item: str) -> None:
        """Add `item` to the decisions unless it is there already."""
        if item not in self._decisions_seen:
            self._decisions_seen.add(item)
            self.decisions.append(item)

    def rank(self, identifiers: list[str]) -> None:
        """Keep `identifiers` ranked (error strings first, then paths, URLs, ids, hashes,
        commands; first seen first within a kind) and note which ones hold which."""
        order = {identifier: i for i, identifier in enumerate(dict.fromkeys(identifiers))}
        self.kinds = kinds = kinds_of(order)
        ranked = sorted(order, key=lambda i: (PRIORITY.index(kinds[i]), order[i]))
        self.identifiers = ranked
        self.dropped = set()
        # Worked out once here, not at every render, and for all the identifiers in one pass
        # over them (`SubstringIndex`): asked one at a time, it is quadratic in their number.
        index = self._use_index(SubstringIndex(ranked))
        holders: dict[str, list[str]] = {}
        for position, held in enumerate(index.holding(ranked)):
            for other in held:
                if other > position:  # ranked after the one that holds it
                    holders.setdefault(ranked[other], []).append(ranked[position])
        self.holders = {identifier: tuple(found) for identifier, found in holders.items()}

    def _use_index(self, index: SubstringIndex) -> SubstringIndex:
        self._index = index
        self._quoted = {}
        # "" is in any text, even an empty one, and one with a newline may span lines.
        self._spanning = [i for i in index.needles if not i or "\n" in i]
        return index

    def drop_identifier(self, identifier: str) -> None:
        """Give up `identifier`: no later `sections()` lists it. (Taking it out of the ranked
        list at once would move the rest of the list, for each of thousands given up.)"""
        self.dropped.add(identifier)

    def sections(self) -> dict[str, list[str]]:
        work = [w.text for w in self.work]
        if self.hidden_work:
            failed = f", {self.hidden_failed} of them failed" if self.hidden_failed else ""
            work.insert(0, f"… {self.hidden_work} earlier tool calls not listed{failed}")
        body = {
            "Objective": list(self.objective),
            "Decisions": list(self.decisions),
            "Work done": work,
            "Outstanding": [*self.outstanding_old, *self.outstanding],
        }
        quoted = self._quoted_identifiers([item for items in body.values() for item in items])
        if self.dropped:  # one pass for all those given up since the last rendering
            self.identifiers = [i for i in self.identifiers if i not in self.dropped]
            self.dropped.clear()
        # An identifier already quoted verbatim in another section, or inside an identifier
        # listed before it, is not listed twice; when that line is given up, it comes back.
        listed: list[str] = []
        seen: set[str] = set()
        holders = self.holders
        for identifier in self.identifiers:
            if identifier in quoted:
                continue
            held_by = holders.get(identifier)
            if held_by is not None and not seen.isdisjoint(held_by):
                continue
            listed.append(identifier)
            seen.add(identifier)
        self.listed = listed
        return {**body, "Identifiers": listed}

    def render(self) -> str:
        """The sections as a summary's text (`render_sections`)."""
        return quoted_sections(self.sections(), self._quote)

    def _quote(self, identifier: str) -> str:
        # Remembered for the whole fit: each rendering quotes thousands of the same identifiers
        # when the stretch is large, more than `code_span` keeps.
        span = self._spans.get(identifier)
        if span is None:
            span = self._spans[identifier] = code_span(identifier)
        return span

    def _quoted_identifiers(self, lines: list[str]) -> set[str]:
        """The identifiers that ``"\n".join(lines)`` holds verbatim. Each line is searched
        once, the first time it is met (`SubstringIndex`), rather than the whole text once per
        identifier at every render; an identifier that holds a newline, which may span lines,
        is looked for in the whole text."""
        index = self._index or self._use_index(SubstringIndex(self.identifiers))
        found = self._quoted
        new = [line for line in dict.fromkeys(lines) if line not in found]
        for line, held in zip(new, index.holding(new), strict=True):
            found[line] = tuple(index.needles[i] for i in held)
        quoted = {identifier for line in lines for identifier in found[line]}
        if self._spanning:
            shown = "\n".join(lines)
            quoted.update(i for i in self._spanning if i in shown)
        return quoted


class ExtractiveSummarizer:
    """Summarizes a stretch without a model: deterministic, offline, free.

    - `max_tokens`: an upper bound on every summary, in tokens (default: only the request's
      `max_tokens` applies).
    - `count`: counts tokens of a text; default `approximate_tokens` (characters / 3);
      pass the compactor's counter for an exact fit.

    When the request says how big the stretch is (`request.tokens`), the summary is also kept
    under half of that, so that it is always clearly smaller than what it replaces; when even
    the five empty sections do not fit, it declines (text None) with a note.

    >>> from ctxfold.summarizers.prompt import build_request
    >>> from ctxfold.messages import Message
    >>> result = ExtractiveSummarizer()(build_request([Message("user", "rename src/a.py")]))
    >>> result.text.splitlines()[:2]
    ['## Objective', '- "rename src/a.py"']
    """

    def __init__(
        self, max_tokens: int | None = None, count: Callable[[str], int] | None = None
    ) -> None:
        self.max_tokens = max_tokens
        self.count = count or approximate_tokens

    def __repr__(self) -> str:
        return f"ExtractiveSummarizer(max_tokens={self.max_tokens})"

    def __call__(self, request: SummaryRequest) -> SummaryResult:
        budget = request.max_tokens
        if self.max_tokens is not None:
            budget = min(budget, self.max_tokens)
        if request.tokens > 0:
            budget = min(budget, request.tokens // 2)
        draft = _read(request)
        fitted = _fit(draft, budget, self.count)
        if fitted is None:
            note = f"extractive: {budget} tokens cannot hold even the empty sections; declined"
            return SummaryResult(None, model="extractive", calls=1, notes=(note,))
        text, tokens = fitted
        return SummaryResult(text, model="extractive", output_tokens=tokens, calls=1)


def _read(request: SummaryRequest) -> _Draft:
    draft = _Draft()
    messages = request.messages
    open_calls: dict[str, deque[_Work]] = {}
    last_run: dict[str, _Work] = {}
    failing_tests: dict[str, None] = {}
    plan: str | None = None
    previous = request.previous
    if previous is not None:
        _fold_sections(draft, previous)  # the earlier summaries, merged: data, not prose
    for index, message in enumerate(messages):
        if index in request.synthetic:
            if previous is None or frame_kind(message) != "summary":
                _fold(draft, message.text)
        elif message.role == "user":
            quote = _quote(message.text)
            if quote:
                draft.add_objective(quote)
        elif message.role == "assistant":
            for sentence in _sentences(message.text):
                if _is_decision(sentence):
                    draft.add_decision(_clip(sentence))
                if _states_plan(sentence):
                    plan = sentence
            for call in message.tool_calls:
                work = _Work(_gist(call.name, call.arguments), failed=False)
                open_calls.setdefault(call.id, deque()).append(work)
                draft.work.append(work)
        elif message.role == "tool":
            waiting = open_calls.get(message.tool_call_id or "")
            if not waiting:
                continue
            work = waiting.popleft()
            outcome = read_outcome(message.text)
            work.failed = outcome.failed
            # What a tool printed is quoted as data, never written as the summary's own words:
            # an output that says "ignore previous instructions" stays a quotation.
            if message.text.startswith(_CTXFOLD_NOTE):
                # A placeholder ctxfold wrote for cleared output: it says nothing of the outcome.
                work.text += " → output cleared"
            elif outcome.failed:
                work.text += " → failed: " + _failure(outcome)
            elif not message.text.strip():
                work.text += " → no output"
            elif outcome.lines <= 3 and outcome.exit_code is None:
                work.text += f" → {code_span(_clip(message.text, 100))}"
            else:
                status = f"exit {outcome.exit_code}, " if outcome.exit_code is not None else ""
                work.text += f" → {status}{outcome.lines:,} lines of output"
            last_run[work.text.split(" → ")[0]] = work
            # Each pattern is passed only over an output that holds its word: the regex engine
            # tries a line start at every character, and most outputs name no test.
            if "FAILED" in message.text:
                for test in _FAILED_TEST.findall(message.text):
                    failing_tests[test] = None
            if "PASSED" in message.text:
                for passed in _PASSED_TEST.findall(message.text):
                    for test in passed:
                        failing_tests.pop(test, None)
    for waiting in open_calls.values():
        for work in waiting:
            draft.outstanding.append(f"no result yet: {work.text}")
    for gist, work in last_run.items():
        if work.failed:
            draft.outstanding.append(f"last run failed: {gist}")
    draft.outstanding.extend(f"failing test: {code_span(test)}" for test in failing_tests)
    if plan:
        draft.outstanding.append(f'last stated plan: "{_clip(plan)}"')
    identifiers = [*draft.identifiers, *request.identifiers]
    if not request.identifiers:
        identifiers.extend(extract_identifiers(messages))
    draft.rank(identifiers)
    return draft


def _fold(draft: _Draft, text: str) -> None:
    """Merge an earlier summary (or note) into the draft, section by section."""
    sections = parse_sections(text)
    if not sections:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        note = next((line for line in lines if not line.startswith("[ctxfold")), None)
        if note:
            draft.work.append(_Work(_clip(note), failed=False))
        return
    _fold_sections(draft, sections)


def _fold_sections(draft: _Draft, sections: Sections) -> None:
    """Merge an earlier summary's sections into the draft: objectives and decisions united,
    work appended, identifiers kept, outstanding items carried as the oldest ones."""
    for item in sections.get("Objective", []):
        draft.add_objective(item)
    for item in sections.get("Decisions", []):
        draft.add_decision(item)
    for item in sections.get("Work done", []):
        draft.work.append(_Work(item, failed="fail" in item.lower()))
        # The command a work line quotes is an identifier the earlier summary was keeping there
        # rather than in its list; keep it if the line itself is given up.
        command = _COMMAND_SPAN.match(item)
        if command:
            draft.identifiers.append(command.group(3))
    draft.identifiers.extend(sections.get("Identifiers", []))
    draft.outstanding_old.extend(
        item for item in sections.get("Outstanding", []) if item not in draft.outstanding_old
    )


def _failure(outcome: Outcome) -> str:
    """How a failed call ended: the exit status in ctxfold's words, the error line quoted."""
    parts = [f"exit {outcome.exit_code}"] if outcome.exit_code is not None else []
    if outcome.error_line:
        parts.append(code_span(outcome.error_line))
    return ": ".join(parts) or "Traceback"


def _is_decision(sentence: str) -> bool:
    # Questions and requests to the user are not choices made, even when they say "confirm".
    lowered = sentence.lower()
    if sentence.endswith("?") or lowered.startswith(("please", "could you", "can you")):
        return False
    if sentence.isascii() and not any(map(lowered.__contains__, _DECISION_WORDS)):
        return False  # most sentences: `in` rules them out at a fraction of a regex pass
    return _DECISION.search(sentence) is not None


def _states_plan(sentence: str) -> bool:
    """Whether `_PLAN` finds a stated plan in `sentence`. An ASCII sentence that holds none of
    its words (once lowered) is not passed to the pattern, which the regex engine tries at
    every position, case-insensitively; most sentences hold none."""
    if sentence.isascii():
        lowered = sentence.lower()
        if not any(map(lowered.__contains__, _PLAN_WORDS)):
            return False
    return _PLAN.search(sentence) is not None


def _gist(name: str, arguments: str) -> str:
    """A call in a few words: a shell command verbatim (when short enough to be an identifier),
    otherwise ``name(key=value, ...)`` with each value cut short."""
    command = _command(arguments)
    if command is not None:
        first = command.strip().split("\n", 1)[0].strip()
        if len(first) <= MAX_IDENTIFIER_CHARS:
            more = " (multi-line)" if "\n" in command.strip() else ""
            return f"{name}: {code_span(first)}{more}"
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return _clip(f"{name}({arguments})", 160)
    if not isinstance(parsed, dict):
        return _clip(f"{name}({arguments})", 160)
    values = ", ".join(
        f"{key}={_clip(json.dumps(value, ensure_ascii=False), 60)}" for key, value in parsed.items()
    )
    return _clip(f"{name}({values})", 200)


def _command(arguments: str) -> str | None:
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return None
    if isinstance(parsed, dict):
        for key in _SHELL_KEYS:
            value = parsed.get(key)
            if isinstance(value, str) and value.strip():
                return value
    return None


def _quote(text: str) -> str:
    """The first meaningful lines of a message, quoted and cut at `QUOTE_CHARS`."""
    lines = [line.strip() for line in text.splitlines()]
    kept = [line for line in lines if line and not _MARKUP.match(line)]
    joined = " ".join(kept)
    return f'"{_clip(joined)}"' if joined else ""


def _sentences(text: str) -> list[str]:
    out = []
    for piece in _SENTENCE.split(text):
        piece = piece.strip()
        if piece.startswith("```") or len(piece) < 12 or _MARKUP.match(piece):
            continue
        out.append(_LABEL.sub("", piece))
    return out


def _clip(text: str, limit: int = QUOTE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _fit(draft: _Draft, budget: int, count: Callable[[str], int]) -> tuple[str, int] | None:
    """Render the draft, giving up the least useful lines until it fits `budget` tokens; the
    text and its tokens, or None when not even the empty sections fit."""
    # Narrative first, then the bare identifiers least worth keeping, then the rest. A summary
    # made of identifiers alone tells the model nothing about what happened; and the engine
    # restores missing identifiers afterwards from a budget of their own.
    steps: list[Callable[[], str | None]] = [
        lambda: _drop_work(draft, keep=8, failed=False),
        lambda: _drop_oldest(draft.decisions, keep=3),
        lambda: _drop_oldest(draft.outstanding_old, keep=0),
        lambda: _drop_middle(draft.objective),
        lambda: _drop_identifier(draft, LOW_PRIORITY),
        lambda: _drop_work(draft, keep=3, failed=False),
        lambda: _drop_work(draft, keep=1, failed=True),
        lambda: _drop_oldest(draft.decisions, keep=0),
        lambda: _drop_work(draft, keep=0, failed=True),
        lambda: _shorten(draft.objective, 80),
        lambda: _drop_oldest(draft.outstanding, keep=1),
        lambda: _drop_last(draft.objective, keep=1),
        lambda: _drop_identifier(draft, None),
        lambda: _drop_oldest(draft.outstanding, keep=0),
        lambda: _drop_oldest(draft.objective, keep=0),
    ]
    # The last text counted, and its tokens: a step with nothing to give up leaves the text as
    # it was, and the next step starts from it without counting it again.
    weighed: tuple[str, int] | None = None
    # Each draft is the last one less a few lines: a counter that can count it from its lines'
    # remembered counts (`TextCounts.lines`, exact) counts only what changed.
    count_draft: Callable[[str], int] = getattr(count, "lines", count)
    for step in steps:
        exhausted = False
        while not exhausted:
            text = draft.render()
            if weighed is None or weighed[0] != text:
                weighed = (text, count_draft(text))
            excess = weighed[1] - budget
            if excess <= 0:
                return weighed
            # Give up about as many tokens as the excess before counting again: one count per
            # batch, not one per line (a line's own count slightly overstates what it frees).
            freed = 0
            while freed < excess:
                removed = step()
                if removed is None:
                    exhausted = True
                    break
                freed += count(removed) + 1
    if draft.hidden_work:
        draft.hidden_work = 0  # even the "… N calls not listed" line is too much
    text = draft.render()
    tokens = weighed[1] if weighed is not None and weighed[0] == text else count_draft(text)
    return (text, tokens) if tokens <= budget else None


def _drop_work(draft: _Draft, keep: int, failed: bool) -> str | None:
    """Give up the oldest work line (a successful one unless `failed`), keeping `keep` lines."""
    work = draft.work
    end = len(work) - keep
    if end <= 0:
        return None
    position = 0
    if not failed:
        # The oldest `failed_ahead` lines are known to have failed: the search for the oldest
        # successful line starts after them, rather than reading them again at every call.
        position = min(draft.failed_ahead, end)
        while position < end and work[position].failed:
            position += 1
        draft.failed_ahead = position
        if position == end:
            return None
    elif draft.failed_ahead:
        draft.failed_ahead -= 1  # the oldest line, given up below, is one of those
    line = work.pop(position)
    draft.hidden_work += 1
    draft.hidden_failed += line.failed
    return line.text


def _drop_oldest(items: deque[str], keep: int) -> str | None:
    return items.popleft() if len(items) > keep else None


def _drop_middle(items: deque[str]) -> str | None:
    """Keep the first request (what started it all) and the latest, give up the ones between."""
    if len(items) <= 2:
        return None
    item = items[1]
    del items[1]
    return item


def _drop_last(items: deque[str], keep: int = 0) -> str | None:
    """Give up the newest item, keeping the first `keep` (the request that started it all)."""
    return items.pop() if len(items) > keep else None


def _drop_identifier(draft: _Draft, kinds: frozenset[str] | None) -> str | None:
    """Give up the lowest-ranked identifier of the last rendering's list (of `kinds`, or of any
    kind). Ranked lowest last, so the one to give up is found near the end."""
    listed = draft.listed
    for position in range(len(listed) - 1, -1, -1):
        identifier = listed[position]
        if kinds is None or draft.kinds[identifier] in kinds:
            del listed[position]
            draft.drop_identifier(identifier)
            return identifier
    return None


def _shorten(items: deque[str], limit: int) -> str | None:
    for position, item in enumerate(items):
        if len(item) > limit:
            items[position] = _clip(item, limit - 1) + ('"' if item.startswith('"') else "")
            return item[len(items[position]) :]
    return None
