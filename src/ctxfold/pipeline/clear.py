"""ClearToolResults: the first, free rung. Old tool output becomes a short placeholder.

The calls, the agent's reasoning and the user's words stay; only bulky observations go, oldest
first, and each placeholder keeps the call id, names the tool and says where the output is kept.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from ctxfold.errors import ConfigurationError
from ctxfold.messages import Message
from ctxfold.pipeline.proposals import MaskResults
from ctxfold.pipeline.strategy import Flow
from ctxfold.pipeline.view import WorkingView
from ctxfold.summarizers.quoting import code_span
from ctxfold.summarizers.record import read_outcome

CLEARED_MARK = "[ctxfold: output of "


class ClearToolResults:
    """Replace older tool results of at least `min_tokens` tokens with a placeholder.

    - `keep_steps`: the newest steps left alone (default: the budget's `keep_steps`); at least
      1, since the newest results are what the agent is reading now (`keep_steps=0` is a
      `ConfigurationError` here, and a `BudgetError` in a `Budget`).
    - `min_tokens`: results shorter than this (in tokens) stay (default 100), since a placeholder
      saves little on them and short results often carry the answer.
    - `keep_tail`: leave the verbatim recent tail (`keep_recent_tokens`) alone (default True).
      The default ladder ends with a second `ClearToolResults(keep_tail=False)` before the
      sliding window, so that a huge recent output is cleared rather than its step dropped.
    """

    name = "clear_tool_results"

    def __init__(
        self, keep_steps: int | None = None, min_tokens: int = 100, *, keep_tail: bool = True
    ) -> None:
        check_keep_steps(keep_steps, "cleared")
        check_whole("min_tokens", min_tokens, minimum=0, unit="tokens")
        self.keep_steps = keep_steps
        self.min_tokens = min_tokens
        self.keep_tail = keep_tail

    def run(self, view: WorkingView) -> Flow:
        def cleared(index: int, tool: str, arguments: str) -> str | None:
            item = view.items[index]
            tokens = view.counts[index]
            if tokens < self.min_tokens or item.message.text.startswith(CLEARED_MARK):
                return None
            return placeholder(tool, arguments, item.message, item.id, tokens)

        return shrink_results(view, self.keep_steps, self.keep_tail, cleared)


def check_keep_steps(keep_steps: object, done: str) -> None:
    """Refuse a `keep_steps` that is not None or a whole number of at least 1, for a rung by
    which the newest step would be `done` ("cleared", "cut", "summarized", "dropped")."""
    if keep_steps is None or (
        isinstance(keep_steps, int) and not isinstance(keep_steps, bool) and keep_steps >= 1
    ):
        return
    raise ConfigurationError(
        f"keep_steps must be a whole number of steps >= 1, or None for the budget's, not "
        f"{keep_steps!r}: the newest step is what the agent is reading now, and is never {done}"
    )


def check_whole(name: str, value: object, *, minimum: int, unit: str) -> None:
    """Refuse a strategy setting that is not a whole number of `unit` of at least `minimum`."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
        return
    raise ConfigurationError(
        f"{name} must be a whole number of {unit} >= {minimum:,}, not {value!r}"
    )


def shrink_results(
    view: WorkingView,
    keep_steps: int | None,
    keep_tail: bool,
    shorter: Callable[[int, str, str], str | None],
) -> Flow:
    """What the tool-result rungs propose: older results, oldest first, each given the text
    `shorter(index, tool, arguments)` returns (None leaves it as it is) when that makes it
    smaller (`never-larger`), one mask, until the view's excess is saved. The newest
    `keep_steps` steps (default: the budget's; whatever it says, at least the newest step) and,
    with `keep_tail`, the verbatim recent tail keep their results."""
    keep = max(1, view.rules.keep_steps if keep_steps is None else keep_steps)
    protected = view.protected(keep, tail=keep_tail)
    calls = calls_by_result(view)
    chosen: dict[int, str] = {}
    saved = 0
    for index, item in enumerate(view.items):
        if saved >= view.excess:
            break
        message = item.message
        if message.role != "tool" or index in protected:
            continue
        tool, arguments = calls.get(index, ("tool", ""))
        text = shorter(index, tool, arguments)
        if text is None:
            continue
        tokens = view.count(message.replace(content=text))
        if tokens >= view.counts[index]:
            continue  # `never-larger`: the shorter text would cost more than it saves
        chosen[index] = text
        saved += view.counts[index] - tokens
    if chosen:
        yield MaskResults(chosen)
    return None


def placeholder(tool: str, arguments: str, message: Message, item_id: int, tokens: int) -> str:
    """The text that stands in for a cleared result: tool, call id, size, the error line a
    failed output ended with (quoted as data), and how to recall it."""
    about = gist(arguments)
    call = f"{tool}({about})" if about else tool
    error = read_outcome(message.text).error_line
    failed = f" It failed with {code_span(error)}." if error else ""
    return (
        f"{CLEARED_MARK}{call} was cleared to save context (call {message.tool_call_id}, "
        f"{tokens} tokens).{failed} The full output is kept in the session log as event "
        f"{item_id}; recall it from there, or run the call again if it is needed.]"
    )


def gist(arguments: str, limit: int = 80) -> str:
    """A call's arguments in one short line (at most `limit` characters): the value alone when
    there is one argument, for placeholders and markers to name the call by."""
    try:
        parsed = json.loads(arguments) if arguments else {}
    except ValueError:
        parsed = arguments
    if isinstance(parsed, dict) and len(parsed) == 1:
        parsed = next(iter(parsed.values()))
    text = parsed if isinstance(parsed, str) else json.dumps(parsed, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def calls_by_result(view: WorkingView) -> dict[int, tuple[str, str]]:
    """For each tool result index, the name and arguments of the call it answers."""
    out: dict[int, tuple[str, str]] = {}
    for unit in view.structure().steps:
        calls = list(view.items[unit.start].message.tool_calls)
        for index in range(unit.start + 1, unit.end):
            call_id = view.items[index].message.tool_call_id
            for position, call in enumerate(calls):
                if call.id == call_id:
                    out[index] = (call.name, call.arguments)
                    del calls[position]  # a repeated id pairs by position
                    break
    return out
