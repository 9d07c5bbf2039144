"""The work ledger of a view, for the newest summary: read off the originals, merged with the
ledgers earlier compactions recorded, never taken from a summary's prose.

Each compaction records the ledger of what its message stands for (`Compaction.ledger`, carried
on the projected item as `Item.ledger`). So the ledger of any stretch of the view is the merge,
in order, of the ledgers of its items: an original message is read afresh (masks undone,
redacted when a redactor is configured), a summary or a note brings the ledger its compaction
recorded (a log written before ledgers were recorded brings none). Merging is structural and
associative (`ctxfold.summarizers.ledger.merge`), so ten compactions in a row lose no entry
(`ledger-in-newest-summary`).

A summary that takes in summaries or notes records their ledgers by reference, and the ledger
of each run of originals between them as data (`record_ledger`, `ctxfold.events.LedgerParts`);
its item holds the parts, merged here when read. Recording the whole ledger each time made a
long session's log grow with the square of its length (a 1,000-step generated session at a 16k
window: 9.8 MB of compaction events for 2.7 MB of messages).

The rendered ``## Work ledger`` section goes into the summary that stands last in the view, and
holds the ledger of everything up to its end; a summary written before it in the view no longer
needs its own copy (`strip_ledger`). A summary of a stretch too short to hold the whole ledger
as well as the summary before it does gets a ``## Work ledger, continued`` section instead: the
ledger of its own stretch, which the next summary to combine them merges in.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

from ctxfold._memo import IdentityMemo
from ctxfold.errors import InvalidInputError
from ctxfold.events import LedgerParts, RecordedLedger
from ctxfold.messages import Message
from ctxfold.pipeline.view import WorkingView
from ctxfold.summarizers.ledger import Ledger, build_ledger, from_data, merge, render, to_data
from ctxfold.summarizers.ledger.render import HEADING
from ctxfold.summarizers.redact import redact_together, redacted

SECTION_BREAK = f"\n\n{HEADING}"
"""Where a summary's ledger section begins: it is always the summary's last section."""
CONTINUED = f"{HEADING}, continued"
"""The heading of a section that holds the ledger of its summary's own stretch only."""
_WHOLE = re.compile(rf"\n\n{re.escape(HEADING)}(?=\n| \()")
_LEFT_OUT = re.compile(r"^\[[\d,]+ more (?:ledger entries were left out|in log)", re.MULTILINE)


def stretch_ledger(view: WorkingView, start: int, end: int) -> Ledger:
    """The ledger of what view positions `[start, end)` stand for (see the module docstring)."""
    redact = view.rules.redact
    if redact is not None:
        # The messages to read, redacted together: each is then read on its own.
        unread = [
            item.unmasked
            for item in view.items[start:end]
            if not item.synthetic and not _LEDGERS.holds((item.unmasked, redact), item.id)
        ]
        redact_together(unread, redact)
    out = Ledger()
    for index in range(start, end):
        try:
            out = merge(out, item_ledger(view, index))
        except InvalidInputError:
            # A recorded ledger that overlaps what comes after it (a log edited by hand) is
            # derived data: leaving it out costs ledger entries, never the compaction.
            continue
    return out


def ledger_through(view: WorkingView, end: int) -> Ledger:
    """The ledger of everything before view position `end`, the system block aside."""
    return stretch_ledger(view, view.structure().system_end, end)


def item_ledger(view: WorkingView, index: int) -> Ledger:
    """The ledger of the item at view position `index`: read from its original message, or the
    one its compaction recorded."""
    item = view.items[index]
    if item.synthetic:
        return read_record(item.ledger) if item.ledger is not None else Ledger()
    return _read(item.id, item.unmasked, view.rules.redact)


