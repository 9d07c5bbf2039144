"""Reports on what compaction did: a self-contained HTML page for a replay."""

from ctxfold.report.html import render_html, write_html

__all__ = ["render_html", "write_html"]
