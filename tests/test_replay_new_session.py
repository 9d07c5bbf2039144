"""Replays into a shared database each get a session of their own, even when they start together."""

from __future__ import annotations

from ctxfold.messages import validate
from ctxfold.replay import replay_transcript
from ctxfold.storage import MemoryStore
from ctxfold.testing.transcripts import generate
from ctxfold.tokens import Budget


class StaleLook(MemoryStore):
    """A store whose first listing of sessions is taken before another run's first append: it
    misses the session that run made."""

    def __init__(self) -> None:
        super().__init__()
        self.looks = 0

    def sessions(self) -> list[str]:
        self.looks += 1
        return [] if self.looks == 1 else super().sessions()


def test_a_replay_that_loses_the_race_for_its_id_takes_the_next_and_writes_nothing_there() -> None:
    """When another run took the id between the look and the first append, the replay goes to
    the next id, and the other run's session holds only its own events."""
    store = StaleLook()
    store.session("replay").append(generate(seed=2, steps=3)[:2])
    replay_transcript(generate(seed=1, steps=20), Budget(window=8_000), store=store)
    assert sorted(store.sessions()) == ["replay", "replay-2"]
    assert store.last_seq("replay") == 2
    assert validate(store.session("replay-2").messages()) == []
