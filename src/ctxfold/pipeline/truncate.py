"""TruncateToolResults: long tool output cut down to its first and last lines.

A free rung for outputs whose beginning and end carry what matters (a command's header and its
errors and totals at the bottom, a file's imports and its last definitions): the middle goes, and
one line says how many lines were cut and where the full output is kept. It is a mask, like
clearing, so the original stays in the log and the call keeps its result.
"""

from __future__ import annotations

from ctxfold.errors import ConfigurationError
from ctxfold.pipeline.clear import CLEARED_MARK, check_keep_steps, gist, shrink_results
from ctxfold.pipeline.strategy import Flow
from ctxfold.pipeline.view import WorkingView

CUT_PHRASE = "lines of this output were cut here to save context"
"""What every cut marker says; an output holding it was truncated already."""


class TruncateToolResults:
    """Keep the first `head_lines` and last `tail_lines` lines of older long tool results, with
    a marker between them.

    - `head_lines`, `tail_lines`: lines kept at each end (default 20 each).
    - `keep_steps`: the newest steps left alone (default: the budget's `keep_steps`), at least
      1: the newest results are what the agent is reading now.
    - `keep_tail`: leave the verbatim recent tail alone (default True).

    The marker names the tool call, says how many lines were cut, and which log event holds the
    full output. A result is only cut when that makes it smaller (`never-larger`), and never
    cut twice.

    >>> TruncateToolResults(head_lines=5, tail_lines=5).name
    'truncate_tool_results'
    """

    name = "truncate_tool_results"

    def __init__(
        self,
        head_lines: int = 20,
        tail_lines: int = 20,
        *,
        keep_steps: int | None = None,
        keep_tail: bool = True,
    ) -> None:
        for label, value in (("head_lines", head_lines), ("tail_lines", tail_lines)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigurationError(f"{label} must be a whole number >= 0, not {value!r}")
        check_keep_steps(keep_steps, "cut")
        self.head_lines = head_lines
        self.tail_lines = tail_lines
        self.keep_steps = keep_steps
        self.keep_tail = keep_tail

    def run(self, view: WorkingView) -> Flow:
        def shorter(index: int, tool: str, arguments: str) -> str | None:
            item = view.items[index]
            text = item.message.text
            if text.startswith(CLEARED_MARK) or CUT_PHRASE in text:
                return None
            return self.cut(text, tool, arguments, item.message.tool_call_id or "?", item.id)

        return shrink_results(view, self.keep_steps, self.keep_tail, shorter)

    def cut(self, text: str, tool: str, arguments: str, call_id: str, item_id: int) -> str | None:
        """`text` with its middle lines replaced by one marker line; None when it has no more
        lines than are kept."""
        lines = text.split("\n")
        cut = len(lines) - self.head_lines - self.tail_lines
        if cut <= 0:
            return None
        about = gist(arguments)
        call = f"{tool}({about})" if about else tool
        marker = (
            f"[ctxfold: {cut:,} {CUT_PHRASE} (output of {call}, call {call_id}). The full "
            f"output is kept in the session log as event {item_id}; recall it from there if the "
            "cut lines matter.]"
        )
        tail = lines[len(lines) - self.tail_lines :] if self.tail_lines else []
        return "\n".join([*lines[: self.head_lines], marker, *tail])
