"""What the functions of `ctxfold.messages` take as "messages", and how they refuse the rest.

Every function that takes a history (`to_openai`, `to_anthropic`, `dumps_jsonl`, `write_jsonl`,
`validate`, `is_valid`, `repair`, `plan_repair`) takes a list of `Message` values (any sequence
or iterable of them), or one `Message`, taken as a list of one, as `Session.append` takes it.
The readers (`from_openai`, `from_anthropic`) take a list of provider dicts, or one dict. None,
a string, or anything else raises `InvalidInputError` naming the function and what it got,
rather than a `TypeError` from deep inside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ctxfold.errors import InvalidInputError
from ctxfold.messages._show import show
from ctxfold.messages._values import Message

_PLAIN = frozenset({Message})


def given_messages(value: object, where: str) -> Sequence[Message]:
    """`value` as a sequence of `Message`s: itself when it is a sequence, a list of it when it is
    one `Message` or another iterable; raises `InvalidInputError` naming `where` otherwise, or
    naming the first item that is not a `Message`.

    >>> given_messages(Message("user", "hi"), "to_openai")
    [Message(role='user', content='hi', tool_calls=(), tool_call_id=None, name=None, extra={})]
    """
    if type(value) is list or (
        isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray))
    ):
        messages: Sequence[Any] = value
    elif isinstance(value, Message):
        return [value]
    elif (
        value is None
        or isinstance(value, (str, bytes, bytearray, Mapping))
        or not isinstance(value, Iterable)
    ):
        hint = (
            "; a message held as a dict: from_openai / from_anthropic read a provider's format, "
            "Message.from_dict ctxfold's own"
            if isinstance(value, Mapping)
            else ""
        )
        raise InvalidInputError(
            f"{where} takes a list of Message values (or one Message), not {_kind(value)}{hint}"
        )
    else:
        messages = list(value)
    # One pass in C over the types: the common case, a list of plain messages, is settled there.
    if set(map(type, messages)) <= _PLAIN:
        return messages
    for index, item in enumerate(messages):
        if type(item) is not Message and not isinstance(item, Message):
            hint = (
                "; from_openai / from_anthropic read a provider's dicts, Message.from_dict "
                "ctxfold's own"
                if isinstance(item, Mapping)
                else ""
            )
            raise InvalidInputError(f"{where}: item {index} is {_kind(item)}, not a Message{hint}")
    return messages


def given_rows(value: object, where: str) -> Iterable[Any]:
    """`value` as an iterable of provider rows: a list of one when it is one mapping (one
    message); raises `InvalidInputError` naming `where` for None, a string or anything that
    cannot be iterated. The rows themselves are checked as they are read."""
    if isinstance(value, Mapping):
        if "messages" in value and "role" not in value:
            raise InvalidInputError(
                f"{where} takes a list of messages or one message, not a request body; pass "
                "its 'messages' (and, for Anthropic, system=its 'system')"
            )
        return [value]
    if (
        value is None
        or isinstance(value, (str, bytes, bytearray))
        or not isinstance(value, Iterable)
    ):
        raise InvalidInputError(
            f"{where} takes a list of message dicts (or one dict), not {_kind(value)}"
        )
    return value


def _kind(value: object) -> str:
    """How an error names what it got: None, or the type and the value."""
    return "None" if value is None else f"{type(value).__name__} {show(value, 40)}"
