"""Text every store can hold: lone surrogates made U+FFFD.

A model may answer with half a UTF-16 pair (a JSON ``"\\ud83d"`` escape whose other half it never
wrote), and Python keeps it as a lone surrogate, which no UTF-8 store or file can hold. Where
ctxfold takes text from outside (a summarizer's answer, a framework's messages), it passes it
through `well_formed`, so that the answer lands rather than fail its append. It lives at the
package root, beside `errors`, so that every layer can use it without an upward import.
"""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def is_well_formed(text: str) -> bool:
    """Whether `text` holds no surrogate (what UTF-8 can encode), found without encoding it.

    >>> is_well_formed("caf\u00e9"), is_well_formed("half \\ud83d")
    (True, False)
    """
    return text.isascii() or _SURROGATE.search(text) is None


def well_formed(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD and each pair of surrogates joined
    into the character the pair encodes; any other text unchanged (and not copied).

    >>> well_formed("fixed \\ud83d, kept \\ud83d\\ude00")
    'fixed \ufffd, kept \U0001f600'
    """
    if is_well_formed(text):
        return text
    # UTF-16 is where surrogates belong: written as its code units and read back, a pair is
    # one character again and a unit without its other half is replaced.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def well_formed_data(value: Any) -> Any:
    """`value` (JSON-like data: dicts, lists, tuples, strings) with `well_formed` strings, keys
    included; lists and tuples keep their type, anything else is returned as it is.

    >>> well_formed_data({"text": ["ok \\ud83d"]})
    {'text': ['ok \ufffd']}
    """
    if isinstance(value, str):
        return well_formed(value)
    if isinstance(value, dict):
        return {well_formed_data(k): well_formed_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(well_formed_data(v) for v in value)
    return value
