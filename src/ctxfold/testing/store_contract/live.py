"""Reading a session as it grows: streaming in pages, and subscriptions (sync and async)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from ctxfold.errors import InvalidInputError
from ctxfold.events import Event
from ctxfold.storage.base import StoreBase
from ctxfold.storage.checks import PAGE_SIZE
from ctxfold.testing.store_contract._base import ContractBase, turn

# Long enough that a subscription that misses an event fails the test instead of hanging it.
GUARD = 10.0


def _write_slowly(store: StoreBase, count: int, start: int = 0) -> threading.Thread:
    """A thread appending `count` events in batches of 1 to 3, pausing between batches."""

    def work() -> None:
        n = start
        while n < start + count:
            size = min(1 + n % 3, start + count - n)
            store.append("s", [turn(i) for i in range(n, n + size)])
            n += size
            time.sleep(0.002)

    thread = threading.Thread(target=work)
    thread.start()
    return thread


class StreamContract(ContractBase):
    """What every store guarantees about `stream`."""

    def test_stream_yields_what_read_returns(self, store: StoreBase) -> None:
        """Across page boundaries and from any `after`, `stream` yields exactly what `read`
        returns."""
        store.append("s", [turn(n) for n in range(2 * PAGE_SIZE + 7)])
        for after in (0, 1, PAGE_SIZE - 1, PAGE_SIZE, 2 * PAGE_SIZE + 7, 5000):
            assert list(store.stream("s", after=after)) == store.read("s", after=after)
        assert list(store.stream("unknown")) == []

    def test_stream_data_yields_what_stream_does_without_events(self, store: StoreBase) -> None:
        """Across page boundaries and from any `after`, `stream_data` yields each event's seq,
        type and data, as `stream` has them; it checks its arguments at once too."""
        store.append("s", [turn(n) for n in range(PAGE_SIZE + 7)])
        for after in (0, 1, PAGE_SIZE, PAGE_SIZE + 7, 5000):
            expected = [(e.seq, e.type, e.data) for e in store.stream("s", after=after)]
            assert list(store.stream_data("s", after=after)) == expected
        assert list(store.stream_data("unknown")) == []
        with pytest.raises(InvalidInputError, match="after"):
            store.stream_data("s", after=-1)

    def test_a_caller_may_append_while_streaming(self, store: StoreBase) -> None:
        """Appending from inside the loop neither blocks nor breaks the stream."""
        store.append("s", [turn(n) for n in range(5)])
        seen = []
        for event in store.stream("s"):
            seen.append(event.seq)
            store.append("t", [turn(event.seq)])
        assert seen[:5] == [1, 2, 3, 4, 5]
        assert store.last_seq("t") == len(seen)

    @pytest.mark.parametrize("after", [-1, True, "0"])
    def test_stream_checks_its_arguments_at_once(self, store: StoreBase, after: Any) -> None:
        """A bad `after` is refused when `stream` is called, before any iteration."""
        with pytest.raises(InvalidInputError, match="after"):
            store.stream("s", after=after)


class SubscribeContract(ContractBase):
    """What every store guarantees about `subscribe` and `asubscribe`."""

    def test_a_subscriber_sees_every_event_once_in_order(self, store: StoreBase) -> None:
        """The backlog first, then every event a writer thread appends, each once, in order."""
        store.append("s", [turn(-2), turn(-1)])
        writer = _write_slowly(store, 60)
        seen: list[Event] = []
        for event in store.subscribe("s", idle_timeout=GUARD):
            seen.append(event)
            if len(seen) == 62:
                break
        writer.join()
        assert [e.seq for e in seen] == list(range(1, 63))
        assert seen == store.read("s")

    def test_after_skips_what_was_seen(self, store: StoreBase) -> None:
        """`after` starts the subscription past the events already handled."""
        store.append("s", [turn(n) for n in range(5)])
        seen = [e.seq for e in store.subscribe("s", after=3, idle_timeout=0.2)]
        assert seen == [4, 5]

    def test_idle_timeout_ends_a_quiet_subscription(self, store: StoreBase) -> None:
        """With nothing new for `idle_timeout` seconds, the iteration simply ends."""
        store.append("s", [turn(1)])
        assert [e.seq for e in store.subscribe("s", idle_timeout=0.3)] == [1]
        assert list(store.subscribe("s", after=1, idle_timeout=0)) == []

    def test_stop_ends_a_subscription(self, store: StoreBase) -> None:
        """Setting `stop` from another thread ends the iteration within a moment."""
        stop = threading.Event()
        threading.Timer(0.2, stop.set).start()
        store.append("s", [turn(1)])
        assert [e.seq for e in store.subscribe("s", stop=stop)] == [1]

    def test_other_sessions_are_not_followed(self, store: StoreBase) -> None:
        """Appends to other sessions are not yielded."""
        store.append("other", [turn(1)])
        store.append("s", [turn(2)])
        assert [e.data["n"] for e in store.subscribe("s", idle_timeout=0.2)] == [2]

    def test_asubscribe_sees_every_event_once_in_order(self, store: StoreBase) -> None:
        """The async form yields what the sync one does, without blocking the event loop."""

        async def follow() -> tuple[list[int], int]:
            ticks = 0

            async def tick() -> None:
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.01)
                    ticks += 1

            ticker = asyncio.create_task(tick())
            seen = []
            async for event in store.asubscribe("s", idle_timeout=GUARD):
                seen.append(event.seq)
                if len(seen) == 40:
                    break
            ticker.cancel()
            return seen, ticks

        writer = _write_slowly(store, 40)
        seen, ticks = asyncio.run(follow())
        writer.join()
        assert seen == list(range(1, 41))
        assert ticks > 0  # the loop ran other tasks while the subscription waited

    def test_closing_the_store_ends_a_subscription(self, store: StoreBase) -> None:
        """A subscription running when its store is closed ends instead of waiting for ever."""
        store.append("s", [turn(1)])
        seen: list[int] = []

        def follow() -> None:
            seen.extend(e.seq for e in store.subscribe("s"))

        follower = threading.Thread(target=follow, daemon=True)
        follower.start()
        time.sleep(0.2)
        store.close()
        follower.join(GUARD)
        assert not follower.is_alive(), "the subscription went on after the store was closed"
        assert seen == [1]

    @pytest.mark.parametrize(
        "kwargs",
        [{"after": -1}, {"idle_timeout": -1}, {"idle_timeout": "5"}, {"idle_timeout": True}],
    )
    def test_subscribe_checks_its_arguments_at_once(
        self, store: StoreBase, kwargs: dict[str, Any]
    ) -> None:
        """Bad arguments are refused when `subscribe` or `asubscribe` is called."""
        with pytest.raises(InvalidInputError):
            store.subscribe("s", **kwargs)
        with pytest.raises(InvalidInputError):
            store.asubscribe("s", **kwargs)
