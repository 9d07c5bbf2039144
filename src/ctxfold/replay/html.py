"""The HTML page of a replay: one self-contained file with a chart of context size per request.

The page carries its own CSS, its data as a JSON block and a small script that draws the chart
as SVG, so it opens offline and fetches nothing. Every text that came from a transcript (the
summaries, strategy names) is HTML-escaped.
"""

from __future__ import annotations

import html
import json
import os
from typing import TYPE_CHECKING, Any

from ctxfold._files import write_text_atomic
from ctxfold.replay._assets import CSS, SCRIPT
from ctxfold.replay.fidelity import describe

if TYPE_CHECKING:
    from ctxfold.replay.run import ReplayCompaction, ReplayResult


def render_html(result: ReplayResult, *, title: str = "ctxfold replay") -> str:
    """The page for `result`, as text (`write_html` saves it to a file)."""
    esc = html.escape
    data = {
        "window": result.window,
        "trigger": result.trigger,
        "target": result.target,
        "turns": [[r.turn, r.tokens_before, r.tokens] for r in result.requests],
        "compactions": [_chart_point(c) for c in result.compactions],
    }
    # "<" escaped inside the JSON so that no string can close the script element early.
    payload = json.dumps(data, ensure_ascii=False).replace("<", "\\u003c")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        f'<p class="sub">{result.messages:,} messages replayed in {len(result.requests):,} '
        f"requests, window {result.window:,} tokens, counted with {esc(result.counter)}.</p>",
        _stats(result),
        "<h2>Context size per request</h2>",
        _legend(),
        '<svg id="chart" viewBox="0 0 960 380" role="img" '
        'aria-label="context tokens per request against the window"></svg>',
        "<noscript><p class='note'>The chart is drawn by a script in this page; "
        "the tables below hold the same figures.</p></noscript>",
        "<h2>Compactions</h2>",
        _compactions(result),
        "<h2>What the final view kept</h2>",
        _fidelity(result),
        "<h2>Prompt-cache reuse</h2>",
        f"<p>{result.cache_reuse:.1%} of the tokens sent over the run "
        f"({result.reused_tokens:,} of {result.requested_tokens:,}) repeated the previous "
        "request's prefix message for message, which is what a provider's prompt cache can "
        "serve. Each compaction changes the history it rewrites, so the request after it "
        "shares only the part before the first rewritten message.</p>",
        "<h2>Summaries</h2>",
        _summaries(result),
        f'<script type="application/json" id="replay-data">{payload}</script>',
        f"<script>{SCRIPT}</script>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def write_html(path: str | os.PathLike[str], result: ReplayResult, **options: Any) -> None:
    """Write the page to `path` atomically: a temporary file beside it, renamed when complete.
    `options` go to `render_html`."""
    write_text_atomic(path, render_html(result, **options))


def strategy_text(compaction: ReplayCompaction, minus: str = "\u2212") -> str:
    """The strategies of one compaction with what each saved, e.g. ``clear_tool_results −5,120``."""
    return ", ".join(
        f"{s.name} {minus}{s.tokens_before - s.tokens_after:,}"
        for s in compaction.report.strategies
    )


def _chart_point(compaction: ReplayCompaction) -> dict[str, Any]:
    return {
        "turn": compaction.turn,
        "before": compaction.report.tokens_before,
        "after": compaction.report.tokens_after,
        "saved": compaction.saved,
        "strategies": strategy_text(compaction) or "no strategy",
    }


def _stats(result: ReplayResult) -> str:
    figures = [
        (f"{result.window:,}", "window (tokens)"),
        (f"{result.trigger:,}", "trigger (tokens)"),
        (f"{result.target:,}", "target (tokens)"),
        (f"{result.original_tokens:,}", "transcript, uncompacted"),
        (f"{result.peak_tokens:,}", "largest request"),
        (f"{result.final_tokens:,}", "last request"),
        (f"{len(result.over_window):,}", "requests over the window"),
        (f"{len(result.compactions):,}", "compactions"),
        (f"{result.summarizer_calls:,}", "summarizer calls"),
        (f"{result.cache_reuse:.1%}", "prompt-cache reuse"),
    ]
    cells = "".join(f'<div class="stat"><b>{v}</b><span>{k}</span></div>' for v, k in figures)
    return f'<div class="stats">{cells}</div>'


def _legend() -> str:
    keys = [("--ctx", "context"), ("--win", "window"), ("--trig", "trigger"),
            ("--tgt", "target"), ("--cut", "compaction")]  # fmt: skip
    spans = "".join(f'<span><i style="background: var({v})"></i>{k}</span>' for v, k in keys)
    return f'<p class="legend">{spans}</p>'


def _compactions(result: ReplayResult) -> str:
    if not result.compactions:
        return "<p>No compaction ran: the transcript stayed under the trigger.</p>"
    esc = html.escape
    rows = [
        "<table><thead><tr><th>#</th><th>before request</th><th>reason</th>"
        "<th>tokens before</th><th>after</th><th>saved</th><th>strategies</th>"
        "<th>summarizer calls</th><th>identifiers kept / left out</th></tr></thead><tbody>"
    ]
    for number, c in enumerate(result.compactions, 1):
        r = c.report
        outcome = (
            "" if r.landed and not r.error else f" (not applied: {esc(r.error or 'declined')})"
        )
        rows.append(
            f'<tr class="compaction-row"><td>{number}</td><td class="num">{c.turn}</td>'
            f"<td>{esc(r.reason)}{outcome}</td><td class='num'>{r.tokens_before:,}</td>"
            f"<td class='num'>{r.tokens_after:,}</td><td class='num'>{c.saved:,}</td>"
            f"<td>{esc(strategy_text(c)) or '&mdash;'}</td>"
            f"<td class='num'>{r.summarizer_calls}</td>"
            f"<td class='num'>{r.identifiers_kept} / {r.identifiers_left_out}</td></tr>"
        )
    rows.append("</tbody></table>")
    return "".join(rows)


def _fidelity(result: ReplayResult) -> str:
    fid = result.fidelity
    if fid is None:
        return "<p>Not measured.</p>"
    esc = html.escape
    rows = "".join(f"<li>{esc(line.strip())}</li>" for line in describe(fid))
    return (
        '<ul class="fidelity">'
        f"{rows}</ul><p class='note'>Measured on the last request against the whole transcript: "
        "the task and the user's messages as user messages of the view, word for word; "
        "identifiers and probes (the task's first line, every file modified, the last error of "
        "each failing command, the last test run, taken from the work ledger of the whole "
        "transcript) as text of the view.</p>"
    )


def _summaries(result: ReplayResult) -> str:
    blocks = []
    for number, c in enumerate(result.compactions, 1):
        for text in c.report.summaries:
            blocks.append(
                f'<details class="summary"><summary>compaction #{number}, before request '
                f"{c.turn}</summary><pre>{html.escape(text)}</pre></details>"
            )
    return "".join(blocks) or "<p>No summary was written.</p>"