def ledger_section(
    view: WorkingView,
    ledger: Ledger,
    max_tokens: int,
    *,
    after: int | None = None,
    continued: bool = False,
) -> str:
    """`ledger` rendered as a ``## Work ledger`` section (``## Work ledger, continued`` when
    `continued`) of at most `max_tokens` tokens, for a summary that will stand before view
    position `after`: "" when a summary at or after it holds the whole ledger already, or when
    not even the heading fits. The task is left out while its message is still in the view as
    it was sent."""
    if after is not None and any(
        item.kind == "summary" and holds_ledger(item.message.text) for item in view.items[after:]
    ):
        return ""
    if max_tokens <= 0:
        return ""
    task = ledger.task
    if task is not None and any(
        item.id == task.seq and item.original is None and not item.synthetic for item in view.items
    ):
        ledger = ledger.without_task()
    # The run's counter itself when it remembers counts (`view.count_text` gives what it gives):
    # the same at every compaction, so an entry weighed by one render is not weighed again.
    count = view.rules.count_text or view.count_text
    text = render(ledger, max_tokens, count, count_whole=view.count_lines)
    if not text.startswith(HEADING):
        return ""
    return CONTINUED + text[len(HEADING) :] if continued else text


def ledger_data(ledger: Ledger) -> dict[str, Any]:
    """`ledger` as the JSON data a compaction records. The data is remembered as standing for
    `ledger`, so that the item it lands on is not parsed back at the next compaction."""
    data = to_data(ledger)
    _LEDGERS.get((data, None), lambda: ledger, 0)
    _MADE.put(data, ledger)
    return data


def record_ledger(view: WorkingView, start: int, end: int, ledger: Ledger) -> RecordedLedger:
    """What a compaction that replaces view positions `[start, end)` records of `ledger`, the
    ledger of what it stands for: when the stretch holds summaries or notes with a recorded
    ledger, the parts `ledger` is the merge of (`LedgerParts`): those ledgers, by reference,
    and the ledger of each run of originals between them, so the log never copies a ledger it
    holds already; else the whole ledger's data (`ledger_data`). Either is remembered as
    standing for `ledger`. Parts that would not merge back into `ledger` exactly (a recorded
    ledger out of order, which `stretch_ledger` left out) are not used."""
    items = view.items
    if not any(items[i].synthetic and items[i].ledger is not None for i in range(start, end)):
        # No recorded ledger to refer to: the whole ledger, without merging its items again.
        return ledger_data(ledger)
    parts: list[RecordedLedger] = []
    run = Ledger()
    for index in range(start, end):
        item = view.items[index]
        if item.synthetic and item.ledger is not None:
            if run.first_seq is not None:
                parts.append(ledger_data(run))
                run = Ledger()
            parts.append(item.ledger)
            continue
        try:
            run = merge(run, item_ledger(view, index))
        except InvalidInputError:
            return ledger_data(ledger)
    if not parts:  # no recorded ledger to refer to
        return ledger_data(ledger)
    if run.first_seq is not None:
        parts.append(ledger_data(run))
    recorded: RecordedLedger = parts[0] if len(parts) == 1 else LedgerParts(tuple(parts))
    if read_record(recorded) != ledger:
        return ledger_data(ledger)
    _LEDGERS.get((recorded, None), lambda: ledger, 0)
    return recorded


def strip_ledger(text: str) -> str:
    """`text` (a summary, framed or not) without its ledger section, whole or continued."""
    at = text.find(SECTION_BREAK)
    return text if at < 0 else text[:at].rstrip()


def holds_ledger(text: str) -> bool:
    """Whether a summary's `text` holds the whole ledger (not a continued section)."""
    return _WHOLE.search(text) is not None


def holds_any_ledger(text: str) -> bool:
    """Whether a summary's `text` holds a ledger section, whole or continued."""
    return SECTION_BREAK in text


def section_of(text: str) -> str:
    """The ledger section of a summary's `text` ("" when it has none)."""
    at = text.find(SECTION_BREAK)
    return "" if at < 0 else text[at:].strip()


