"""The log itself: appends, reads, sessions, optimistic concurrency, bad input and lifetime."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from ctxfold.errors import ConflictError, CtxfoldError, InvalidInputError
from ctxfold.events import Event, FreshEvent, NewEvent
from ctxfold.storage.base import StoreBase
from ctxfold.storage.checks import MAX_SESSION_ID_BYTES
from ctxfold.testing.store_contract._base import UNICODE_TEXTS, ContractBase, turn

# A list where a mapping belongs: what a caller without a type checker might pass.
_NOT_A_MAPPING: Any = [1, 2]


class LogContract(ContractBase):
    """What every store guarantees about its log."""

    # -- appending and reading -------------------------------------------------------------

    def test_a_new_store_is_empty(self, store: StoreBase) -> None:
        """A new store lists no sessions; an unknown session has last seq 0 and no events."""
        assert store.sessions() == []
        assert store.last_seq("nobody") == 0
        assert store.read("nobody") == []

    def test_seqs_start_at_one_and_stay_contiguous(self, store: StoreBase) -> None:
        """Seqs run 1, 2, 3 … across appends of any size, with no gap."""
        store.append("s", [turn(1)])
        store.append("s", [turn(2), turn(3), turn(4)])
        store.append("s", [turn(5)])
        assert [e.seq for e in store.read("s")] == [1, 2, 3, 4, 5]
        assert store.last_seq("s") == 5

    def test_read_returns_events_in_seq_order_with_their_data(self, store: StoreBase) -> None:
        """Events come back in the order they were appended, with their session, type and data."""
        store.append("s", [NewEvent("message", {"message": {"role": "user", "content": "hi"}})])
        store.append("s", [NewEvent("app/note", {"nested": {"list": [1, 2.5, None, True]}})])
        events = store.read("s")
        assert [(e.session_id, e.type) for e in events] == [("s", "message"), ("s", "app/note")]
        assert events[0].data == {"message": {"role": "user", "content": "hi"}}
        assert events[1].data == {"nested": {"list": [1, 2.5, None, True]}}

    def test_append_returns_exactly_what_read_returns(self, store: StoreBase) -> None:
        """The events `append` returns equal the ones `read` gives back later, timestamps too."""
        appended = store.append("s", [turn(1, x="y"), turn(2)])
        appended += store.append("s", [turn(3, f=0.1)])
        assert store.read("s") == appended

    def test_created_at_is_epoch_seconds_of_the_append(self, store: StoreBase) -> None:
        """`created_at` is the append's time in seconds since the epoch, the same for a batch."""
        before = time.time()
        events = store.append("s", [turn(1), turn(2)])
        after = time.time()
        assert all(isinstance(e.created_at, float) for e in events)
        assert before - 1 <= events[0].created_at <= after + 1
        assert events[0].created_at == events[1].created_at

    def test_read_after_returns_only_later_events(self, store: StoreBase) -> None:
        """`read(after=n)` returns the events with seq above n, and nothing past the end."""
        store.append("s", [turn(n) for n in range(1, 8)])
        assert [e.seq for e in store.read("s", after=0)] == list(range(1, 8))
        assert [e.seq for e in store.read("s", after=4)] == [5, 6, 7]
        assert store.read("s", after=7) == []
        assert store.read("s", after=100) == []

    def test_events_with_equal_content_are_distinct_entries(self, store: StoreBase) -> None:
        """Appending the same event twice stores it twice; a log never deduplicates."""
        store.append("s", [turn(1), turn(1)])
        store.append("s", [turn(1)])
        assert [e.data for e in store.read("s")] == [{"n": 1}] * 3

    def test_a_thousand_events_in_one_append(self, store: StoreBase) -> None:
        """One append of 1,000 events lands whole, seqs 1 to 1,000 in order."""
        store.append("s", [turn(n) for n in range(1000)])
        events = store.read("s")
        assert [e.seq for e in events] == list(range(1, 1001))
        assert [e.data["n"] for e in events] == list(range(1000))

    def test_an_empty_append_writes_nothing(self, store: StoreBase) -> None:
        """Appending no events returns [] and creates no session."""
        assert store.append("s", []) == []
        assert store.sessions() == []
        assert store.last_seq("s") == 0

    # -- sessions --------------------------------------------------------------------------

    def test_sessions_are_isolated(self, store: StoreBase) -> None:
        """Each session has its own seqs and events; appending to one never touches another."""
        store.append("a", [turn(1), turn(2)])
        store.append("b", [turn(10)])
        store.append("a", [turn(3)])
        assert [e.data["n"] for e in store.read("a")] == [1, 2, 3]
        assert [(e.seq, e.data["n"]) for e in store.read("b")] == [(1, 10)]
        assert {e.session_id for e in store.read("a")} == {"a"}

    def test_sessions_lists_every_session_sorted(self, store: StoreBase) -> None:
        """`sessions()` lists each session with events once, sorted as Python sorts strings."""
        names = ["zeta", "Alpha", "alpha", "b-2", "b-10", "é", "日本", "🚀", "a b"]
        for name in names:
            store.append(name, [turn(1)])
        store.append("alpha", [turn(2)])
        assert store.sessions() == sorted(names)

    # -- optimistic concurrency ------------------------------------------------------------

    def test_expected_seq_zero_starts_a_new_session(self, store: StoreBase) -> None:
        """`expected_seq=0` appends to a session that has no events yet."""
        events = store.append("s", [turn(1)], expected_seq=0)
        assert [e.seq for e in events] == [1]

    def test_expected_seq_zero_conflicts_with_an_existing_session(self, store: StoreBase) -> None:
        """`expected_seq=0` on a session that has events raises ConflictError with the real seq."""
        store.append("s", [turn(1), turn(2)])
        with pytest.raises(ConflictError) as caught:
            store.append("s", [turn(3)], expected_seq=0)
        assert (caught.value.session_id, caught.value.expected_seq) == ("s", 0)
        assert caught.value.actual_seq == 2
        assert store.last_seq("s") == 2

    def test_matching_expected_seq_appends(self, store: StoreBase) -> None:
        """An `expected_seq` equal to the last seq appends after it."""
        store.append("s", [turn(1), turn(2)])
        events = store.append("s", [turn(3), turn(4)], expected_seq=2)
        assert [e.seq for e in events] == [3, 4]

    def test_stale_expected_seq_conflicts_and_writes_nothing(self, store: StoreBase) -> None:
        """An `expected_seq` below the last seq raises ConflictError and appends nothing."""
        store.append("s", [turn(1), turn(2), turn(3)])
        with pytest.raises(ConflictError) as caught:
            store.append("s", [turn(99), turn(100)], expected_seq=1)
        assert (caught.value.expected_seq, caught.value.actual_seq) == (1, 3)
        assert [e.data["n"] for e in store.read("s")] == [1, 2, 3]

    def test_future_expected_seq_conflicts(self, store: StoreBase) -> None:
        """An `expected_seq` above the last seq raises ConflictError too; seqs never skip."""
        store.append("s", [turn(1)])
        with pytest.raises(ConflictError) as caught:
            store.append("s", [turn(2)], expected_seq=5)
        assert caught.value.actual_seq == 1
        with pytest.raises(ConflictError):
            store.append("new", [turn(1)], expected_seq=1)
        assert store.last_seq("s") == 1
        assert store.sessions() == ["s"]

    def test_an_empty_append_still_checks_expected_seq(self, store: StoreBase) -> None:
        """An empty append with a stale `expected_seq` raises ConflictError."""
        store.append("s", [turn(1)])
        with pytest.raises(ConflictError):
            store.append("s", [], expected_seq=0)

    def test_threads_appending_to_one_session_lose_nothing(self, store: StoreBase) -> None:
        """Eight threads appending at once: every event lands once, seqs contiguous."""
        threads, per_thread = 8, 25
        barrier = threading.Barrier(threads)
        errors: list[BaseException] = []

        def work(worker: int) -> None:
            try:
                barrier.wait()
                for n in range(per_thread):
                    store.append("s", [turn(n, worker=worker)])
            except BaseException as exc:  # the assertion below reports it
                errors.append(exc)

        pool = [threading.Thread(target=work, args=(w,)) for w in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        assert errors == []
        events = store.read("s")
        assert [e.seq for e in events] == list(range(1, threads * per_thread + 1))
        seen = sorted((e.data["worker"], e.data["n"]) for e in events)
        assert seen == [(w, n) for w in range(threads) for n in range(per_thread)]

    def test_racing_appends_with_one_expected_seq_let_exactly_one_in(
        self, store: StoreBase
    ) -> None:
        """Threads released together, all expecting the same seq: one lands, the rest conflict."""
        store.append("s", [turn(0)])
        threads = 6
        barrier = threading.Barrier(threads)
        landed: list[list[Event]] = []
        conflicts: list[ConflictError] = []

        def work(worker: int) -> None:
            barrier.wait()
            try:
                landed.append(store.append("s", [turn(1, worker=worker)] * 2, expected_seq=1))
            except ConflictError as exc:
                conflicts.append(exc)

        pool = [threading.Thread(target=work, args=(w,)) for w in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        assert len(landed) == 1
        assert len(conflicts) == threads - 1
        assert all(c.actual_seq == 3 for c in conflicts)
        assert store.read("s")[1:] == landed[0]

    # -- bad input -------------------------------------------------------------------------

    @pytest.mark.parametrize("session_id", ["", None, 7, b"bytes", "nul\x00id", "lone\ud800"])
    def test_a_bad_session_id_is_refused(self, store: StoreBase, session_id: Any) -> None:
        """A session id that is not a non-empty, storable string raises InvalidInputError."""
        with pytest.raises(InvalidInputError, match="session id"):
            store.append(session_id, [turn(1)])
        with pytest.raises(InvalidInputError):
            store.read(session_id)
        assert store.sessions() == []

    def test_a_session_id_at_the_limit_is_stored(self, store: StoreBase) -> None:
        """A session id of exactly the limit in bytes (here two-byte characters) works."""
        longest = "é" * (MAX_SESSION_ID_BYTES // 2)
        store.append(longest, [turn(1)])
        assert store.sessions() == [longest]
        assert [e.session_id for e in store.read(longest)] == [longest]

    @pytest.mark.parametrize("chars", ["a", "é", "🚀"])
    def test_a_session_id_over_the_limit_is_refused(self, store: StoreBase, chars: str) -> None:
        """One byte over the session-id limit is refused by every call, naming the limit, and
        nothing is written."""
        size = len(chars.encode())
        too_long = chars * (MAX_SESSION_ID_BYTES // size + 1)
        for call in (
            lambda: store.append(too_long, [turn(1)]),
            lambda: store.append(too_long, [turn(1)], idempotency_key="k"),
            lambda: store.read(too_long),
            lambda: store.last_seq(too_long),
            lambda: list(store.stream(too_long)),
            lambda: store.search(too_long, "word"),
        ):
            with pytest.raises(InvalidInputError, match=f"limit is {MAX_SESSION_ID_BYTES:,} bytes"):
                call()
        assert store.sessions() == []

    @pytest.mark.parametrize("value", [-1, True, "3", 1.5])
    def test_a_bad_seq_argument_is_refused(self, store: StoreBase, value: Any) -> None:
        """`expected_seq` and `after` must be integers of 0 or more; anything else is an error."""
        with pytest.raises(InvalidInputError, match="expected_seq"):
            store.append("s", [turn(1)], expected_seq=value)
        with pytest.raises(InvalidInputError, match="after"):
            store.read("s", after=value)
        assert store.last_seq("s") == 0

    @pytest.mark.parametrize(
        ("bad", "says"),
        [
            ({"type": "turn"}, "expected a NewEvent"),
            (NewEvent("turn", _NOT_A_MAPPING), "JSON object"),
            (NewEvent("nul\x00type"), "NUL"),
            (NewEvent("turn", {"text": "lone \udc80 surrogate"}), "not valid unicode"),
        ],
    )
    def test_a_bad_event_in_the_middle_writes_nothing(
        self, store: StoreBase, bad: Any, says: str
    ) -> None:
        """A batch with one bad event is refused whole, naming its position; nothing is written."""
        store.append("s", [turn(0)])
        with pytest.raises(InvalidInputError, match=f"event 1 of the batch.*{says}"):
            store.append("s", [turn(1), bad, turn(2)])
        assert [e.data["n"] for e in store.read("s")] == [0]

    def test_data_changed_after_the_event_was_made_is_checked_again(self, store: StoreBase) -> None:
        """Data that stopped being JSON (a NaN, an object) after its event was made is refused."""
        nan_data: dict[str, Any] = {"n": 1}
        nan = NewEvent("turn", nan_data)
        nan_data["score"] = float("nan")
        obj_data: dict[str, Any] = {"n": 2}
        obj = NewEvent("turn", obj_data)
        obj_data["when"] = object()
        for bad in (nan, obj):
            with pytest.raises(InvalidInputError, match="not JSON"):
                store.append("s", [turn(0), bad])
        assert store.read("s") == []

    def test_data_that_contains_itself_is_refused(self, store: StoreBase) -> None:
        """Data that holds itself (no JSON can) is refused, naming the event; nothing lands."""
        looped: dict[str, Any] = {"n": 1}
        looped["again"] = [looped]
        with pytest.raises(InvalidInputError, match=r"event 1 of the batch.*not JSON"):
            store.append("s", [turn(0), NewEvent("turn", looped)])
        assert store.read("s") == []

    def test_events_must_be_a_list(self, store: StoreBase) -> None:
        """Passing one event instead of a list is an error that says so."""
        with pytest.raises(InvalidInputError, match="list of NewEvent"):
            one: Any = turn(1)
            store.append("s", one)

    # -- payloads --------------------------------------------------------------------------

    def test_a_five_megabyte_event_round_trips(self, store: StoreBase) -> None:
        """An event of 5 MB (a huge tool output) is stored and read back unchanged."""
        big = "".join(f"line {i}: {'x' * 60}\n" for i in range(75_000))
        assert len(big.encode()) > 5_000_000
        store.append("s", [turn(1), NewEvent("message", {"content": big}), turn(2)])
        events = store.read("s")
        assert events[1].data["content"] == big
        assert [e.seq for e in events] == [1, 2, 3]

    @pytest.mark.parametrize("name", sorted(UNICODE_TEXTS))
    def test_unicode_round_trips(self, store: StoreBase, name: str) -> None:
        """Emoji, CJK, right-to-left, combining marks and control characters (NUL included) in
        data, and non-ASCII session ids and types, come back exactly as appended."""
        text = UNICODE_TEXTS[name]
        store.append(f"sess-{name}-日本", [NewEvent(f"app/{name}-ü", {text: text, "list": [text]})])
        (event,) = store.read(f"sess-{name}-日本")
        assert event.type == f"app/{name}-ü"
        assert event.data == {text: text, "list": [text]}

    def test_numbers_round_trip_with_their_type(self, store: StoreBase) -> None:
        """Ints stay ints and floats stay floats, large, small and negative alike."""
        numbers = {"i": 2**62, "neg": -7, "f": 0.1, "big": 1e20, "tiny": 5e-324, "whole": 3.0}
        store.append("s", [NewEvent("turn", numbers)])
        data = store.read("s")[0].data
        assert data == numbers
        assert {k: type(v) for k, v in data.items()} == {k: type(v) for k, v in numbers.items()}

    def test_key_order_is_kept(self, store: StoreBase) -> None:
        """Keys come back in the order they were appended (what was sent is what is logged)."""
        data = {"zebra": 1, "apple": {"y": 2, "b": 3}, "mango": 4}
        store.append("s", [NewEvent("turn", data)])
        read = store.read("s")[0].data
        assert list(read) == ["zebra", "apple", "mango"]
        assert list(read["apple"]) == ["y", "b"]

    def test_the_log_is_a_copy_of_what_was_appended(self, store: StoreBase) -> None:
        """Changing the dict that was appended, or the data read back, never changes the log."""
        data: dict[str, Any] = {"items": [1]}
        appended = store.append("s", [NewEvent("turn", data)])
        data["items"].append(2)
        appended[0].data["items"].append(3)
        store.read("s")[0].data["items"].append(4)
        assert store.read("s")[0].data == {"items": [1]}

    def test_a_fresh_event_comes_back_as_a_read_gives_it(self, store: StoreBase) -> None:
        """A `FreshEvent` (data made for the store alone, as a session makes its messages')
        comes back from the append equal to what a read gives, types and key order included;
        changing what came back never changes the log."""
        data: dict[str, Any] = {
            "zebra": {"text": UNICODE_TEXTS["emoji"], "n": [1, 2.5, None, True, False]},
            "apple": {},
            "big": 2**62,
        }
        (appended,) = store.append("s", [turn(0), FreshEvent("app/fresh", data)])[1:]
        (read,) = store.read("s", after=1)
        assert appended == read
        assert list(appended.data) == list(read.data) == ["zebra", "apple", "big"]
        assert [type(v) for v in appended.data["zebra"]["n"]] == [
            int,
            float,
            type(None),
            bool,
            bool,
        ]
        appended.data["zebra"]["n"].append(3)
        assert store.read("s", after=1) == [read]

    def test_session_reads_and_writes_this_store(self, store: StoreBase) -> None:
        """`store.session(id)` is a Session over this store: what it appends, the store holds."""
        from ctxfold.messages import Message

        session = store.session("chat")
        session.append([Message("user", "hello")])
        assert [(e.seq, e.type) for e in store.read("chat")] == [(1, "message")]
        assert session.messages() == [Message("user", "hello")]

    # -- lifetime --------------------------------------------------------------------------

    def test_reopening_keeps_everything_identical(self, store: StoreBase) -> None:
        """A persistent store reopened gives back every session and event, identical."""
        store.append("a", [turn(1), NewEvent("message", {"content": UNICODE_TEXTS["emoji"]})])
        store.append("b", [turn(2)])
        before = {name: store.read(name) for name in store.sessions()}
        again = self._reopen(store)
        assert {name: again.read(name) for name in again.sessions()} == before
        assert again.last_seq("a") == 2

    def test_appends_after_reopening_continue_the_seqs(self, store: StoreBase) -> None:
        """After reopening, seqs continue from the last one and expected_seq still applies."""
        store.append("s", [turn(1), turn(2)])
        again = self._reopen(store)
        with pytest.raises(ConflictError):
            again.append("s", [turn(3)], expected_seq=0)
        assert [e.seq for e in again.append("s", [turn(3)], expected_seq=2)] == [3]

    def test_a_closed_store_refuses_calls(self, store: StoreBase) -> None:
        """After `close()`, every call raises a CtxfoldError; closing again is harmless."""
        store.append("s", [turn(1)])
        store.close()
        store.close()
        for call in (
            lambda: store.append("s", [turn(2)]),
            lambda: store.append("s", [turn(2)], idempotency_key="k"),
            lambda: store.read("s"),
            lambda: list(store.stream("s")),
            lambda: store.last_seq("s"),
            lambda: store.search("s", "word"),
            lambda: store.load_snapshot("s"),
            lambda: store.save_snapshot("s", 1, "{}"),
            lambda: next(store.subscribe("s", idle_timeout=0)),
            store.sessions,
        ):
            with pytest.raises(CtxfoldError, match="closed"):
                call()

    def test_a_store_is_a_context_manager_that_closes(self, store: StoreBase) -> None:
        """`with store:` returns the store and closes it on the way out."""
        with store as entered:
            assert entered is store
            store.append("s", [turn(1)])
        with pytest.raises(CtxfoldError, match="closed"):
            store.read("s")
