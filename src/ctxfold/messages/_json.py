"""The strict JSON reader every transcript line goes through.

Python's `json.loads` accepts text that ctxfold cannot store or send, and fails on some input with
errors that are not `InvalidInputError`. `loads_line` closes each gap with a sentence:

- ``NaN``, ``Infinity`` and numbers too large for a float (``1e999``): not JSON, and refused by
  every provider and by the stores;
- integers of more than 4,300 digits (Python refuses to convert them);
- nesting deeper than `MAX_DEPTH` levels (the parser itself would run out of stack at about
  1,000);
- a lone UTF-16 surrogate escape such as ``"\\ud800"``: it decodes to a string that cannot be
  written as UTF-8 (a pair of escapes that forms one character is fine).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ctxfold.errors import InvalidInputError
from ctxfold.messages._show import show

MAX_DEPTH = 256
"""Most levels of nested objects and lists a line may hold. Real transcripts stay far below."""

# A surrogate escape, or a surrogate itself (possible in a str that did not come from a file):
# only lines holding one can decode to a lone surrogate.
_SURROGATE = re.compile("\\\\u[dD][89abcdefABCDEF]|[\ud800-\udfff]")


def loads_line(line: str) -> Any:
    """Parse one line of JSON under the rules above; `InvalidInputError` (without the line
    number, which the caller adds) for anything else.

    >>> loads_line('{"role": "user", "content": "hi"}')["content"]
    'hi'
    >>> loads_line('{"n": NaN}')
    Traceback (most recent call last):
    ...
    ctxfold.errors.InvalidInputError: NaN is not a JSON number
    """
    try:
        value = json.loads(line, parse_constant=_refuse_constant, parse_float=_finite_float)
    except InvalidInputError:
        raise
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            f"not valid JSON ({exc.msg} at column {exc.colno}): {show(line.strip())}"
        ) from None
    except RecursionError:
        raise InvalidInputError(
            f"nested more than {MAX_DEPTH} levels deep; a message is never shaped like that"
        ) from None
    except ValueError:
        # The one ValueError json.loads raises besides a decode error: an integer of more
        # digits than Python converts (4,300 by default).
        raise InvalidInputError(
            "holds an integer too long to read (more digits than Python converts, 4,300 by default)"
        ) from None
    if line.count("[") + line.count("{") > MAX_DEPTH:
        _check_depth(value)
    if _SURROGATE.search(line):
        _check_unicode(value)
    return value


def _refuse_constant(name: str) -> Any:
    raise InvalidInputError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise InvalidInputError(f"the number {text[:40]} is too large for a float")
    return number


def _check_depth(value: Any) -> None:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InvalidInputError(
                f"nested more than {MAX_DEPTH} levels deep; a message is never shaped like that"
            )
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


def _check_unicode(value: Any) -> None:
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            _check_text(item, path)
        elif isinstance(item, dict):
            for key, inner in item.items():
                _check_text(key, path)
                stack.append((inner, f"{path}.{key}" if path else key))
        elif isinstance(item, list):
            stack.extend((inner, f"{path}[{i}]") for i, inner in enumerate(item))


def _check_text(text: str, path: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        where = f" in {path}" if path else ""
        raise InvalidInputError(
            f"the text{where} holds {text[exc.start : exc.end]!r}, a lone surrogate that is not "
            "valid Unicode"
        ) from None
