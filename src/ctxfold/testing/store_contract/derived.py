"""Derived data: full-text search over a session's messages, and projection snapshots."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from ctxfold.errors import InvalidInputError
from ctxfold.storage.base import StoreBase
from ctxfold.testing.store_contract._base import ContractBase, said, turn

# Text that is query syntax in FTS5 or tsquery, or SQL, and the messages it must find as plain
# words (message 1: "a b c d pre start x secret body"; message 2: "body: secret, a b and d").
HOSTILE_QUERIES = [
    ('"unterminated', set()),
    ("AND OR NOT", set()),
    ("body:secret", {2}),
    ("sess : x", set()),
    ("pre*", {1}),
    ("^start", {1}),
    ("NEAR(a b, 2)", set()),
    ("a & b | !c <-> d", {1}),
    ("'; DROP TABLE events; --", set()),
    ("((a))", {1, 2}),
    ("{body}: x", {1}),
    ('\\x00 \\\' ""', set()),
]


class SearchContract(ContractBase):
    """What every store guarantees about `search`."""

    def _conversation(self, store: StoreBase) -> None:
        store.append(
            "s",
            [
                said("system", "You fix bugs in Python projects."),
                said("user", "The test tests/test_io.py fails with ConflictError on Windows."),
                said("assistant", None, ("run_shell", '{"cmd": "pytest tests/test_io.py -x"}')),
                said("tool", "1 failed: ConflictError raised in src/ctxfold/session.py:88"),
                said("assistant", "The session module retries without a bound."),
                turn(1, text="ConflictError in a turn event is not searchable"),
            ],
        )

    def test_content_and_tool_calls_are_searched(self, store: StoreBase) -> None:
        """A word is found in message content, in a tool call's arguments and in its name."""
        self._conversation(store)
        assert {h.seq for h in store.search("s", "ConflictError")} == {2, 4}
        assert [h.seq for h in store.search("s", "run_shell")] == [3]
        assert {h.seq for h in store.search("s", "-x pytest")} == {3}

    def test_json_arguments_are_searched_by_their_values(self, store: StoreBase) -> None:
        """A tool call's JSON arguments are searched as the text they hold: a word right after
        an escaped line break or quote is found, and a path in them as a phrase."""
        store.append(
            "s",
            [
                said(
                    "assistant",
                    None,
                    (
                        "write_file",
                        '{"path": "src/app.py", "text": "import os\\nfrom numpy import array"}',
                    ),
                ),
                said("assistant", None, ("bash", '{"command": "grep -n \\"def parse\\" lib.py"}')),
            ],
        )
        assert [h.seq for h in store.search("s", "from numpy import array")] == [1]
        assert [h.seq for h in store.search("s", "src/app.py")] == [1]
        assert [h.seq for h in store.search("s", 'grep -n "def parse" lib.py')] == [2]

    def test_a_hit_carries_its_event(self, store: StoreBase) -> None:
        """Each hit holds the stored event, equal to what `read` returns for that seq."""
        self._conversation(store)
        (hit,) = store.search("s", "bound")
        assert hit.seq == 5
        assert hit.event == store.read("s")[4]
        assert isinstance(hit.score, float)

    def test_words_match_whole_and_ignore_case(self, store: StoreBase) -> None:
        """Case does not matter; a part of a word is not a match."""
        self._conversation(store)
        assert [h.seq for h in store.search("s", "WINDOWS")] == [2]
        assert store.search("s", "Window") == []
        assert store.search("s", "conflict") == []

    def test_a_term_is_a_phrase_and_every_term_must_match(self, store: StoreBase) -> None:
        """A path is matched as its words in order; all terms of a query must be in the hit."""
        self._conversation(store)
        assert [h.seq for h in store.search("s", "src/ctxfold/session.py")] == [4]
        assert store.search("s", "session.py/ctxfold") == []
        assert [h.seq for h in store.search("s", "ConflictError Windows")] == [2]
        assert store.search("s", "ConflictError nowhere") == []

    def test_more_mentions_rank_first(self, store: StoreBase) -> None:
        """A short message that says the word often ranks above a long one that says it once;
        ties go to the newer message."""
        store.append(
            "s",
            [
                said("user", "zebra " + "filler words here " * 40),
                said("user", "zebra zebra zebra, the zebra"),
                said("user", "zebra " + "filler words here " * 40),
            ],
        )
        assert [h.seq for h in store.search("s", "zebra")] == [2, 3, 1]

    def test_only_messages_of_this_session_are_searched(self, store: StoreBase) -> None:
        """Other event types and other sessions are never hits."""
        self._conversation(store)
        store.append("other", [said("user", "ConflictError elsewhere")])
        assert store.search("s", "searchable") == []
        assert [h.event.session_id for h in store.search("other", "ConflictError")] == ["other"]

    def test_seqs_restrict_the_search(self, store: StoreBase) -> None:
        """With `seqs`, only those events can be hits; an empty collection finds nothing."""
        self._conversation(store)
        assert [h.seq for h in store.search("s", "ConflictError", seqs=[1, 4, 99])] == [4]
        assert store.search("s", "ConflictError", seqs=set()) == []

    def test_limit_caps_the_hits(self, store: StoreBase) -> None:
        """`limit` is the most hits returned, best first."""
        store.append("s", [said("user", "needle " * n) for n in range(1, 30)])
        hits = store.search("s", "needle", limit=5)
        assert len(hits) == 5
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)

    @pytest.mark.parametrize(("query", "found"), HOSTILE_QUERIES)
    def test_query_syntax_is_plain_text(
        self, store: StoreBase, query: str, found: set[int]
    ) -> None:
        """Quotes, operators, column filters and SQL in a query are searched as words: no error,
        and exactly the messages holding those words match."""
        store.append("s", [said("user", "a b c d pre start x secret body")])
        store.append("s", [said("user", "body: secret, a b and d")])
        assert {hit.seq for hit in store.search("s", query)} == found
        assert store.last_seq("s") == 2

    @pytest.mark.parametrize("query", ["", "   ", "!!! ??? ...", "(((", None, 7])
    def test_an_empty_query_is_refused(self, store: StoreBase, query: Any) -> None:
        """A query with no letters or digits is an InvalidInputError."""
        store.append("s", [said("user", "hello")])
        with pytest.raises(InvalidInputError, match="query"):
            store.search("s", query)

    @pytest.mark.parametrize(
        ("kwargs", "says"),
        [
            ({"limit": 0}, "limit"),
            ({"limit": 1001}, "limit"),
            ({"limit": True}, "limit"),
            ({"seqs": "12"}, "seqs"),
            ({"seqs": [1, -2]}, "seqs"),
        ],
    )
    def test_bad_search_arguments_are_refused(
        self, store: StoreBase, kwargs: dict[str, Any], says: str
    ) -> None:
        """A limit outside 1 to 1,000 or a seq that is no seq is an InvalidInputError."""
        with pytest.raises(InvalidInputError, match=says):
            store.search("s", "hello", **kwargs)

    def test_searches_racing_appends_miss_nothing_in_the_end(self, store: StoreBase) -> None:
        """Threads searching while others append: no error, no hit twice, and a search after the
        appends finds every message."""
        errors: list[BaseException] = []

        def append(worker: int) -> None:
            try:
                for n in range(30):
                    store.append("s", [said("user", f"needle {worker} {n}"), turn(n)])
            except BaseException as exc:  # reported by the assertion below
                errors.append(exc)

        def search() -> None:
            try:
                for _ in range(15):
                    seqs = [h.seq for h in store.search("s", "needle", limit=1000)]
                    assert len(seqs) == len(set(seqs))
            except BaseException as exc:  # reported by the assertion below
                errors.append(exc)

        pool = [threading.Thread(target=append, args=(w,)) for w in range(3)]
        pool += [threading.Thread(target=search) for _ in range(3)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        assert errors == []
        hits = store.search("s", "needle", limit=1000)
        messages = [e.seq for e in store.read("s") if e.type == "message"]
        assert sorted(h.seq for h in hits) == messages
        assert len(messages) == 90

    def test_unicode_words_are_found(self, store: StoreBase) -> None:
        """Words in other scripts and with accents are found, whatever their case."""
        store.append("s", [said("user", "Le café est fermé. 日本語 テスト")])
        assert [h.seq for h in store.search("s", "CAFÉ")] == [1]
        assert [h.seq for h in store.search("s", "日本語")] == [1]

    def test_search_works_after_reopening(self, store: StoreBase) -> None:
        """The index is as durable as the log: a reopened store finds the same hits."""
        self._conversation(store)
        before = [h.seq for h in store.search("s", "ConflictError")]
        again = self._reopen(store)
        assert [h.seq for h in again.search("s", "ConflictError")] == before
        again.append("s", [said("user", "one more ConflictError")])
        assert again.search("s", "ConflictError")[0].seq == 7


class SnapshotContract(ContractBase):
    """What every store guarantees about snapshots: derived data kept beside the log."""

    def test_no_snapshot_is_none(self, store: StoreBase) -> None:
        """A session never snapshotted has none."""
        store.append("s", [turn(1)])
        assert store.load_snapshot("s") is None
        assert store.load_snapshot("unknown") is None

    def test_the_newest_snapshot_is_loaded(self, store: StoreBase) -> None:
        """`load_snapshot` returns the snapshot of the highest seq, whatever the order saved."""
        store.append("s", [turn(n) for n in range(6)])
        store.save_snapshot("s", 3, '{"at": 3}')
        store.save_snapshot("s", 5, '{"at": 5}')
        store.save_snapshot("s", 4, '{"at": 4}')
        assert store.load_snapshot("s") == (5, '{"at": 5}')
        store.save_snapshot("s", 5, '{"at": "5 again"}')
        assert store.load_snapshot("s") == (5, '{"at": "5 again"}')

    def test_a_snapshot_is_never_part_of_the_log(self, store: StoreBase) -> None:
        """Saving a snapshot changes no read, seq or session list."""
        store.append("s", [turn(1), turn(2)])
        before = (store.read("s"), store.last_seq("s"), store.sessions())
        store.save_snapshot("s", 2, "{}")
        assert (store.read("s"), store.last_seq("s"), store.sessions()) == before

    def test_snapshots_belong_to_their_session_and_can_be_dropped(self, store: StoreBase) -> None:
        """Dropping one session's snapshots leaves the log and other sessions' snapshots."""
        store.append("a", [turn(1)])
        store.append("b", [turn(1)])
        store.save_snapshot("a", 1, '"a"')
        store.save_snapshot("b", 1, '"b"')
        store.drop_snapshots("a")
        assert store.load_snapshot("a") is None
        assert store.load_snapshot("b") == (1, '"b"')
        assert store.last_seq("a") == 1

    def test_a_snapshot_ahead_of_the_log_is_refused(self, store: StoreBase) -> None:
        """A snapshot claiming a seq the log does not have yet is an error, and is not kept."""
        store.append("s", [turn(1)])
        with pytest.raises(InvalidInputError, match="ahead of the log"):
            store.save_snapshot("s", 2, "{}")
        assert store.load_snapshot("s") is None

    @pytest.mark.parametrize(
        ("seq", "data", "says"),
        [(-1, "{}", "seq"), (True, "{}", "seq"), (1, b"{}", "snapshot data"), (1, "a\x00", "NUL")],
    )
    def test_bad_snapshot_arguments_are_refused(
        self, store: StoreBase, seq: Any, data: Any, says: str
    ) -> None:
        """A seq that is no seq, or data that is not storable text, is an InvalidInputError."""
        store.append("s", [turn(1)])
        with pytest.raises(InvalidInputError, match=says):
            store.save_snapshot("s", seq, data)
        assert store.load_snapshot("s") is None

    def test_a_large_snapshot_round_trips(self, store: StoreBase) -> None:
        """A snapshot of several megabytes, in any script, comes back exactly."""
        store.append("s", [turn(1)])
        data = '{"items": "' + "日本語 text " * 300_000 + '"}'
        store.save_snapshot("s", 1, data)
        assert store.load_snapshot("s") == (1, data)

    def test_snapshots_survive_reopening(self, store: StoreBase) -> None:
        """A persistent store keeps its newest snapshot across a restart."""
        store.append("s", [turn(1), turn(2)])
        store.save_snapshot("s", 2, '{"kept": true}')
        assert self._reopen(store).load_snapshot("s") == (2, '{"kept": true}')
