"""Writing one summary: what the summarizer is asked, and what ctxfold stores of its answer.

Shared by the `Summarize` rung and by ranges an `on_compact` callback picks, so every summary is
written the same way:

- the request reads the stretch's original messages, masks undone (a cleared tool output is read
  in full), redacted when a redactor is configured, each once: an earlier summary in the stretch
  is handed on as its sections (`SummaryRequest.previous`), never its originals again
  (`summaries-from-originals`, `summaries-compose`);
- the answer is checked for every identifier of the stretch (`identifiers-survive`), and the
  summary that will stand last in the view gets the work ledger of everything up to its end as
  its last section, within its share of the target (`ledger-in-newest-summary`); an older
  summary then gives its copy up (`ledger_moves`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from ctxfold.events import IdentifierCounts, RecordedLedger
from ctxfold.messages import Message
from ctxfold.pipeline.ledgers import (
    complete,
    holder,
    holds_any_ledger,
    holds_ledger,
    ledger_section,
    ledger_through,
    record_ledger,
    section_of,
    stretch_ledger,
    strip_ledger,
)
from ctxfold.pipeline.proposals import Replace
from ctxfold.pipeline.view import WorkingView
from ctxfold.summarizers.identifiers import MAX_IDENTIFIER_CHARS, Verification, verify
from ctxfold.summarizers.ledger import merge
from ctxfold.summarizers.prompt import build_request, merge_sections, parse_sections
from ctxfold.summarizers.record import frame_summary
from ctxfold.summarizers.request import SummaryRequest, Tier

LEDGER_SHARE = 0.25
"""The most the work ledger section may take, as a share of the run's target."""
MIN_LEDGER_TOKENS = 48
"""A ledger section is only written when at least this many tokens are left for it."""
MIN_TEXT_TOKENS = 64
"""Nor when it would leave the summarizer's text fewer tokens than this."""

LEDGER_TIER = "ledger"
"""The tier of a compaction that puts a summary back with its ledger section taken out or made
smaller: no summarizer wrote anything new."""

