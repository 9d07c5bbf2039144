"""The session's own copy of a message it was just handed, made without the store's JSON.

A message appended with `extra` (an integration's raw framework parts, say) still belongs to the
caller, who may change its `extra` after the append. The projection must hold a copy that shares
no mutable container with it, and that is equal to what a read of the log gives back (the
message decoded from the stored JSON). Decoding the text the store just wrote gives exactly that,
at the cost of a JSON scan and a `Message.from_dict` per message. When every value in `extra` is
already what JSON decodes to (dicts with string keys, lists, and str, int, float, bool, None of
exactly those types), copying just the dicts and lists gives an equal value for a fraction of
that. Anything else (a tuple, which JSON gives back as a list; a subclass of str; a key that is
not a string; a Mapping that is not a dict) has no such copy, and the caller decodes instead.
"""

from __future__ import annotations

from typing import Any

from ctxfold.messages import Message, ToolCall

# Values JSON gives back as themselves (NaN and infinity never reach a fold: the store refuses
# to encode them, before anything is written).
_LEAVES = frozenset({str, int, float, bool, type(None)})


class _Unlike:
    """Marks a value whose JSON round trip would not give back an equal value of its type."""


_UNLIKE = _Unlike()


def private_message(message: Message) -> Message | None:
    """A copy of `message`, of type `Message`, equal to the message a read of its stored form
    gives, and sharing no dict or list with it; None when its `extra` (or a tool call's) holds a
    value whose stored form reads back different, so that only decoding gives that copy.

    `message` and its tool calls are of exactly the types `Message` and `ToolCall`, with string
    fields of exactly type str (what `ctxfold.session.appended.message_event` has checked)."""
    try:
        extra = _copy(message.extra) if message.extra else {}
        if extra is _UNLIKE:
            return None
        calls = message.tool_calls
        if any(call.extra for call in calls):
            copied: list[ToolCall] = []
            for call in calls:
                call_extra = _copy(call.extra) if call.extra else {}
                if call_extra is _UNLIKE:
                    return None
                copied.append(ToolCall(call.id, call.name, call.arguments, call_extra))
            calls = tuple(copied)
    except RecursionError:
        return None  # nested too deep to walk: the store says whether it can keep it at all
    return Message(message.role, message.content, calls, message.tool_call_id, message.name, extra)


def _copy(value: Any) -> Any:
    """`value` (a dict or a list) copied container by container, leaves shared (they are
    immutable); `_UNLIKE` when anything in it is not what JSON decodes to."""
    kind = type(value)
    if kind is dict:
        out: Any = value.copy()
        for key, item in out.items():
            if type(key) is not str:
                return _UNLIKE
            if type(item) not in _LEAVES:
                item = _copy(item)
                if item is _UNLIKE:
                    return _UNLIKE
                out[key] = item  # the same key: the dict does not change size while walked
        return out
    if kind is list:
        out = value.copy()
        for index, item in enumerate(out):
            if type(item) not in _LEAVES:
                item = _copy(item)
                if item is _UNLIKE:
                    return _UNLIKE
                out[index] = item
        return out
    return _UNLIKE
