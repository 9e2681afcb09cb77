"""Timing helpers the benchmark scripts share (they import it as a sibling module: every
script is run by its path, so ``benchmarks/`` is first on ``sys.path``)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_p95_ms(samples: list[float]) -> tuple[float, float]:
    """Median and 95th percentile of ``samples`` (seconds), in milliseconds."""
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return statistics.median(ordered) * 1000, p95 * 1000


def timed(fn: Callable[[], object]) -> float:
    """Seconds one call of ``fn`` takes."""
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def print_comparison(
    rows: list[tuple[str, str, str, str]],
    medians: dict[str, tuple[float, float]],
    target: str = "target",
) -> None:
    """A Markdown table of ``rows`` (name, target, comparator shown, comparator's row name),
    each with its median and p95 from ``medians`` and the ratio to its comparator's median."""
    print(
        f"| operation | median ms | p95 ms | {target} | comparator | comparator median ms "
        "| median / comparator |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, goal, comparator, key in rows:
        median, p95 = medians[name]
        other = medians.get(key)
        ratio = f"{median / other[0]:.2f}x" if other else ""
        shown = f"{other[0]:.2f}" if other else ""
        print(f"| {name} | {median:.2f} | {p95:.2f} | {goal} | {comparator} | {shown} | {ratio} |")
