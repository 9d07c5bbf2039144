"""The logged messages a checkpoint refers to, read back in bulk for a cold start.

A checkpoint keeps an original message as a reference to its event (`ctxfold.session.checkpoint`),
so a cold start reads those events' data and makes a `Message` of each: at ten thousand events,
most of the load. Two things make it cheaper here, neither of which may change a result:

- orjson decodes each row where it is present, several times faster than the standard decoder.
  The two differ only on numbers (orjson reads an integer past 64 bits as a float, and refuses
  NaN, Infinity and out-of-range floats) and on lone surrogates (refused): whatever orjson
  decodes without error and without a float, the standard decoder decodes to the same strings,
  integers, lists, objects, booleans and nulls. A message made here therefore comes only from
  a decoded message holding no float (`_owned_message` for the plain ones, `Message.from_dict`
  for the others, an ``extra`` among them); anything else is decoded again by `decode_row`,
  exactly as a fold of the log decodes it.
- `_owned_message` makes the `Message` with `from_dict`'s checks of each field in one pass, for
  the shapes `Message.to_dict` writes; what it does not take (an ``extra``, a shape out
  of the ordinary, anything `from_dict` would refuse) is left to `from_dict`, which then keeps
  it or refuses it in its own words.

A store that hands over each event's data as the JSON text it keeps (SQLite) answers
`StoreBase._read_text_page`; for the others (memory, PostgreSQL), the rows come from
`stream_data`, already decoded.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from typing import Any

from ctxfold.errors import InvalidInputError
from ctxfold.events import MESSAGE
from ctxfold.messages import Message, ToolCall
from ctxfold.messages._values import ROLES
from ctxfold.storage._fast_json import text_decoder
from ctxfold.storage.base import StoreBase
from ctxfold.storage.checks import PAGE_SIZE, decode_row

_new = object.__new__


_loads: Callable[[str | bytes], Any] | None = text_decoder()


def logged_messages(
    store: StoreBase, session_id: str, seq: int, wanted: list[int]
) -> list[Message]:
    """The message of each event in `wanted` (ascending seqs, none beyond `seq`), in order.

    Raises `InvalidInputError` when the seqs do not ascend within the log, or one of them is not
    a message event; a row that is not JSON is the `StoreCorruptError` a read of it raises."""
    previous = 0
    for want in wanted:
        if not previous < want <= seq or type(want) is not int:
            raise InvalidInputError("its references are not ascending seqs within the log")
        previous = want
    out: list[Message] = []
    done = 0
    while done < len(wanted):
        start = wanted[done]
        # Up to the last seq asked for within a page of `start`: a stretch that a compaction
        # covers, or a short run of originals before one, is not read past.
        last = bisect.bisect_right(wanted, start + PAGE_SIZE - 1, done) - 1
        page = store._read_text_page(session_id, start - 1, wanted[last] - start + 1)
        if page is None:
            return out + _from_data(store, session_id, wanted[done:])
        if len(page) == last - done + 1 and page[-1][0] == wanted[last]:
            # As many rows as seqs asked for, ascending to the same last one: the very events
            # asked for (a run of originals that no compaction interrupted), read in one go.
            out.extend([_logged(store, session_id, s, t, raw) for s, t, raw in page])
        else:
            _merge(store, session_id, page, wanted[done : last + 1], out)
        done = last + 1
    return out


def _merge(
    store: StoreBase,
    session_id: str,
    page: list[tuple[int, str, str | bytes]],
    wanted: list[int],
    out: list[Message],
) -> None:
    """Take from `page` the events `wanted` asks for; one of them missing is refused."""
    rows = iter(page)
    for want in wanted:
        for event_seq, event_type, text in rows:
            if event_seq == want:
                out.append(_logged(store, session_id, event_seq, event_type, text))
                break
            if event_seq > want:
                raise InvalidInputError(f"event {want} is missing from the log")
        else:
            raise InvalidInputError(f"event {want} is missing from the log")


def _from_data(store: StoreBase, session_id: str, wanted: list[int]) -> list[Message]:
    """`logged_messages` from `stream_data`, for a store that keeps no text: each stream opens
    at the seq asked for and goes on across gaps shorter than a page."""
    out: list[Message] = []
    rows: Iterator[tuple[int, str, Any]] = iter(())
    read = -PAGE_SIZE
    for want in wanted:
        if want - read > PAGE_SIZE:
            rows = store.stream_data(session_id, after=want - 1)
        for event_seq, event_type, data in rows:
            read = event_seq
            if event_seq == want:
                out.append(_from_dict(want, event_type, data))
                break
            if event_seq > want:
                raise InvalidInputError(f"event {want} is missing from the log")
        else:
            raise InvalidInputError(f"event {want} is missing from the log")
    return out


def _logged(store: StoreBase, session_id: str, seq: int, type_: str, raw: str | bytes) -> Message:
    """The message of the event stored as `raw`: what `Event.message` of it gives."""
    if type_ != MESSAGE:
        raise InvalidInputError(f"event {seq} is not a message event")
    if _loads is not None:
        try:
            decoded = _loads(raw)
        except ValueError:  # more than orjson reads: the standard decoder says what it is
            decoded = None
        message = decoded.get("message") if type(decoded) is dict else None
        made = _owned_message(message)
        if made is not None:
            return made
        if type(message) is dict and not _holds_float(message):
            # With no float in it, nothing in it was read otherwise than the standard decoder
            # reads it (see the module docstring): a message with `extra`, as every message an
            # integration logs, is decoded once, not a second time.
            return Message.from_dict(message)
    if isinstance(raw, str):
        text = raw
    else:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            # What a read of the row says about it (the store's own error), not a new word.
            store._read_data_page(session_id, seq - 1, 1)
            raise InvalidInputError(f"event {seq} is not UTF-8 text") from None
    data = decode_row(session_id, seq, text)
    made = _owned_message(data.get("message")) if type(data) is dict else None
    return made if made is not None else _from_dict(seq, type_, data)


def _holds_float(value: object) -> bool:
    """Whether a float stands anywhere in `value`, a decoded JSON value (walked without
    recursion: the depth is the data's)."""
    pending: list[Any] = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is float:
            return True
        if kind is dict:
            pending.extend(item.values())
        elif kind is list:
            pending.extend(item)
    return False


def _from_dict(seq: int, type_: str, data: Any) -> Message:
    message = data.get("message") if type_ == MESSAGE and isinstance(data, dict) else None
    if not isinstance(message, dict):
        raise InvalidInputError(f"event {seq} is not a message event")
    return Message.from_dict(message)


def _shapes() -> dict[tuple[str, ...], tuple[bool, bool, bool]]:
    """Each key order `Message.to_dict` writes for a message without ``extra``, with whether it
    holds tool calls, a tool call id and a name."""
    shapes = {}
    for calls in (False, True):
        for call_id in (False, True):
            for name in (False, True):
                keys = ("role", "content") + ("tool_calls",) * calls
                keys += ("tool_call_id",) * call_id + ("name",) * name
                shapes[keys] = (calls, call_id, name)
    return shapes


_SHAPES = _shapes()
_CALL_SHAPE = ("id", "name", "arguments")


def _owned_message(data: object) -> Message | None:
    """``Message.from_dict(data)`` for decoded data, when it has the fields
    `Message.to_dict` writes for a message without ``extra``, in its order, each of the type
    `from_dict` takes, and obeys the constructor's rules; None for anything else, which
    `from_dict` then reads. Every value it takes is a string or None, so the decoder that
    made `data` read it as the standard decoder does."""
    if type(data) is not dict:
        return None
    shape = _SHAPES.get(tuple(data))
    if shape is None:
        return None
    has_calls, has_call_id, has_name = shape
    role, content = data["role"], data["content"]
    if type(role) is not str or role not in ROLES or not (content is None or type(content) is str):
        return None
    if has_calls:
        raw = data["tool_calls"]
        if type(raw) is not list or (raw and role != "assistant"):
            return None
        made = []
        for entry in raw:
            if type(entry) is not dict or tuple(entry) != _CALL_SHAPE:
                return None
            ident, tool, arguments = entry["id"], entry["name"], entry["arguments"]
            if (
                type(ident) is not str
                or not ident
                or type(tool) is not str
                or not tool
                or type(arguments) is not str
            ):
                return None
            call = _new(ToolCall)
            fields = call.__dict__
            fields["id"] = ident
            fields["name"] = tool
            fields["arguments"] = arguments
            fields["extra"] = {}
            made.append(call)
        calls = tuple(made)
    else:
        calls = ()
    call_id = data["tool_call_id"] if has_call_id else None
    if not (call_id is None or type(call_id) is str) or (role == "tool" and not call_id):
        return None
    name = data["name"] if has_name else None
    if not (name is None or type(name) is str):
        return None
    # Stored into the instance's own `__dict__`, in the constructor's order: CPython makes it
    # a dict that shares its keys with every other value of the class. Measured on 3.11, that
    # takes half the time of `object.__setattr__` per field (as `from_dict` sets them) for a
    # third more memory per message, and two thirds of the memory of a dict of its own.
    message = _new(Message)
    fields = message.__dict__
    fields["role"] = role
    fields["content"] = content
    fields["tool_calls"] = calls
    fields["tool_call_id"] = call_id
    fields["name"] = name
    fields["extra"] = {}
    return message