_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def summary_budget(view: WorkingView, summary_tokens: int = 1024) -> int:
    """The most a summary may take in `view`, in tokens: `summary_tokens`, or an eighth of the
    target when that is less, never under 128. The work ledger has its own share on top."""
    return max(128, min(summary_tokens, view.target // 8))


def ledger_budget(view: WorkingView, share: float = LEDGER_SHARE) -> int:
    """The most the work ledger section may take in `view`, in tokens: `share` of the target."""
    return max(0, int(view.target * share))


def identifier_counts(
    checked: Verification, identifiers: Sequence[str], body: str
) -> IdentifierCounts:
    """How the check of a summary went, for its compaction event: `body` is the text stored
    (checked, then redacted), so an identifier the redactor took out is not listed as held."""
    held = tuple(i for i in dict.fromkeys(identifiers) if i and i in body)
    return IdentifierCounts(len(held), len(checked.added), tuple(checked.left_out), held)


def stretch_request(
    view: WorkingView, start: int, end: int, *, max_tokens: int, tier: Tier
) -> SummaryRequest:
    """The summary request for view positions `[start, end)`.

    Its messages are the stretch's originals (`view.originals`): a tool result that clearing
    masked is read with its full output, so the summary can carry what the agent looked up.
    Earlier summaries stay themselves, and their sections, merged, come as `previous`
    (`summaries-compose`). Its identifiers, which the summary is checked against, are those of
    the originals plus every identifier an earlier summary was checked to hold
    (`identifiers-survive`). `tokens` is the stretch as the view holds it (what the summary
    replaces); `read_tokens` what the summarizer reads.
    """
    synthetic = frozenset(i - start for i in range(start, end) if view.items[i].synthetic)
    originals = view.originals(start, end)
    earlier = [
        parse_sections(originals[p].text)
        for p in sorted(synthetic)
        if view.items[start + p].kind == "summary"
    ]
    read = 0
    for position, message in enumerate(originals):
        item = view.items[start + position]
        tokens = view.counts[start + position]
        if item.kind == "summary" and holds_any_ledger(message.text):
            # Its sections are read; its ledger section is merged as data, never read.
            # Both texts are mostly lines weighed when the summary was written.
            tokens -= view.count_lines(message.text) - view.count_lines(strip_ledger(message.text))
        elif message.text != item.message.text:
            # Masks undone (or redacted): the text read instead of the one the view counted,
            # in the same frame, so no message is counted again (`count_message`).
            tokens += view.count_text(message.text) - view.count_text(item.message.text)
        read += tokens
    request = build_request(
        originals,
        synthetic=synthetic,
        max_tokens=max_tokens,
        tier=tier,
        tokens=view.tokens(start, end),
        previous=merge_sections(earlier) if earlier else None,
        read_tokens=read,
    )
    found = list(request.identifiers)
    for position in sorted(synthetic):
        item = view.items[start + position]
        if item.identifiers is not None:
            found += item.identifiers  # exactly what the earlier summary was checked to hold
            continue
        # Not recorded (a list fed back, an older log): what the earlier summary listed as an
        # identifier or quoted as code stays one, even where the text alone would not show it
        # (a command is recognised where it was run, not in a bullet).
        text = originals[position].text
        found += parse_sections(text).get("Identifiers", [])
        found += _CODE_SPAN.findall(text)
    identifiers = tuple(dict.fromkeys(i for i in found if len(i) <= MAX_IDENTIFIER_CHARS))
    if identifiers != request.identifiers:
        request = replace(request, identifiers=identifiers)
    return request


@dataclass(frozen=True)
class LedgerPart:
    """The work ledger of a summary about to stand for view positions `[start, end)`, and what
    it leaves for the rest of the summary.

    - `data`: the ledger of what the summary stands for, as its compaction records it
      (`record_ledger`: whole data, or the parts it is the merge of);
    - `section`: the section it ends with: the whole ledger up to its end, or (`whole` False)
      the ledger of its own stretch, continued from the summary before it that holds the whole;
      "" when a summary after it holds the whole ledger, or when too little room is left;
    - `budget`: the tokens the summarizer's text may take, and its check as many again.
    """

    data: RecordedLedger
    section: str
    budget: int
    whole: bool = False

    def holds(self, identifier: str) -> bool:
        return identifier in self.section


def ledger_part(
    view: WorkingView, start: int, end: int, budget: int, ledger_tokens: int
) -> LedgerPart:
    """The ledger of a summary of view positions `[start, end)`, planned before the summary
    is asked for: the section comes first, since it is exact (files changed, errors still open,
    the last test run), with at most `ledger_tokens`; the summarizer's text gets what is left,
    at least `MIN_TEXT_TOKENS` and at most `budget`, with as much again for its check, so that
    the summary is always smaller than the stretch (`never-larger`).

    The section holds the whole ledger up to the stretch's end when that fits as well as the
    whole ledger another summary holds now; otherwise it continues that one with the ledger of
    the stretch alone, so that no entry the view shows is given up for a shorter stretch."""
    ledger = stretch_ledger(view, start, end)
    overhead = view.count(Message(view.summary_role, frame_summary("", view.summary_role)))
    room = view.tokens(start, end) - overhead - 16
    cap = min(ledger_tokens, room - 2 * MIN_TEXT_TOKENS)
    section = ""
    whole = False
    if cap >= MIN_LEDGER_TOKENS:
        everything = merge(ledger_through(view, start), ledger)
        section = ledger_section(view, everything, cap, after=end)
        whole = bool(section)
        current = holder(view, (start, end))
        if section and current is not None and not complete(section):
            # A section of an applied summary: lines weighed when it was written.
            held = view.count_lines(section_of(view.items[current].message.text))
            if view.count_lines(section) < held:
                section = ledger_section(view, ledger, cap, after=end, continued=True)
                whole = False
    # A section rendered from entry lines weighed one by one (a continued one under another
    # heading): counted from those lines.
    left = room - (view.count_lines(section) + 2 if section else 0)
    if section and left // 2 < MIN_TEXT_TOKENS:
        section, left, whole = "", room, False
    recorded = record_ledger(view, start, end, ledger)
    return LedgerPart(recorded, section, max(1, min(budget, left // 2)), whole)


@dataclass(frozen=True)
class Written:
    """A summary ready to stand for view positions `[start, end)`.

    - `message`: the framed summary, as the model will read it;
    - `body`: its text before framing (checked, with the ledger section, redacted);
    - `identifiers`: how the identifier check went;
    - `ledger`: the work ledger of what it stands for, as its compaction records it.
    """

    message: Message
    body: str
    identifiers: IdentifierCounts
    ledger: RecordedLedger


def write_summary(
    view: WorkingView,
    start: int,
    end: int,
    text: str,
    identifiers: Sequence[str],
    ledger: LedgerPart,
    *,
    redact: Callable[[str], str] | None = None,
    unheld: Sequence[str] | None = None,
) -> Written:
    """What to store for a summarizer's `text` of view positions `[start, end)`: checked for
    every identifier that the ledger section does not already hold (`verify`, adding what is
    missing within `ledger.budget` tokens), followed by the ledger section, with `redact` and
    then the view's redactor applied, and framed with the log items it stands for. `unheld`,
    when given, is those identifiers, as the caller found them already (the request's)."""
    missing = [i for i in identifiers if not ledger.holds(i)] if unheld is None else unheld
    checked = verify(text, missing, ledger.budget, view.count_text)
    joined = f"{checked.text}\n\n{ledger.section}" if ledger.section else checked.text
    body = view.redact(redact(joined) if redact else joined)
    low, high = view.items[start].span[0], view.items[end - 1].span[1]
    role = view.summary_role
    message = Message(role, frame_summary(body, role, first_seq=low, last_seq=high))
    return Written(message, body, identifier_counts(checked, identifiers, body), ledger.data)


def ledger_moves(view: WorkingView, keep: int) -> Iterator[Replace]:
    """Edits that take the ledger section out of every summary but the one at view position
    `keep`, which now holds the ledger of everything up to its end: each such summary is put
    back without it, smaller, and its compaction keeps the recorded ledger. Identifiers its
    compaction recorded it held that only its old section showed, and that the view shows
    nowhere else, are quoted in its Identifiers section within a third of what the section took
    (`_keep_identifiers`); those that do not fit are reported as left out."""
    if not holds_ledger(view.items[keep].message.text):
        return
    pinned = view.app_pinned()
    for index, item in enumerate(view.items):
        if index == keep or item.kind != "summary" or index in pinned:
            continue
        if not holds_any_ledger(item.message.text):
            continue
        yield _put_back(
            view, index, _keep_identifiers(view, index, strip_ledger(item.message.text))
        )


def shrink_ledger(view: WorkingView, excess: int) -> Replace | None:
    """An edit that gives the summary holding the work ledger a smaller section, shorter by
    about `excess` tokens, its least useful entries going first (read-only files, lookups, old
    commands; files changed and errors still open last); None when no summary holds one, or
    when the section would fall under `MIN_LEDGER_TOKENS`. What the view needs is taken, and
    no more: the rest of the summary stays as it was."""
    index = holder(view)
    if index is None or index in view.app_pinned():
        return None
    item = view.items[index]
    text = item.message.text
    body = strip_ledger(text)
    section = text[len(body) :].strip()
    cap = view.count_lines(section) - excess - 8  # lines weighed when the section was rendered
    if cap < MIN_LEDGER_TOKENS:
        return None
    smaller = ledger_section(view, ledger_through(view, index + 1), cap)
    if not smaller:
        return None
    return _put_back(view, index, _keep_identifiers(view, index, f"{body}\n\n{smaller}"))


def _put_back(view: WorkingView, index: int, text: str) -> Replace:
    """An edit that puts the summary at view position `index` back as `text`, with less of a
    ledger section than it had: no summarizer wrote anything (`LEDGER_TIER`), its compaction
    keeps the recorded ledger, and the identifiers it was recorded to hold that neither `text`
    nor the rest of the view (ledger sections aside) shows are reported as left out."""
    item = view.items[index]
    recorded = item.identifiers
    held = None if recorded is None else tuple(i for i in recorded if i in text)
    others = _text_outside_ledgers(view, index)
    lost = tuple(i for i in (recorded or ()) if i not in text and i not in others)
    return Replace(
        index,
        index + 1,
        item.message.replace(content=text),
        kind="summary",
        protected=frozenset(),
        tier=LEDGER_TIER,
        identifiers=IdentifierCounts(0, 0, lost, held),
        ledger=item.ledger,
    )


def _keep_identifiers(view: WorkingView, index: int, text: str) -> str:
    """`text`, the summary at view position `index` with less of a ledger section than it had,
    with the identifiers it was recorded to hold and that the view no longer shows quoted back
    into its Identifiers section, most useful first, within a third of the tokens it gave up."""
    item = view.items[index]
    if not item.identifiers:
        return text
    elsewhere = "\n".join(
        f"{m.text}\n" + "\n".join(c.arguments for c in m.tool_calls)
        for position, m in enumerate(view.messages)
        if position != index
    )
    gone = [i for i in item.identifiers if i not in text and i not in elsewhere]
    if not gone:
        return text  # nothing to quote back: no need to weigh what the section gave up
    # Both are mostly lines weighed when the summary was written and its section rendered.
    room = (view.count_lines(item.message.text) - view.count_lines(text)) // 3
    if room <= 0:
        return text
    return verify(text, gone, room, view.count_text).text


def _text_outside_ledgers(view: WorkingView, skip: int) -> str:
    """The text of every view message but the one at `skip`, ledger sections left out: a
    ledger section moves on and shrinks, so what only it holds is counted as left out the
    moment it leaves a summary (`identifiers-survive`)."""
    return "\n".join(
        f"{strip_ledger(m.text)}\n" + "\n".join(c.arguments for c in m.tool_calls)
        for position, m in enumerate(view.messages)
        if position != skip
    )
