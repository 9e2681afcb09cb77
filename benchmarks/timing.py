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
