"""The checks and the encoding every store runs before it writes anything.

A bad batch is refused whole, before any write, and the message says which event (by its position
in the batch) and which value was wrong. The limits here are the same for every store, so a
session that works in memory works in SQLite and PostgreSQL too.
"""

from __future__ import annotations

import hashlib
import json
import json.encoder
import json.scanner
import re
from collections.abc import Callable, Mapping, Sequence
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any, NamedTuple, cast
from urllib.parse import urlsplit, urlunsplit

from ctxfold._assembled import assembled
from ctxfold.errors import InvalidInputError, StoreCorruptError
from ctxfold.events import Event, FreshEvent, NewEvent
from ctxfold.storage._fast_json import text_encoder

MAX_SESSION_ID_BYTES = 1024
"""The longest session id any store takes, in bytes of UTF-8 (1,024 ASCII characters).

Counted in bytes, not characters, because that is what a database index holds: PostgreSQL refuses
index entries over about 2.7 KB, which 1,024 four-byte characters would exceed."""

PAGE_SIZE = 1000
"""Events fetched per query when a store streams a session (`stream`, `subscribe`)."""

MAX_IDEMPOTENCY_KEY_BYTES = 256
"""The longest idempotency key, in bytes of UTF-8 (a UUID or a hash fits many times over)."""


class EncodedEvent(NamedTuple):
    """One event of a batch, checked and encoded, ready for a store to write."""

    type: str
    data: str
    """The JSON text of the event's data (compact, unicode kept as is)."""
    value: Any = None
    """The data as a store hands it back, when the event was a `FreshEvent` (its own data);
    None when the store must decode `data` for that."""


class StringsEvent(FreshEvent):
    """A `FreshEvent` whose data holds no float: dicts with string keys, lists, strings,
    booleans, None and integers, as `Message.to_dict` gives for a message without ``extra``
    (`strings_event`). Its text may be written by orjson (`_fast_json` says why floats are
    left out), to the same bytes."""


class EncodedBatch(NamedTuple):
    """A checked batch: its events, and a digest that tells a retried batch from a new one.

    A tuple rather than a frozen dataclass: one is made per append, at half the cost."""

    events: list[EncodedEvent]
    digest: str
    """Hex digest of every event's type and data, in order."""


_tuple: Callable[[type[Any], tuple[Any, ...]], Any] = tuple.__new__
"""``_tuple(EncodedEvent, (kind, text, value))`` is ``EncodedEvent(kind, text, value)``, made in C:
a NamedTuple's own ``__new__`` is a Python function, and every append makes two of these."""


def check_session_id(session_id: object) -> str:
    """Return `session_id` when it is a usable session id, else raise InvalidInputError."""
    if (
        type(session_id) is str
        and session_id.isascii()  # then its length is its size in UTF-8, and it encodes
        and 0 < len(session_id) <= MAX_SESSION_ID_BYTES
        and "\x00" not in session_id
    ):
        return session_id  # the common case, checked without encoding it (every append asks)
    if not isinstance(session_id, str) or not session_id:
        raise InvalidInputError(f"a session id must be a non-empty string, not {session_id!r}")
    _check_column_text(
        session_id,
        "session id",
        MAX_SESSION_ID_BYTES,
        ": use a shorter id (a hash of a long one works)",
    )
    return session_id


def check_idempotency_key(key: object, session_id: str) -> str:
    """Return `key` when it is a usable idempotency key, else raise InvalidInputError."""
    what = f"session {_clip(session_id)!r}: idempotency_key"
    if not isinstance(key, str) or not key:
        raise InvalidInputError(f"{what} must be a non-empty string, not {key!r}")
    _check_column_text(key, what, MAX_IDEMPOTENCY_KEY_BYTES)
    return key


def _check_column_text(text: str, what: str, limit: int, advice: str = "") -> None:
    """What a text kept in a key column must be: valid unicode, free of NUL, at most `limit`
    bytes in UTF-8 (`advice` ends the message that says it is longer)."""
    _check_storable_text(text, what)
    _check_no_nul(text, what)
    size = len(text.encode("utf-8"))
    if size > limit:
        raise InvalidInputError(
            f"{what} {_clip(text)!r} is {size:,} bytes long in UTF-8; the limit is "
            f"{limit:,} bytes{advice}"
        )


MAX_SEQ = 2**63 - 1
"""The largest seq any store can hold (a signed 64-bit integer in SQLite and PostgreSQL)."""


