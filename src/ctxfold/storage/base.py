"""What every store shares: argument checks, the JSON encoding of a batch, and the session factory.

Checks run before any write, so a bad batch is refused whole and the message says which event
(by its position in the batch) and which value was wrong.
"""

from __future__ import annotations

import abc
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from ctxfold.errors import InvalidInputError
from ctxfold.events import Event, NewEvent

if TYPE_CHECKING:
    from ctxfold.session import Session

_Store = TypeVar("_Store", bound="StoreBase")


@dataclass(frozen=True)
class EncodedEvent:
    """One event of a batch, checked and encoded, ready for a store to write."""

    type: str
    data: str
    """The JSON text of the event's data (compact, unicode kept as is)."""


def check_session_id(session_id: object) -> str:
    """Return `session_id` when it is a usable session id, else raise InvalidInputError."""
    if not isinstance(session_id, str) or not session_id:
        raise InvalidInputError(f"a session id must be a non-empty string, not {session_id!r}")
    _check_storable_text(session_id, "session id")
    _check_no_nul(session_id, "session id")
    return session_id


def check_seq(value: object, name: str) -> int:
    """Return `value` when it is a seq a caller may pass (an int, 0 or more)."""
    # bool is an int subclass; True as a seq is always a caller's mistake.
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInputError(f"{name} must be an integer of 0 or more, not {value!r}")
    return value


def encode_batch(session_id: str, events: Sequence[NewEvent]) -> list[EncodedEvent]:
    """Check every event of a batch and encode its data, refusing the batch at the first bad one."""
    if isinstance(events, (str, bytes, NewEvent)) or not isinstance(events, Sequence):
        raise InvalidInputError(
            f"session {session_id!r}: events must be a list of NewEvent, not {events!r}"
        )
    encoded = []
    for index, event in enumerate(events):
        where = f"session {session_id!r}, event {index} of the batch"
        if not isinstance(event, NewEvent):
            raise InvalidInputError(f"{where}: expected a NewEvent, got {event!r}")
        if not isinstance(event.data, Mapping):
            raise InvalidInputError(f"{where}: data must be a JSON object, not {event.data!r}")
        _check_storable_text(event.type, f"{where}: type")
        _check_no_nul(event.type, f"{where}: type")
        try:
            text = _encode(event.data)
        except (TypeError, ValueError) as exc:
            # NewEvent checked its data when it was made; a dict can change after that.
            raise InvalidInputError(f"{where}: data is not JSON: {exc}") from None
        _check_storable_text(text, f"{where}: data")
        encoded.append(EncodedEvent(event.type, text))
    return encoded


def _encode(data: Mapping[str, Any]) -> str:
    # Compact JSON with unicode kept as is; NaN and Infinity are not JSON and PostgreSQL refuses
    # them, so every store refuses them alike.
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _check_storable_text(text: str, what: str) -> None:
    # A lone surrogate cannot be written as UTF-8, and no store could give it back.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start : exc.end]
        raise InvalidInputError(f"{what} holds {bad!r}, which is not valid unicode") from None


def _check_no_nul(text: str, what: str) -> None:
    # SQL text columns cannot hold NUL; data can, since JSON escapes it.
    if "\x00" in text:
        raise InvalidInputError(f"{what} {text!r} holds a NUL character")


def decode_event(session_id: str, seq: int, type_: str, data: str, created_at: float) -> Event:
    """An `Event` from the columns a store keeps."""
    return Event(session_id, seq, type_, json.loads(data), created_at)


def now() -> float:
    """The time stamped on appended events, in seconds since the epoch."""
    return time.time()


class StoreBase(abc.ABC):
    """What every ctxfold store is: an `EventStore` with `with` support and `session()`."""

    def append(
        self, session_id: str, events: Sequence[NewEvent], expected_seq: int | None = None
    ) -> list[Event]:
        """Append `events` atomically after the session's last seq; see `EventStore.append`.

        Every check and the encoding happen here, before the backend writes anything."""
        check_session_id(session_id)
        if expected_seq is not None:
            check_seq(expected_seq, "expected_seq")
        batch = encode_batch(session_id, events)
        created_at = now()
        first = self._write_batch(session_id, batch, expected_seq, created_at)
        return [
            decode_event(session_id, first + i, e.type, e.data, created_at)
            for i, e in enumerate(batch)
        ]

    @abc.abstractmethod
    def _write_batch(
        self,
        session_id: str,
        batch: Sequence[EncodedEvent],
        expected_seq: int | None,
        created_at: float,
    ) -> int:
        """Write `batch` in one transaction right after the session's last seq and return the
        seq its first event got. Raise `ConflictError` when `expected_seq` is given and is not
        the last seq; write nothing then."""

    @abc.abstractmethod
    def read(self, session_id: str, after: int = 0) -> list[Event]:
        """The session's events with a seq above `after`, in seq order."""

    @abc.abstractmethod
    def sessions(self) -> list[str]:
        """Every session id with at least one event, sorted."""

    @abc.abstractmethod
    def last_seq(self, session_id: str) -> int:
        """The session's last seq, 0 when it has no events."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the store's resources; later calls raise `StoreClosedError`."""

    def session(self, session_id: str, **kwargs: Any) -> Session:
        """A `Session` over this store; keyword arguments go to `Session`.

        >>> with MemoryStore() as store:  # doctest: +SKIP
        ...     session = store.session("chat-1")
        """
        from ctxfold.session import Session

        return Session(self, session_id, **kwargs)

    def __enter__(self: _Store) -> _Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
