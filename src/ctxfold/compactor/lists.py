"""`compact_messages`: the same run for callers who keep their own message list, with no store.

The list becomes a snapshot (item ids 1 … n, as a fresh session would number them), the run plans
edits against it, and the edits are folded over the list by the projection, so the result is
exactly what a session holding the list would project.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxfold.compactor.compactor import Compactor
from ctxfold.compactor.drivers import Edge, run_async, run_sync
from ctxfold.compactor.report import CompactionReport
from ctxfold.compactor.run import Planned, RunSettings, plan
from ctxfold.errors import InvalidInputError
from ctxfold.events import Event, NewEvent
from ctxfold.messages import Message
from ctxfold.pipeline.pipeline import Pipeline
from ctxfold.pipeline.strategy import Strategy
from ctxfold.protocols import Summarizer, TokenCounter
from ctxfold.session.projection import Projection
from ctxfold.session.snapshot import Snapshot
from ctxfold.tokens import Budget

LIST_SESSION = "compact"
"""The session id a list's report and edits carry; they are stored nowhere."""


@dataclass(frozen=True)
class Compacted:
    """A compacted list and what was done to it. `events` are the edits, as they would be
    stored in a session log (compaction and mask events naming 1-based message positions)."""

    messages: list[Message]
    report: CompactionReport

    @property
    def events(self) -> list[NewEvent]:
        return [NewEvent(e.type, e.data) for e in self.report.events]

    def __iter__(self) -> Iterator[list[Message] | CompactionReport]:
        """``messages, report = compact_messages(...)`` unpacks the two."""
        yield self.messages
        yield self.report


def compact_messages(
    messages: Sequence[Message],
    budget: Budget,
    *,
    pipeline: Pipeline | Sequence[Strategy] | None = None,
    summarizer: Summarizer | None = None,
    counter: TokenCounter | str | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    redact: Callable[[str], str] | None = None,
    target: float | None = None,
) -> Compacted:
    """Compact a plain list toward `budget`'s target (or `target`) and return the new list.

    Nothing is kept anywhere, and the result is exactly what a session would project. Under the
    target the list comes back unchanged (`under-target-no-op`). `target` is read as
    `Budget.target` is: a number in (0, 1] is a fraction of the budget's window, a larger one a
    count of tokens (see `Compactor.compact`).

    >>> from ctxfold import Budget, Message
    >>> out = compact_messages([Message("system", "Be brief."), Message("user", "hi")],
    ...                        Budget(window=4000))
    >>> [m.role for m in out.messages], out.report.outcome
    (['system', 'user'], 'within-target')
    """
    started = time.perf_counter()
    snapshot, settings, edge = _prepare(
        messages, budget, pipeline, summarizer, counter, tools, redact, target
    )
    planned = run_sync(plan(snapshot, settings), edge)
    return _fold(snapshot, planned, started)


async def acompact_messages(
    messages: Sequence[Message],
    budget: Budget,
    *,
    pipeline: Pipeline | Sequence[Strategy] | None = None,
    summarizer: Summarizer | None = None,
    counter: TokenCounter | str | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    redact: Callable[[str], str] | None = None,
    target: float | None = None,
) -> Compacted:
    """`compact_messages` for async summarizers."""
    started = time.perf_counter()
    snapshot, settings, edge = _prepare(
        messages, budget, pipeline, summarizer, counter, tools, redact, target
    )
    planned = await run_async(plan(snapshot, settings), edge)
    return _fold(snapshot, planned, started)


def _prepare(
    messages: Sequence[Message],
    budget: Budget,
    pipeline: Pipeline | Sequence[Strategy] | None,
    summarizer: Summarizer | None,
    counter: TokenCounter | str | None,
    tools: Sequence[Mapping[str, Any]] | None,
    redact: Callable[[str], str] | None,
    target: float | None,
) -> tuple[Snapshot, RunSettings, Edge]:
    if isinstance(messages, (str, bytes, Mapping)):
        raise InvalidInputError(
            f"compact_messages takes a list of Message values, not a {type(messages).__name__}"
        )
    if not messages:
        raise InvalidInputError("compact_messages needs at least one message")
    for position, message in enumerate(messages):
        if not isinstance(message, Message):
            hint = (
                "; read a provider's messages with from_openai or from_anthropic"
                if isinstance(message, Mapping)
                else ""
            )
            raise InvalidInputError(
                f"message {position} is a {type(message).__name__}, not a ctxfold Message{hint}"
            )
    # A compactor gives the defaults (counter, summarizer, ladder) and reads the budget. A
    # summarizer that raises makes the run decline, keeping the rounds that worked: the caller
    # gets a usable list and a report that says what failed.
    compactor = Compactor(budget, pipeline, summarizer, counter, redact=redact, tools=tools)
    edge = compactor._edge()
    snapshot = Snapshot.of_messages(
        messages, compactor.counter, tools_tokens=edge.tools_tokens, session_id=LIST_SESSION
    )
    return snapshot, compactor._settings("manual", compactor._target(target)), edge


def _fold(snapshot: Snapshot, planned: Planned, started: float) -> Compacted:
    projection = Projection.of_items(snapshot.items, snapshot.base_seq)
    events = []
    for seq, edit in enumerate(planned.edits, snapshot.base_seq + 1):
        event = Event(LIST_SESSION, seq, edit.type, edit.to_data(), 0.0)
        projection.apply(event)
        events.append(event)
    report = planned.report(time.perf_counter() - started, stored=events)
    return Compacted(list(projection.messages()), report)
