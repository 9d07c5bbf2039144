"""Idempotent appends: a retry after a lost acknowledgement never appends twice."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from ctxfold.errors import ConflictError, InvalidInputError
from ctxfold.events import Event
from ctxfold.storage.base import StoreBase
from ctxfold.storage.checks import MAX_IDEMPOTENCY_KEY_BYTES
from ctxfold.testing.store_contract._base import ContractBase, turn


class RetryContract(ContractBase):
    """What every store guarantees about appends made with an idempotency key."""

    def test_a_repeated_key_returns_the_first_events_and_writes_nothing(
        self, store: StoreBase
    ) -> None:
        """The same append retried with its key returns the events stored the first time, seqs
        and timestamps included, and the log holds them once."""
        store.append("s", [turn(0)])
        first = store.append("s", [turn(1), turn(2)], idempotency_key="req-1")
        store.append("s", [turn(3)])
        again = store.append("s", [turn(1), turn(2)], idempotency_key="req-1")
        assert again == first
        assert [e.seq for e in again] == [2, 3]
        assert [e.data["n"] for e in store.read("s")] == [0, 1, 2, 3]

    def test_the_key_is_checked_before_expected_seq(self, store: StoreBase) -> None:
        """A retry whose `expected_seq` was right the first time gets the stored events back,
        not a ConflictError, even though the session has moved on."""
        first = store.append("s", [turn(1)], expected_seq=0, idempotency_key="k")
        store.append("s", [turn(2)])
        assert store.append("s", [turn(1)], expected_seq=0, idempotency_key="k") == first
        assert store.last_seq("s") == 2

    def test_a_conflict_records_no_key(self, store: StoreBase) -> None:
        """An append refused for its `expected_seq` leaves its key unused, so the caller can
        re-plan and append under the same key."""
        store.append("s", [turn(1)])
        with pytest.raises(ConflictError):
            store.append("s", [turn(2)], expected_seq=0, idempotency_key="k")
        landed = store.append("s", [turn(2)], expected_seq=1, idempotency_key="k")
        assert [e.seq for e in landed] == [2]

    def test_keys_belong_to_their_session(self, store: StoreBase) -> None:
        """The same key in two sessions names two different appends."""
        store.append("a", [turn(1)], idempotency_key="k")
        store.append("b", [turn(1)], idempotency_key="k")
        assert store.last_seq("a") == store.last_seq("b") == 1

    def test_a_key_reused_for_other_events_is_refused(self, store: StoreBase) -> None:
        """A key sent again with different events is an error that names the key and the seqs
        it already holds; nothing is written."""
        store.append("s", [turn(1)], idempotency_key="k")
        for other in ([turn(2)], [turn(1), turn(1)], [turn(1, extra=True)]):
            with pytest.raises(InvalidInputError, match=r"'k' was already used.*seqs 1 to 1"):
                store.append("s", other, idempotency_key="k")
        assert store.last_seq("s") == 1

    def test_an_empty_batch_records_no_key(self, store: StoreBase) -> None:
        """An empty append with a key writes nothing and keeps the key free for real events."""
        assert store.append("s", [], idempotency_key="k") == []
        assert [e.seq for e in store.append("s", [turn(1)], idempotency_key="k")] == [1]

    def test_racing_appends_with_one_key_land_once(self, store: StoreBase) -> None:
        """Six threads released together with the same key and events: the events land once,
        and every thread gets those same stored events back."""
        threads = 6
        barrier = threading.Barrier(threads)
        results: list[list[Event]] = []
        errors: list[BaseException] = []

        def work() -> None:
            barrier.wait()
            try:
                results.append(store.append("s", [turn(1), turn(2)], idempotency_key="same"))
            except BaseException as exc:  # reported by the assertion below
                errors.append(exc)

        pool = [threading.Thread(target=work) for _ in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        assert errors == []
        stored = store.read("s")
        assert [e.data["n"] for e in stored] == [1, 2]
        assert results == [stored] * threads

    @pytest.mark.parametrize(
        "key", ["", 7, b"bytes", "nul\x00key", "lone\ud800", "k" * (MAX_IDEMPOTENCY_KEY_BYTES + 1)]
    )
    def test_a_bad_key_is_refused(self, store: StoreBase, key: Any) -> None:
        """A key that is not a non-empty string of at most 256 bytes is refused; nothing lands."""
        with pytest.raises(InvalidInputError, match="idempotency_key"):
            store.append("s", [turn(1)], idempotency_key=key)
        assert store.sessions() == []

    def test_keys_survive_reopening(self, store: StoreBase) -> None:
        """A retry after the store (or the process) restarted still lands nothing new."""
        first = store.append("s", [turn(1)], idempotency_key="k")
        again = self._reopen(store)
        assert again.append("s", [turn(1)], idempotency_key="k") == first
        assert again.last_seq("s") == 1
