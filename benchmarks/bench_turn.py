"""Per turn: append one message and check the budget, through the public API.

What an agent loop calls after every message: `Session.append(message)` and then
`Compactor.should_compact(session)`. Measured on a session in memory (`MemoryStore`) and in a
SQLite file (`SQLiteStore`, its default durability), at each history size, against:

- an exact recount: the history kept as a list and `count_messages` run over all of it after the
  append, with the same counter, the naive way to know the size of the next request;
- langchain-core's way to stay under a budget, when it is installed (the `bench` extra):
  `trim_messages(history, max_tokens=..., token_counter=count_tokens_approximately,
  strategy="last")` after every append, which counts the history again each turn.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks._common import (
    NOT_MEASURED,
    UNAVAILABLE,
    cycled,
    pool,
    ratio,
    rounded,
    summarize,
    timed_ops,
)
from ctxfold.compactor import Compactor
from ctxfold.messages import Message
from ctxfold.messages.openai import to_openai
from ctxfold.protocols import TokenCounter
from ctxfold.storage import MemoryStore, SQLiteStore
from ctxfold.storage.base import StoreBase
from ctxfold.tokens import Budget, TiktokenCounter, count_messages
from ctxfold.tokens import counter as make_counter

FULL_SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (100, 1_000)
PEER_SIZES = (1_000, 10_000)
"""langchain's recount grows with the history: measured up to 10,000 messages."""
MODEL = "gpt-4o"
SETUP_BATCH = 1_000

COLUMNS = [
    "messages in history",
    "ctxfold memory µs",
    "memory p95 µs",
    "ctxfold SQLite µs",
    "SQLite p95 µs",
    "exact recount µs",
    "langchain trim µs",
    "recount / memory",
    "recount / SQLite",
    "langchain / memory",
    "samples mem/sqlite/recount/langchain",
]


def _filled(store: StoreBase, history: Sequence[Message], counter: TokenCounter) -> Any:
    """A session of `store` holding `history`, its tally already built (setup, not timed)."""
    session = store.session("turn", counter=counter)
    for start in range(0, len(history), SETUP_BATCH):
        session.append(history[start : start + SETUP_BATCH])
    return session


def _ctxfold_turns(
    store: StoreBase,
    history: Sequence[Message],
    new: Sequence[Message],
    counter: TokenCounter,
    budget_s: float,
) -> list[float]:
    session = _filled(store, history, counter)
    compactor = Compactor(Budget.for_model(MODEL), counter=counter)
    compactor.should_compact(session)  # the first check folds and counts: a cold start's cost

    def turn(message: Message) -> None:
        session.append(message)
        compactor.should_compact(session)

    return timed_ops(turn, new, budget_s)


def forgetful(counter: TokenCounter) -> TokenCounter:
    """A counter that counts as `counter` does and remembers no counts of long texts.

    The history and the appended messages cycle through a pool, so the same long texts come
    back again and again. ctxfold's exact counter remembers the counts of long texts: with it,
    the recount would time lookups instead of a recount, and ctxfold's own append would look up
    what an agent's new message (new text) makes it count. Every column counts with this one."""
    if isinstance(counter, TiktokenCounter):
        engine = "tiktoken" if counter.engine == "tiktoken" else "auto"
        return TiktokenCounter(counter.encoding_name, engine=engine, remember_chars=0)
    return counter


def _recount_turns(
    history: Sequence[Message], new: Sequence[Message], counter: TokenCounter, budget_s: float
) -> list[float]:
    kept = list(history)

    def turn(message: Message) -> None:
        kept.append(message)
        count_messages(counter, kept)

    return timed_ops(turn, new, budget_s)


def _langchain() -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]] | None:
    try:
        from langchain_core.messages import convert_to_messages, trim_messages
        from langchain_core.messages.utils import count_tokens_approximately
    except ImportError:
        return None
    return convert_to_messages, trim_messages, count_tokens_approximately


