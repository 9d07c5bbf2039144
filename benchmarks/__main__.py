"""Run benchmarks and write their tables.

Usage: ``python -m benchmarks [topic ...] [--quick] [--out DIR]``.

Without topics, every ``bench_<topic>.py`` module runs. A full run writes
``results/<topic>.json`` and ``results/<topic>.md``; a ``--quick`` run (small sizes, for a smoke
check) only prints its tables, so it never overwrites committed figures, unless ``--out`` says
where to write.
"""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import benchmarks
from benchmarks._common import machine, machine_note

RESULTS = benchmarks.ROOT / "results"
KEYS = ("title", "columns", "rows", "notes")


def topics() -> list[str]:
    """The benchmark topics available, from the ``bench_<topic>`` modules beside this file."""
    return sorted(
        info.name.removeprefix("bench_")
        for info in pkgutil.iter_modules(benchmarks.__path__)
        if info.name.startswith("bench_")
    )


def run_topic(topic: str, quick: bool = False) -> dict[str, Any]:
    """Run one benchmark, check its result has the agreed shape, and add a note naming the
    machine (cores, Python, load) to it, so that every table says where it was measured."""
    module = importlib.import_module(f"benchmarks.bench_{topic}")
    result: dict[str, Any] = module.run(quick=quick)
    missing = [key for key in KEYS if key not in result]
    if missing:
        raise ValueError(f"bench_{topic}.run() returned no {', '.join(missing)}")
    width = len(result["columns"])
    for number, row in enumerate(result["rows"], start=1):
        if len(row) != width:
            raise ValueError(
                f"bench_{topic} row {number} has {len(row)} cells for {width} columns: {row!r}"
            )
    if not any(str(note).startswith("Machine:") for note in result["notes"]):
        result["notes"] = [*result["notes"], machine_note()]
    return result


def render_markdown(result: dict[str, Any]) -> str:
    """A result as a markdown section: title, table, then the notes as a list."""
    lines = [f"## {result['title']}", ""]
    lines.append("| " + " | ".join(str(c) for c in result["columns"]) + " |")
    lines.append("|" + "|".join("---" for _ in result["columns"]) + "|")
    for row in result["rows"]:
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    if result["notes"]:
        lines.append("")
        lines.extend(f"- {note}" for note in result["notes"])
    return "\n".join(lines) + "\n"


def _cell(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def write_result(topic: str, result: dict[str, Any], out: Path) -> None:
    """Write ``<topic>.json`` (the result plus the machine it ran on) and ``<topic>.md``."""
    out.mkdir(parents=True, exist_ok=True)
    record = dict(result)
    record["environment"] = machine()
    (out / f"{topic}.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    (out / f"{topic}.md").write_text(render_markdown(result), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    known = topics()
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("topics", nargs="*", help=f"what to run (default: all of {known})")
    parser.add_argument("--quick", action="store_true", help="small sizes; print, do not write")
    parser.add_argument("--out", type=Path, help=f"where to write results (default: {RESULTS})")
    args = parser.parse_args(argv)
    unknown = [t for t in args.topics if t not in known]
    if unknown:
        print(f"unknown topic {unknown[0]!r}; choose from {', '.join(known)}", file=sys.stderr)
        return 2
    out = args.out if args.out is not None else (None if args.quick else RESULTS)
    for topic in args.topics or known:
        result = run_topic(topic, quick=args.quick)
        print(render_markdown(result))
        if out is not None:
            write_result(topic, result, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
