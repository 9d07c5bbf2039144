"""What every benchmark shares: the message pool, the machine it ran on, and summary statistics.

Figures are summarised the same way everywhere:

- per-operation samples (thousands of appends, say) as the median and the 95th percentile;
- repetitions of a whole measurement (five cold starts, say) as the median and the range, the
  highest minus the lowest over the median, in percent: with a handful of repetitions the range
  hides nothing, where an interquartile range would.

Ratios are always taken between medians measured in the same run.
"""

from __future__ import annotations

import gc
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks import transcript_messages
from ctxfold.messages import Message

UNAVAILABLE = "not available"
"""The cell of a figure that could not be measured (a peer not installed, a feature not there)."""


class BenchmarkError(Exception):
    """A measurement that could not be taken as designed (a child process failed, a side read
    fewer items than were written): the run stops rather than print a wrong figure."""


NOT_MEASURED = "—"
"""The cell of a figure left out on purpose (a size a peer is not run at, a ratio of those)."""


def pool() -> tuple[list[Message], str]:
    """The messages benchmarks cycle through, and a phrase saying where they came from."""
    messages = transcript_messages()
    if messages:
        return messages, f"the {len(messages):,} messages of the shared agent transcripts"
    from ctxfold.testing.transcripts import generate

    messages = generate(seed=7, steps=300)
    return messages, f"{len(messages):,} generated coding-agent messages (transcripts absent)"


def cycled(messages: Sequence[Message], count: int, start: int = 0) -> list[Message]:
    """`count` messages taken round-robin from `messages`, beginning at index `start`."""
    return [messages[(start + i) % len(messages)] for i in range(count)]


def machine() -> dict[str, Any]:
    """The machine a run happens on: cores, Python, system, and the load when asked."""
    return {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "system": f"{platform.system()} {platform.machine()}",
        "load_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }


def machine_note() -> str:
    """One sentence naming the machine, for the notes of every table."""
    m = machine()
    load = f", 1-minute load {m['load_1min']}" if m["load_1min"] is not None else ""
    return (
        f"Machine: {m['cores']} cores, {m['implementation']} {m['python']}, {m['system']}"
        f"{load} when this table was finished."
    )


def disk_note(folder: str | os.PathLike[str]) -> str:
    """Which file system holds `folder` (from /proc/mounts, where there is one): a durable
    append's cost is mostly the disk's flush, so a table of them says where the files were."""
    target = os.path.realpath(folder)
    best = ("", "unknown file system", "")
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            for line in mounts:
                device, point, kind = line.split()[:3]
                inside = target == point or target.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best[0]):
                    best = (point, kind, device)
    except OSError:
        return f"files in {target}"
    return f"files in {target}, on {best[1]} ({best[2]} mounted at {best[0]})"


@dataclass(frozen=True)
class Summary:
    """Samples of one figure: their median, 95th percentile, lowest, highest and count."""

    median: float
    p95: float
    low: float
    high: float
    count: int

    @property
    def range_percent(self) -> float:
        """(highest - lowest) / median, in percent; 0 for a single sample."""
        return 100 * (self.high - self.low) / self.median if self.median else 0.0


def summarize(samples: Sequence[float]) -> Summary:
    """The `Summary` of at least one sample."""
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return Summary(statistics.median(ordered), p95, ordered[0], ordered[-1], len(ordered))


def timed_ops(
    op: Callable[[Message], object],
    new: Sequence[Message],
    budget_s: float,
    min_samples: int = 3,
) -> list[float]:
    """Microseconds of each `op(message)` over `new`, stopping once `budget_s` seconds have gone
    by and at least `min_samples` were taken. Garbage collection stays on: it is part of what
    a caller pays, and the 95th percentile shows it."""
    samples: list[float] = []
    started = time.perf_counter()
    gc.collect()
    for message in new:
        t0 = time.perf_counter_ns()
        op(message)
        samples.append((time.perf_counter_ns() - t0) / 1_000)
        if len(samples) >= min_samples and time.perf_counter() - started > budget_s:
            break
    return samples


def ratio(numerator: float | str, denominator: float | str, digits: int = 2) -> float | str:
    """`numerator / denominator` rounded, or a dash when either side was not measured."""
    if isinstance(numerator, str) or isinstance(denominator, str) or not denominator:
        return NOT_MEASURED
    return round(numerator / denominator, digits)


def plural(count: int, one: str, many: str | None = None) -> str:
    """ "1 repetition", "5 repetitions": a count and its noun, for the notes."""
    return f"{count:,} {one if count == 1 else (many or one + 's')}"


def rounded(value: float, digits: int = 1) -> float:
    """A figure rounded for a table cell."""
    return round(value, digits)
