"""Recall over real agent runs replayed live: every ref a note, placeholder or summary printed
resolves to originals really out of view, and every identifier the view lost is found again by
one search."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxfold import Budget, Compactor, MemoryStore
from ctxfold.events import COMPACTION, MASK, MESSAGE, Compaction, Mask
from ctxfold.messages import Message, read_jsonl
from ctxfold.replay import replay
from ctxfold.session import Session
from ctxfold.summarizers.identifiers import extract_identifiers
from ctxfold.testing.transcripts import generate
from ctxfold.tokens import counter
from tests.conftest import transcript_params

COUNTER = counter("auto")
BIG = 1_000_000
"""A bound no test session reaches: every message a ref names comes back whole."""

# The refs as ctxfold prints them (pipeline/notes.py, pipeline/clear.py, summarizers/record.py,
# pipeline/user_messages.py).
PRINTED_RANGE = re.compile(r"log items? \d+(?:–\d+)?")
PRINTED_EVENT = re.compile(r"kept in the session log as event (\d+)")
PRINTED_USER = re.compile(r"kept in the session log as log item (\d+)")
# A cleared result's placeholder, or the marker of an output cut to fit (`CutToFit`).
PRINTED_CALL = re.compile(
    r"was cleared to save context \(call (.+?), [\d,]+ tokens\)"
    r"|, call (\S+?)\)\. The full output is kept in the session log"
)


def replayed(messages: list[Message], window: int) -> Session:
    session = MemoryStore().session("replay", counter=COUNTER)
    replay(session, messages, Compactor(Budget(window=window), counter=COUNTER), counter=COUNTER)
    return session


def in_view(session: Session) -> set[int]:
    """Seqs of the originals the final view shows as they were written (not masked)."""
    originals = {e.seq: e.message for e in session.events() if e.type == MESSAGE}
    return {
        item.id
        for item in session.items()
        if item.kind == "message" and item.message == originals[item.id]
    }


def printed(session: Session) -> Iterator[tuple[str, str, set[int]]]:
    """Every ref ctxfold printed in this session's log, as (kind, ref, the original seqs it
    stands for by the log's own record)."""
    events = session.events()
    results: dict[str, set[int]] = {}
    for event in events:
        if event.type == MESSAGE and event.message.tool_call_id:
            results.setdefault(event.message.tool_call_id, set()).add(event.seq)
    messages = {e.seq for e in events if e.type == MESSAGE}
    for event in events:
        if event.type == COMPACTION:
            compaction = Compaction.from_data(event.data)
            assert compaction.covers is not None
            first, last = compaction.covers
            covered = {s for s in messages if first <= s <= last}
            for ref in PRINTED_RANGE.findall(compaction.message.text.split("\n\n")[0]):
                yield compaction.kind, ref, covered
        elif event.type == MASK:
            for item in Mask.from_data(event.data).items:
                user = PRINTED_USER.search(item.content)
                if user is not None:
                    # A user message shortened past its bound, or a repeat collapsed: it names
                    # the log item that keeps it whole.
                    assert int(user.group(1)) == item.id, item.content
                    yield "user message", f"log item {item.id}", {item.id}
                    continue
                seq = PRINTED_EVENT.search(item.content)
                call = PRINTED_CALL.search(item.content)
                assert seq is not None and call is not None, item.content
                assert int(seq.group(1)) == item.id
                yield "placeholder", f"event {seq.group(1)}", {item.id}
                call_id = call.group(1) or call.group(2)
                yield "placeholder", call_id, results[call_id]


def runs() -> list[Any]:
    demo = generate(seed=3, steps=120)
    params: list[Any] = [pytest.param(demo, w, id=f"demo-{w}") for w in (4_000, 8_000, 16_000)]
    for param in transcript_params():
        path = param.values[0]
        if path is None:  # the skipping placeholder, given a window like the others
            params.append(pytest.param(None, 16_000, marks=param.marks, id="no-transcripts"))
            continue
        params.append(
            pytest.param(path, 16_000, id=f"{path.stem}-16000", marks=pytest.mark.transcripts)
        )
    return params