def complete(section: str) -> bool:
    """Whether a rendered section left no entry out."""
    return _LEFT_OUT.search(section) is None


def holder(view: WorkingView, outside: tuple[int, int] = (0, 0)) -> int | None:
    """The position of the last summary holding the whole ledger, outside `[start, end)`."""
    start, end = outside
    found = None
    for index, item in enumerate(view.items):
        if start <= index < end:
            continue
        if item.kind == "summary" and holds_ledger(item.message.text):
            found = index
    return found


# -- caches ----------------------------------------------------------------------------------
# The last ledgers read, keyed by the identity of what they were read from (a message and the
# redactor, or recorded data) and by the message's seq.
_LEDGERS: IdentityMemo[Ledger] = IdentityMemo(maxsize=65_536)


def _read(seq: int, message: Message, redact: Callable[[str], str] | None) -> Ledger:
    def make() -> Ledger:
        return build_ledger([(seq, redacted(message, redact) if redact else message)])

    return _LEDGERS.get((message, redact), make, seq)


def read_record(data: RecordedLedger) -> Ledger:
    """The ledger a compaction recorded (`Item.ledger`): its data read, or its parts merged;
    remembered by identity. Data that cannot be read is an empty ledger: derived data costs
    entries, never the compaction."""
    if isinstance(data, LedgerParts):
        parts = data
        return _LEDGERS.get((parts, None), lambda: _merged(parts), 0)

    def make() -> Ledger:
        made = _MADE.find(data)
        if made is not None:
            return made
        try:
            return from_data(data)
        except InvalidInputError:
            return Ledger()  # unreadable derived data: the entries go, the compaction does not

    return _LEDGERS.get((data, None), make, 0)


def _merged(parts: LedgerParts) -> Ledger:
    # Each part in turn: data is read, parts already merged are taken as they are (most often
    # the summary just before, which a new summary takes in), other parts are opened to their
    # data, without recursion: parts nest as deep as the session has compactions.
    ledger = Ledger()
    for part in parts.parts:
        if isinstance(part, LedgerParts) and not _LEDGERS.holds((part, None), 0):
            pieces = [read_record(leaf) for leaf in part.leaves()]
        else:
            pieces = [read_record(part)]
        for piece in pieces:
            try:
                ledger = merge(ledger, piece)
            except InvalidInputError:
                continue  # parts out of order (a log edited by hand): derived data, entries go
    # The ledger of a summary: the view's ledger at the next compaction is merged from it.
    return ledger.folded()


class _MadeLedgers:
    """The ledgers `ledger_data` turned into data lately, found again from an equal copy of
    their data. A compaction event's data comes back from the store as a copy (what a read
    gives), so the identity memo misses it once per landed compaction, and reading the copy
    back (`from_data`) was a parse of every command of the ledger; comparing it with the data
    it equals is one C-level walk. Keyed by the seqs and sizes, so only one candidate is
    compared; a candidate that is not equal is not taken."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._entries: dict[tuple[object, ...], tuple[Mapping[str, Any], Ledger]] = {}
        self._lock = threading.Lock()

    def put(self, data: Mapping[str, Any], ledger: Ledger) -> None:
        with self._lock:
            entries = self._entries
            entries.pop(key := _key(data), None)
            entries[key] = (data, ledger)
            if len(entries) > self.maxsize:
                del entries[next(iter(entries))]

    def find(self, data: Mapping[str, Any]) -> Ledger | None:
        with self._lock:
            found = self._entries.get(_key(data))
        return found[1] if found is not None and found[0] == data else None


def _key(data: Mapping[str, Any]) -> tuple[object, ...]:
    commands, decisions = data.get("commands"), data.get("decisions")
    return (
        data.get("first_seq"),
        data.get("last_seq"),
        len(commands) if isinstance(commands, list) else None,
        len(decisions) if isinstance(decisions, list) else None,
    )


_MADE = _MadeLedgers(maxsize=4_096)