def check_seq(value: object, name: str) -> int:
    """Return `value` when it is a seq a caller may pass (an int, 0 to `MAX_SEQ`)."""
    # bool is an int subclass; True as a seq is always a caller's mistake.
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEQ:
        raise InvalidInputError(
            f"{name} must be an integer from 0 to {MAX_SEQ} (the largest seq a store holds), "
            f"not {value!r:.80}"
        )
    return value


def check_text(value: object, what: str) -> str:
    """Return `value` when it is text every store can keep (no lone surrogate, no NUL)."""
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be a string, not {type(value).__name__}")
    _check_storable_text(value, what)
    _check_no_nul(value, what)
    return value


def encode_batch(
    session_id: str, events: Sequence[NewEvent], *, digest: bool = True
) -> EncodedBatch:
    """Check every event of a batch and encode its data, refusing the batch at the first bad one.

    `digest`: compute the batch's digest (else it is ""); only keyed appends need it."""
    if type(events) is not list and (
        isinstance(events, (str, bytes, NewEvent)) or not isinstance(events, Sequence)
    ):
        raise InvalidInputError(
            f"session {session_id!r}: events must be a list of NewEvent, not {events!r}"
        )
    encoded = []
    hashed = hashlib.blake2b(digest_size=16) if digest else None
    # One C encoder for the batch's other events (`encode_data` says why not json.dumps), made
    # at the first of them: encoding one leaves its table of open containers empty again, and
    # a failure ends the batch.
    scan: Callable[[Any, int], list[str]] | None = None
    # This loop runs once per appended event, so the common case costs a few checks that are
    # O(1) on CPython (`isascii` reads a flag); the error messages are built only on failure.
    for index, event in enumerate(events):
        made = type(event)
        fresh = made is FreshEvent or made is StringsEvent
        if not fresh and not isinstance(event, NewEvent):
            raise InvalidInputError(
                f"{_where(session_id, index)}: expected a NewEvent, got {event!r}"
            )
        data = event.data
        if type(data) is not dict and not isinstance(data, Mapping):
            raise InvalidInputError(
                f"{_where(session_id, index)}: data must be a JSON object, not {data!r}"
            )
        kind = event.type
        if not kind.isascii() or "\x00" in kind:
            where = _where(session_id, index)
            _check_storable_text(kind, f"{where}: type")
            _check_no_nul(kind, f"{where}: type")
        text = _strings_text(data) if made is StringsEvent else None
        if text is None:
            try:
                if fresh and _PLAIN_UNICODE is not None:
                    text = _encode_plain(data)
                elif _make_encoder is not None:
                    if scan is None:
                        scan = _new_c_encoder()
                    text = "".join(scan(data, 0))
                else:
                    text = _ENCODER.encode(data)
            except (TypeError, ValueError, RecursionError) as exc:
                # NewEvent checked its data when it was made; a dict can change after that.
                raise InvalidInputError(
                    f"{_where(session_id, index)}: data is not JSON: {exc}"
                ) from None
        if not text.isascii():
            _check_storable_text(text, f"{_where(session_id, index)}: data")
        encoded.append(_tuple(EncodedEvent, (kind, text, data if fresh else None)))
        if hashed is not None:
            # Length-prefixed, so no two different batches can run together into one digest.
            for part in (kind, text):
                raw = part.encode("utf-8")
                hashed.update(len(raw).to_bytes(8, "big"))
                hashed.update(raw)
    text_digest = hashed.hexdigest() if hashed is not None else ""
    batch: EncodedBatch = _tuple(EncodedBatch, (encoded, text_digest))
    return batch


def _strings_text(data: Any) -> str | None:
    """A `StringsEvent`'s text from orjson (`_STRINGS`); None without it, or for what it refuses
    (a lone surrogate, a very large integer), which the standard encoder then writes, and which
    is kept or refused exactly as without orjson."""
    if _STRINGS is None:
        return None
    try:
        return _STRINGS(data)
    except TypeError:
        return None


def _encode_plain(data: Any) -> str:
    """`encode_data` of a `FreshEvent`'s data, the same text, made faster two ways.

    - The data of a `FreshEvent` is plain JSON that nothing else holds, so it has no cycle:
      these encoders keep no table of open containers to find one (a cycle would still end in
      a RecursionError, which the caller reports).
    - It goes through the ASCII encoder first, which writes each character straight into a
      byte buffer, in about three quarters of the time the unicode one takes. Where every
      string is ASCII without DEL the two write the same text to the byte (both write control
      characters as ``\\u00XX``, and those alone). The ASCII encoder writes DEL and everything
      past it as ``\\uXXXX`` instead, where the stored form keeps them as they are: so a text
      holding a ``\\u`` that is not such a control escape is encoded again by the unicode
      encoder. A string that merely holds a backslash and a ``u`` can send a text there too,
      which costs time, never a different text.
    """
    assert _PLAIN_ASCII is not None and _PLAIN_UNICODE is not None
    text = "".join(_PLAIN_ASCII(data, 0))
    if _WIDE_ESCAPE.search(text):
        text = "".join(_PLAIN_UNICODE(data, 0))
    return text