@pytest.mark.guarantee("printed-refs-resolve")
@pytest.mark.parametrize(("source", "window"), runs())
def test_every_printed_ref_resolves_to_originals_out_of_view(source: Any, window: int) -> None:
    """For every note, placeholder and summary a live replay wrote (those still in view and
    those compacted since), the ref it prints, passed to recall as printed, brings back exactly
    the originals it stands for that are out of view, and none that the view still shows."""
    messages = read_jsonl(source) if isinstance(source, Path) else source
    session = replayed(messages, window)
    shown = in_view(session)
    kinds: dict[str, int] = {}
    for kind, ref, stands_for in printed(session):
        kinds[kind] = kinds.get(kind, 0) + 1
        found = session.recall(ref=ref, max_tokens=BIG)
        assert found.seqs, f"{ref!r} ({kind}) brought nothing back"
        assert set(found.seqs).isdisjoint(shown), f"{ref!r} returned messages still in view"
        assert set(found.seqs) == stands_for - shown, ref
        assert found.left_out == () and found.cut == ()
    edits = sum(1 for e in session.events() if e.type in (COMPACTION, MASK))
    assert sum(kinds.values()) >= edits, "every compaction and mask prints a ref"


def view_text(messages: list[Message]) -> str:
    """What the model reads: contents, tool names, call ids, arguments raw and decoded."""
    parts: list[str] = []
    for message in messages:
        parts.append(message.text)
        parts.append(message.tool_call_id or "")
        for call in message.tool_calls:
            parts += [call.id, call.name, call.arguments]
            with contextlib.suppress(ValueError):
                parts += list(_strings(json.loads(call.arguments)))
    return "\n".join(parts)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@pytest.mark.transcripts
@pytest.mark.guarantee("recall-finds-identifiers")
@pytest.mark.parametrize("window", [8_000, 16_000, 32_000])
def test_every_identifier_out_of_view_is_found_by_one_recall(window: int) -> None:
    """Replayed live at 16k and 32k with the default ladder (and 8k, where the view loses far
    more), every identifier that user and assistant messages hold and the final view no longer
    shows is found by one ``recall(query=<identifier>)``: a message that holds it is among the
    results."""
    params = [p for p in transcript_params() if p.values[0] is not None]
    if not params:
        pytest.skip("the shared transcripts are absent")
    figures: list[str] = []
    lost_total = found_total = 0
    for param in params:
        path: Path = param.values[0]
        messages = read_jsonl(path)
        session = replayed(messages, window)
        seqs = [e.seq for e in session.events() if e.type == MESSAGE]
        homes: dict[str, set[int]] = {}
        for seq, message in zip(seqs, messages, strict=True):
            if message.role in ("user", "assistant"):
                for identifier in extract_identifiers(message):
                    homes.setdefault(identifier, set()).add(seq)
        view = view_text(session.messages())
        lost = [i for i in homes if i not in view]
        missed = [i for i in lost if not set(session.recall(i).seqs) & homes[i]]
        lost_total += len(lost)
        found_total += len(lost) - len(missed)
        figures.append(f"{path.stem}: {len(lost) - len(missed)}/{len(lost)}")
        assert missed == [], f"{path.stem} at {window:,}: not found by recall: {missed}"
    print(f"recall at {window:,}: {found_total}/{lost_total} found ({'; '.join(figures)})")


LEDGER_CITATION = re.compile(r"log \d+(?:–\d+)?(?:, (?:…|\d+))*")


@pytest.mark.guarantee("printed-refs-resolve")
def test_every_citation_of_a_work_ledger_resolves() -> None:
    """The work ledger of a summarized stretch cites log items ("log 12", "log 41–57",
    "log 3, …, 40, 41"); recall takes each as printed and brings back what it names, all of it
    out of view."""
    from ctxfold.summarizers.ledger import build_ledger, render

    session = replayed(generate(seed=5, steps=80), 8_000)
    shown = in_view(session)
    events = session.events()
    originals = [(e.seq, e.message) for e in events if e.type == MESSAGE]
    cited = 0
    for event in events:
        if event.type != COMPACTION or event.data.get("kind") == "note":
            continue
        covers = Compaction.from_data(event.data).covers
        assert covers is not None
        first, last = covers
        ledger = build_ledger([(seq, m) for seq, m in originals if first <= seq <= last])
        text = render(ledger, 4_000, COUNTER.count_text)
        text = text.replace('("log 12")', "")  # the heading's example of a citation
        for ref in LEDGER_CITATION.findall(text):
            found = session.recall(ref=ref, max_tokens=BIG)
            assert found.seqs, ref
            assert set(found.seqs).isdisjoint(shown)
            assert all(first <= seq <= last for seq in found.seqs)
            cited += 1
    assert cited > 10
