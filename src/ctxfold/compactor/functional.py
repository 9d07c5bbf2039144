"""`compact_messages`: the same engine for callers who keep their own message list."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxfold.compactor.core import Compactor
from ctxfold.compactor.report import CompactionReport
from ctxfold.errors import InvalidInputError
from ctxfold.events import NewEvent
from ctxfold.messages import Message
from ctxfold.pipeline.base import Pipeline
from ctxfold.protocols import TokenCounter
from ctxfold.session import Session
from ctxfold.storage.memory import MemoryStore
from ctxfold.tokens import Budget


@dataclass(frozen=True)
class Compacted:
    """A compacted list and what was done to it. `events` are the edits, as they would be
    stored in a session log (compaction and mask events naming 1-based message positions)."""

    messages: list[Message]
    report: CompactionReport

    @property
    def events(self) -> list[NewEvent]:
        return [NewEvent(e.type, e.data) for e in self.report.events]


def compact_messages(
    messages: Sequence[Message],
    budget: Budget,
    *,
    pipeline: Pipeline | None = None,
    summarizer: Any = None,
    counter: TokenCounter | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    redact: Callable[[str], str] | None = None,
    target: int | None = None,
) -> Compacted:
    """Compact a plain list toward `budget`'s target (or `target` tokens) and return the new list.

    Nothing is kept anywhere: an in-memory log holds the run, so the result is exactly what a
    session would project. Under the target the list comes back unchanged (`under-target-no-op`).

    >>> from ctxfold import Budget, Message
    >>> out = compact_messages([Message("system", "Be brief."), Message("user", "hi")],
    ...                        Budget(window=4000))
    >>> [m.role for m in out.messages]
    ['system', 'user']
    """
    session, compactor = _prepare(messages, budget, pipeline, summarizer, counter, tools, redact)
    compactor.compact(session, target=target)
    assert compactor.last_report is not None
    return Compacted(session.messages(), compactor.last_report)


async def acompact_messages(
    messages: Sequence[Message],
    budget: Budget,
    *,
    pipeline: Pipeline | None = None,
    summarizer: Any = None,
    counter: TokenCounter | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    redact: Callable[[str], str] | None = None,
    target: int | None = None,
) -> Compacted:
    """`compact_messages` for async summarizers."""
    session, compactor = _prepare(messages, budget, pipeline, summarizer, counter, tools, redact)
    await compactor.acompact(session, target=target)
    assert compactor.last_report is not None
    return Compacted(session.messages(), compactor.last_report)


def _prepare(
    messages: Sequence[Message],
    budget: Budget,
    pipeline: Pipeline | None,
    summarizer: Any,
    counter: TokenCounter | None,
    tools: Sequence[Mapping[str, Any]] | None,
    redact: Callable[[str], str] | None,
) -> tuple[Session, Compactor]:
    if not messages:
        raise InvalidInputError("compact_messages needs at least one message")
    session = MemoryStore().session("compact")
    session.append(list(messages))
    compactor = Compactor(
        budget,
        pipeline=pipeline,
        summarizer=summarizer,
        counter=counter,
        redact=redact,
        tools=tools,
    )
    return session, compactor
