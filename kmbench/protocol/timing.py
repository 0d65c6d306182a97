"""Clocks and statistics.

Implementations time their regions with these timers, never with a clock of their
own choosing: `host_region` for CPU work, `CudaEventRegion` for GPU work (events
recorded on the stream, read after one synchronisation at the end).
"""

from __future__ import annotations

import math
import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass

WIDE_SPREAD_CV = 0.10  # coefficient of variation above which we warn


@contextmanager
def host_region(phases: dict, name: str):
    """Time a CPU region with the monotonic high-resolution clock into phases[name]."""
    start = time.perf_counter()
    try:
        yield
    finally:
        phases[name] = phases.get(name, 0.0) + time.perf_counter() - start


class CudaEventRegion:
    """Time a GPU region with CUDA events on the current stream.

    No host synchronisation happens inside the region; `seconds()` synchronises on
    the end event once, after the work has been queued.
    """

    def __init__(self):
        import cupy

        self._start = cupy.cuda.Event()
        self._end = cupy.cuda.Event()

    def __enter__(self):
        self._start.record()
        return self

    def __exit__(self, *exc):
        self._end.record()
        return False

    def seconds(self) -> float:
        import cupy

        self._end.synchronize()
        return cupy.cuda.get_elapsed_time(self._start, self._end) / 1000.0


@dataclass
class Stats:
    mean: float
    median: float
    min: float
    max: float
    std: float
    count: int

    @property
    def cv(self) -> float:
        return self.std / self.mean if self.mean > 0 else 0.0

    def as_dict(self) -> dict:
        return {
            "mean": self.mean,
            "median": self.median,
            "min": self.min,
            "max": self.max,
            "std": self.std,
            "cv": self.cv,
            "count": self.count,
        }


def summarize(values: list[float]) -> Stats | None:
    if not values:
        return None
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return Stats(
        mean=statistics.fmean(values),
        median=statistics.median(values),
        min=min(values),
        max=max(values),
        std=std,
        count=len(values),
    )


def spread_warning(stats: Stats | None) -> str | None:
    """A warning that tells the user what to do, or None when the spread is narrow."""
    if stats is None or stats.count < 2 or stats.cv <= WIDE_SPREAD_CV:
        return None
    return (
        f"wide spread (CV {stats.cv:.0%} over {stats.count} repeats): close other busy "
        "programs, or raise --repeats, before trusting the mean"
    )


def format_seconds(seconds: float | None) -> str:
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "-"
    if seconds >= 100:
        return f"{seconds:.1f}s"
    if seconds >= 1:
        return f"{seconds:.3f}s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f}ms"
    return f"{seconds * 1e6:.1f}us"
