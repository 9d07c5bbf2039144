"""What an append hands on: the events that store the items a caller appends, and the values the
projection may fold without reading the stored text back.

A `Session.append` of messages is the hot path of every agent turn. Each message is checked here,
before anything is written, for the field types a read of the log would refuse; then it becomes
the event the store encodes, together with the message the projection folds: the caller's own
when nothing in it can change after the append, a private copy when its `extra` could
(`ctxfold.session.private`), or none, and the projection then decodes the stored text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ctxfold.errors import InvalidInputError
from ctxfold.events import MESSAGE, Event, NewEvent
from ctxfold.messages import Message, ToolCall
from ctxfold.messages._values import check_fields, plain_fields
from ctxfold.session.private import private_message
from ctxfold.storage.checks import decode_data, encode_data, fresh_event, strings_event


def private_event(event: Event, text: str | None = None) -> Event:
    """`event` with a copy of its data that shares nothing with it (what a read would give):
    decoded from `text`, the JSON the store wrote for it, when given, else encoded anew."""
    return Event(
        event.session_id,
        event.seq,
        event.type,
        decode_data(encode_data(event.data) if text is None else text),
        event.created_at,
    )


def message_event(position: int, item: Message) -> tuple[NewEvent, Message | None]:
    """The event that stores `item`, and the message the projection may fold as it is: `item`
    itself when its stored form gives it back equal and it has no `extra`, a private copy
    (`private_message`) when it has one, else None (it is read from the stored data).
    Refuses, before anything is written, a message whose fields were set past its constructor's
    checks (`ctxfold.messages._values.check_fields`): a read of the log would refuse them."""
    if plain_fields(item):
        # The common message, checked and found plain in one pass: what the rest of this
        # function finds for it, the long way.
        return strings_event(MESSAGE, {"message": item.to_dict()}), item
    content, call_id, name = item.content, item.tool_call_id, item.name
    try:
        # The constructor checked these; a value whose fields were set past it must not reach
        # the log, which could not give it back.
        check_fields(item)
    except InvalidInputError as exc:
        raise InvalidInputError(
            f"item {position} of the append: {exc}; nothing was written"
        ) from None
    # Exact types only: a subclass of str, or a tuple of calls that JSON turns into a list,
    # does not come back from the stored form as it went in.
    plain = (
        type(item) is Message
        and type(item.tool_calls) is tuple
        and (content is None or type(content) is str)
        and (call_id is None or type(call_id) is str)
        and (name is None or type(name) is str)
    )
    extra = bool(item.extra)
    for call in item.tool_calls:
        if call.extra:
            extra = True
        if not (
            type(call) is ToolCall
            and type(call.id) is str
            and type(call.name) is str
            and type(call.arguments) is str
        ):
            plain = False
    if plain and not extra:
        # Plain JSON built here and handed to nobody else (no `extra` the caller may still
        # change, no tuple that JSON turns into a list): the store may give it back as stored,
        # and the message folds as it is.
        # Only strings and None in it (`plain`): the store may write it with orjson.
        return strings_event(MESSAGE, {"message": item.to_dict()}), item
    # An `extra` the caller may change after the append. Where a copy of its containers reads
    # back equal (`private_message`), the projection folds one such copy and the store is
    # handed the data of another, which no one else holds: the store gives that back as the
    # returned event's data, so neither is decoded from the stored text (a fraction of the
    # cost), and the caller, the returned events and the view share no container.
    private = private_message(item) if plain else None
    if private is None:
        return NewEvent.message(item), None
    stored = private_message(item)
    assert stored is not None  # the same message, copied a moment ago
    return fresh_event(MESSAGE, {"message": stored.to_dict()}), private


def refuse_non_batch(items: object) -> None:
    """Refuse a str, bytes or mapping handed to append as its batch: iterating one would append
    its characters or keys, and blame the first of them."""
    if not isinstance(items, (str, bytes, Mapping)):
        return
    hint = (
        "; a message held as a dict: Message.from_dict(d), or from_openai([d]) / "
        "from_anthropic([d]) for a provider's format"
        if isinstance(items, Mapping)
        else ""
    )
    raise InvalidInputError(
        f"append takes a Message, a NewEvent or a list of them, not a {type(items).__name__}"
        f"{hint}; nothing was written"
    )


def as_events(
    items: Sequence[Message | NewEvent],
) -> tuple[list[NewEvent], list[Message | None], int]:
    """The events that store `items`; for each, the message the projection may fold as it is
    (`message_event`), else None; and how many items were events rather than messages."""
    out: list[NewEvent] = []
    known: list[Message | None] = []
    others = 0
    for position, item in enumerate(items):
        if isinstance(item, Message):
            event, message = message_event(position, item)
            out.append(event)
            known.append(message)
        elif isinstance(item, NewEvent):
            out.append(item)
            known.append(None)
            others += 1
        else:
            raise InvalidInputError(
                f"item {position} of the append is a {type(item).__name__}; "
                "append takes Message or NewEvent values"
            )
    return out, known, others
