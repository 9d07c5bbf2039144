"""The replay report: one self-contained HTML file whose chart renders in a real browser."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ctxfold.compactor.report import CompactionReport
from ctxfold.pipeline import StrategyEffect
from ctxfold.replay import ReplayCompaction, ReplayResult, Request, render_html, write_html

HOSTILE = "</script><script>alert('x')</script> & <b>bold</b>"


def _result(turns: int = 30, every: int = 9) -> ReplayResult:
    """A replay result built from real values: context grows, a compaction every `every` turns."""
    requests: list[Request] = []
    compactions: list[ReplayCompaction] = []
    size = 1_000
    for turn in range(1, turns + 1):
        before = size + 700
        slot = None
        if turn % every == 0:
            after = 4_000
            report = CompactionReport(
                session_id="s",
                reason="threshold",
                tokens_before=before,
                tokens_after=after,
                target=4_000,
                fits=True,
                pinned_tokens=900,
                strategies=(
                    StrategyEffect("clear_tool_results", before, before - 2_000, 3),
                    StrategyEffect("summarize", before - 2_000, after, 1),
                ),
                summarizer_calls=1,
                summaries=(f"## Objective\n- compaction at {turn} {HOSTILE}",),
                outcome="landed",
            )
            slot = len(compactions)
            compactions.append(ReplayCompaction(turn, report))
            size = after
        else:
            size = before
        requests.append(Request(turn, turn * 2, before, size, size, size - 700, slot))
    return ReplayResult(
        window=10_000,
        trigger=8_000,
        target=4_000,
        messages=turns * 2,
        original_tokens=1_000 + 700 * turns,
        requests=tuple(requests),
        compactions=tuple(compactions),
        duration_s=0.5,
        counter="o200k_base",
    )


def test_the_page_is_self_contained() -> None:
    """The report fetches nothing at view time: no external script, style, image or font."""
    page = render_html(_result())
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "@import" not in page and "url(" not in page


def test_summaries_and_names_are_escaped() -> None:
    """Text from a transcript cannot inject markup or end the page's script early."""
    page = render_html(_result(), title="<i>run</i>")
    assert "<script>alert" not in page
    assert "&lt;/script&gt;&lt;script&gt;alert(&#x27;x&#x27;)" in page
    assert "<title>&lt;i&gt;run&lt;/i&gt;</title>" in page
    assert page.count("<script") == 2  # the data block and the chart script, nothing else


def test_the_page_lists_each_compaction_and_the_cache_figure() -> None:
    """Each compaction has a row with its strategies and savings; the reuse share is stated."""
    result = _result(turns=30, every=9)
    page = render_html(result)
    assert page.count('class="compaction-row"') == len(result.compactions) == 3
    assert "clear_tool_results \u22122,000" in page
    assert f"{result.cache_reuse:.1%}" in page
    assert page.count('<details class="summary">') == 3


def test_write_html_leaves_no_partial_file(tmp_path: Path) -> None:
    """The report is written whole or not at all; a failed write leaves no file or temp file."""
    target = tmp_path / "report.html"
    write_html(target, _result())
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    with pytest.raises(OSError):
        write_html(tmp_path / "missing-dir" / "report.html", _result())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("CI=true but chromium is not installed (apt-get install chromium)")
    pytest.skip("chromium is not installed; the HTML report is not checked in a browser")


def dump_dom(page: Path, tmp_path: Path) -> str:
    """The DOM after scripts ran, as headless Chromium sees it (no network, no profile)."""
    args = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--dump-dom",
        page.as_uri(),
    ]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_chart_renders_in_headless_chromium(tmp_path: Path) -> None:
    """Opened in a browser, the chart draws one point per request, one mark per compaction, and
    the window, trigger and target lines."""
    result = _result(turns=40, every=9)
    page = tmp_path / "report.html"
    write_html(page, result)
    source = page.read_text(encoding="utf-8")
    assert "<circle" not in source, "points must come from the script, or this test proves nothing"
    dom = dump_dom(page, tmp_path)
    assert 'data-chart="rendered"' in dom
    assert len(re.findall(r'<circle class="turn"', dom)) == len(result.requests) == 40
    assert len(re.findall(r'<g class="compaction"', dom)) == len(result.compactions) == 4
    for line in ("line-window", "line-trigger", "line-target"):
        assert f'class="{line}"' in dom
    saved = re.findall(r'<g class="compaction" data-turn="(\d+)" data-saved="(\d+)"', dom)
    assert [(int(t), int(s)) for t, s in saved] == [(c.turn, c.saved) for c in result.compactions]
