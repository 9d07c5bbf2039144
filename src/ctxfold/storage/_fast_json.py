"""orjson as a faster encoder of the stored text of a plain message, taken only where it agrees.

Encoding is the largest single cost of an append after counting its tokens, and orjson does it
several times faster than the standard C encoder (2.5 ms against 0.38 ms for the 904 messages of
the shared transcripts, measured when this was written). The stored text must not
depend on which one ran: an idempotency key's digest and every reader's decode see it, and a
process with orjson must store what a process without it stores, to the byte. The two agree on
strings, booleans, None, integers that fit in 64 bits, lists and dicts with string keys; they
differ on floats (orjson writes ``1e-7`` where the standard encoder writes ``1e-07``, and NaN as
``null``). So orjson encodes only data that holds no float (`StringsEvent` in `checks`: what
`Message.to_dict` gives for a message without ``extra``), and only when

- orjson imports (it comes with the ``fast`` extra);
- it writes every value of `_PROBE` as the standard encoder with ctxfold's settings does: each
  ASCII control character, the quote and the backslash, DEL and the controls past it, the line and
  paragraph separators, characters outside the basic plane, nesting and ``None``. A later orjson
  that escaped any of them otherwise would be refused here, and the standard encoder keeps
  writing every text.

What orjson refuses (a lone surrogate, an integer past 64 bits) raises `TypeError`, and the
caller encodes that data with the standard encoder, which then refuses or keeps it exactly as
it would have without orjson.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_SPECIAL = "".join(chr(c) for c in range(0x20)) + '"\\/\x7f\x80\x9f\u2028\u2029\ufeff'
_PROBE: Any = {
    "message": {
        "role": "tool",
        "content": _SPECIAL + "é ü 東京 😀 \U0010fffd tail",
        "tool_calls": [{"id": "call_1", "name": "read", "arguments": '{"path": "a\\\\b"}'}],
        "tool_call_id": None,
        "name": "",
        "nested": [[], {}, [None, True, False, 0, -1, 2**63 - 1], {"k": ["v", {"deep": "\n"}]}],
    }
}
"""Values that every way of escaping or nesting a message's data goes through."""


def text_encoder(stored_form: Callable[[Any], str]) -> Callable[[Any], str] | None:
    """orjson's encoder of data that holds no float, when it writes `_PROBE` as `stored_form`
    (the store's own encoder, `checks.encode_data`) does; None when orjson is absent or
    differs."""
    try:
        import orjson
    except ImportError:
        return None
    dumps = orjson.dumps
    try:
        agrees = dumps(_PROBE).decode("utf-8") == stored_form(_PROBE)
    except Exception:  # a foreign extension: any failure means "use the standard encoder"
        return None
    if not agrees:
        return None

    def encode(data: Any) -> str:
        return dumps(data).decode("utf-8")

    return encode


def text_decoder() -> Callable[[str | bytes], Any] | None:
    """orjson's decoder (of text, or of UTF-8 bytes), None when orjson is absent. It is exact
    only where its caller checks what it gave (`ctxfold.session.originals` says how): it
    reads an integer past 64 bits as a float, and refuses what the standard decoder reads as
    NaN, an infinity or a lone surrogate, and bytes that are not UTF-8 (raising
    `ValueError`)."""
    try:
        import orjson
    except ImportError:
        return None
    loads: Callable[[str | bytes], Any] = orjson.loads
    return loads