_WIDE_ESCAPE = re.compile(r"\\u(?!00[01])")
"""An escape the ASCII encoder writes for DEL or a character past it (a control character
is ``\\u0000`` to ``\\u001f``)."""


def _where(session_id: str, index: int) -> str:
    return f"session {session_id!r}, event {index} of the batch"


def encode_data(data: Mapping[str, Any]) -> str:
    """The JSON text a store keeps for an event's data.

    Compact JSON with unicode kept as is: what ``json.dumps(data, ensure_ascii=False,
    separators=(",", ":"), allow_nan=False)`` gives, and it raises what that raises. NaN and
    Infinity are not JSON and PostgreSQL refuses them, so every store refuses them alike."""
    if _make_encoder is None:
        return _ENCODER.encode(data)
    # json.dumps builds an encoder object and then the C encoder for every call, which costs a
    # third of encoding a typical message; this builds only the C encoder.
    return "".join(_new_c_encoder()(data, 0))


def _new_c_encoder() -> Callable[[Any, int], list[str]]:
    """The C encoder with `_ENCODER`'s settings and its own table of the containers being
    encoded (how a circular structure is found), so threads never share one."""
    assert _make_encoder is not None
    return _make_encoder({}, _ENCODER.default, encode_basestring, *_C_SETTINGS)


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
# indent, key separator, item separator, sort_keys, skipkeys, allow_nan: as `_ENCODER` passes them.
_C_SETTINGS = (None, ":", ",", False, False, False)