def _langchain_turns(
    history: Sequence[Message], new: Sequence[Message], max_tokens: int, budget_s: float
) -> list[float] | None:
    found = _langchain()
    if found is None:
        return None
    convert, trim, approximate = found
    kept = list(convert(to_openai(history)))
    incoming = convert(to_openai(new))
    by_id = {id(m): lc for m, lc in zip(new, incoming, strict=True)}

    def turn(message: Message) -> None:
        kept.append(by_id[id(message)])
        trim(
            kept,
            max_tokens=max_tokens,
            token_counter=approximate,
            strategy="last",
            include_system=True,
            start_on="human",
        )

    return timed_ops(turn, new, budget_s)


def _row(
    size: int,
    pool_messages: Sequence[Message],
    counter: TokenCounter,
    quick: bool,
    folder: Path,
) -> list[object]:
    history = cycled(pool_messages, size)
    new = cycled(pool_messages, 100 if quick else 1_000, start=size)
    budget_s = 0.2 if quick else 3.0
    memory = summarize(_ctxfold_turns(MemoryStore(), history, new, counter, budget_s))
    with SQLiteStore(folder / f"turn-{size}.db") as store:
        sqlite = summarize(_ctxfold_turns(store, history, new, counter, budget_s))
    recount = summarize(_recount_turns(history, new, counter, budget_s))
    peer_sizes = QUICK_SIZES if quick else PEER_SIZES
    max_tokens = Budget.for_model(MODEL).trigger_tokens
    langchain = _langchain_turns(history, new, max_tokens, budget_s) if size in peer_sizes else None
    peer: float | str = rounded(summarize(langchain).median) if langchain else NOT_MEASURED
    if langchain is None and size in peer_sizes:
        peer = UNAVAILABLE
    return [
        size,
        rounded(memory.median),
        rounded(memory.p95),
        rounded(sqlite.median),
        rounded(sqlite.p95),
        rounded(recount.median),
        peer,
        ratio(recount.median, memory.median, 1),
        ratio(recount.median, sqlite.median, 1),
        ratio(peer, memory.median, 1),
        f"{memory.count}/{sqlite.count}/{recount.count}/{len(langchain) if langchain else 0}",
    ]


def run(quick: bool = False) -> dict[str, Any]:
    """Median microseconds of one turn (append + budget check) per history size and store."""
    messages, source = pool()
    counter = forgetful(make_counter("auto"))
    budget = Budget.for_model(MODEL)
    sizes = QUICK_SIZES if quick else FULL_SIZES
    with tempfile.TemporaryDirectory() as folder:
        rows = [_row(size, messages, counter, quick, Path(folder)) for size in sizes]
    return {
        "title": "Per turn: Session.append + Compactor.should_compact against recounting",
        "columns": COLUMNS,
        "rows": rows,
        "notes": [
            f"History and appended messages cycle through {source}; every turn appends a new "
            "message, so the history grows by one per sample.",
            "ctxfold: `session.append(message)` then `compactor.should_compact(session)`, with "
            f"Compactor(Budget.for_model({MODEL!r}), counter=counter('auto')) ({counter.name}), "
            "the counter told to remember no counts of long texts (`remember_chars=0`): the "
            "messages cycle through a pool, and remembered counts would make both ctxfold's "
            "append and the recount look up what new messages make them count. "
            "The session was filled and checked once before timing (setup); a cold start is "
            "measured in its own table. SQLite: a SQLiteStore file with its default durability, "
            "so each append waits for the disk.",
            "Exact recount: `count_messages(counter, history)` over a plain list after appending, "
            f"with the same {counter.name} counter.",
            "langchain: `trim_messages(history, max_tokens=budget.trigger_tokens "
            f"({budget.trigger_tokens:,}), token_counter=count_tokens_approximately, "
            "strategy='last', include_system=True, start_on='human')` on langchain-core "
            "messages converted beforehand (not timed); it counts the history again each turn "
            "(characters / 4, an approximation). Measured at "
            f"{' and '.join(f'{n:,}' for n in PEER_SIZES)} messages only (at the quick sizes in "
            "a quick run).",
            "Medians and 95th percentiles of single turns, in microseconds; each column stops "
            f"after {0.2 if quick else 3.0} s once 3 turns were taken, so the slow columns have "
            "few samples (last column). Ratios divide medians: above 1, ctxfold is faster.",
        ],
    }