def _c_encoder() -> Callable[..., Callable[[Any, int], list[str]]] | None:
    """`json.encoder.c_make_encoder` when this Python has it and it takes the arguments
    `JSONEncoder` passes it (an interpreter without the C accelerator, or a future one whose
    signature changed, falls back to `_ENCODER.encode`)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    probe = {"a": [1, 2.5, None, True, "é\n"]}
    try:
        text = "".join(make({}, _ENCODER.default, encode_basestring, *_C_SETTINGS)(probe, 0))
    except Exception:
        return None
    return (
        cast(Callable[..., Callable[[Any, int], list[str]]], make)
        if text == _ENCODER.encode(probe)
        else None
    )


_make_encoder = _c_encoder()

# `_encode_plain`'s encoders: with no table of open containers they hold no state between
# calls, so every thread shares them.
_PLAIN_UNICODE: Callable[[Any, int], list[str]] | None = None
_PLAIN_ASCII: Callable[[Any, int], list[str]] | None = None
if _make_encoder is not None:
    _PLAIN_UNICODE = _make_encoder(None, _ENCODER.default, encode_basestring, *_C_SETTINGS)
    _PLAIN_ASCII = _make_encoder(None, _ENCODER.default, encode_basestring_ascii, *_C_SETTINGS)


_STRINGS: Callable[[Any], str] | None = text_encoder(encode_data)
"""The encoder of a `StringsEvent`'s data: orjson where it writes the stored form (`_fast_json`),
else None and `_encode_plain` writes it."""


def decode_event(session_id: str, seq: int, type_: str, data: str, created_at: float) -> Event:
    """An `Event` from the columns a store keeps."""
    return stored_event(session_id, seq, type_, decode_row(session_id, seq, data), created_at)


def decode_row(session_id: str, seq: int, data: str) -> Any:
    """`decode_data` of the row at `seq` of `session_id`: text that is not JSON (no store writes
    any) is a `StoreCorruptError` naming the row."""
    try:
        return decode_data(data)
    except (ValueError, TypeError) as exc:
        raise StoreCorruptError(
            f"session {session_id!r}, event {seq}: the stored data is not JSON ({exc}); the log "
            "was changed by other means than ctxfold, or is damaged"
        ) from None


def stored_event(session_id: str, seq: int, type_: str, data: Any, created_at: float) -> Event:
    """``Event(session_id, seq, type_, data, created_at)`` with its fields set at once
    (`assembled`; `Event` checks nothing): a store makes one for each event it appends or reads."""
    fields = {
        "session_id": session_id,
        "seq": seq,
        "type": type_,
        "data": data,
        "created_at": created_at,
    }
    return assembled(Event, fields)


def fresh_event(type_: str, data: dict[str, Any]) -> FreshEvent:
    """``FreshEvent(type_, data)`` for a `type_` known to be a non-empty string (the session
    layer's ``message``), made as `stored_event` makes an `Event`: one per appended message,
    without the check of `type_`."""
    return assembled(FreshEvent, {"type": type_, "data": data})


def strings_event(type_: str, data: dict[str, Any]) -> StringsEvent:
    """`fresh_event` for data that holds no float (`StringsEvent`): the session's messages
    without ``extra``."""
    return assembled(StringsEvent, {"type": type_, "data": data})


def decode_data(data: str) -> Any:
    """An event's data from the JSON text a store keeps (`encode_data`)."""
    try:
        # The C scanner alone: stored JSON is one value with no whitespace around it, so the
        # Python layer of json.loads (whitespace checks, twice per call) is skipped, which is a
        # fifth of the cost of reading an event.
        return _scan(data, 0)[0]
    except StopIteration:
        return json.loads(data)  # a row written by other means: let json say what is wrong


def same_data(first: Any, second: Any) -> bool:
    """True when two decoded values of stored data mean the same: equal in every value and
    type, lists in the same order, each object's keys in any order.

    A retried idempotent append is compared with what its first try stored this way when their
    texts differ (`StoreBase.append`): an application that builds the retry again from the same
    data may put a mapping's keys in another order. Types count, as a reader of the text sees
    them: ``1``, ``1.0`` and ``true`` differ, and so do ``0.0`` and ``-0.0``.

    >>> same_data({"a": 1, "b": [{"x": None, "y": "z"}]}, {"b": [{"y": "z", "x": None}], "a": 1})
    True
    >>> same_data({"a": 1}, {"a": 1.0}), same_data({"a": 1}, {"a": True}), same_data([1, 2], [2, 1])
    (False, False, False)
    """
    # A stack rather than recursion: data as deep as the encoder takes never overflows here.
    pending = [(first, second)]
    while pending:
        one, other = pending.pop()
        kind = type(one)
        if kind is not type(other):
            return False
        if kind is dict:
            if one.keys() != other.keys():
                return False
            pending.extend((value, other[key]) for key, value in one.items())
        elif kind is list:
            if len(one) != len(other):
                return False
            pending.extend(zip(one, other, strict=True))
        elif kind is float:
            if one.hex() != other.hex():
                return False
        elif one != other:
            return False
    return True


# typeshed types make_scanner's argument as the scanner class itself; it takes a decoder.
_scan: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(
    cast(Any, json.JSONDecoder())
)


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
        raise InvalidInputError(f"{what} {_clip(text)!r} holds a NUL character")


def _clip(text: str, size: int = 60) -> str:
    """`text` shortened for an error message, so a 5 MB value does not fill the terminal."""
    return text if len(text) <= size else f"{text[: size - 3]}..."


def redacted(url: str) -> str:
    """`url` with any password replaced by ``***``, so an error message never shows one.

    Handles URLs (``postgresql://user:pw@host/db``, ``?password=pw``) and libpq ``key=value``
    strings (``host=db password=pw``).

    >>> redacted("postgresql://app:hunter2@db.internal:5432/agents?password=x")
    'postgresql://app:***@db.internal:5432/agents?password=***'
    >>> redacted("host=db.internal password='a b' dbname=agents")
    'host=db.internal password=*** dbname=agents'
    >>> redacted("postgresql://app:hunter2@[::1/agents")
    'postgresql://app:***@[::1/agents'
    """
    if "://" not in url:
        return _CONNINFO_PASSWORD.sub(r"\1***", url)
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # not a URL urlsplit reads (a bracket left open, say): by pattern
        return _URL_PASSWORD.sub(r"\1***", _USERINFO_PASSWORD.sub(r"\1***@", url))
    if password:
        parts = parts._replace(netloc=parts.netloc.replace(f":{password}@", ":***@", 1))
    query = _URL_PASSWORD.sub(r"\1***", parts.query)
    return urlunsplit(parts._replace(query=query))


# The password of a URL's user info: "scheme://user:password@".
_USERINFO_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")
# A libpq keyword value is a word or a single-quoted string with backslash escapes.
_CONNINFO_PASSWORD = re.compile(r"(\bpassword\s*=\s*)(?:'(?:[^'\\]|\\.)*'|\S+)")
_URL_PASSWORD = re.compile(r"((?:^|[?&])password=)[^&#]*")
