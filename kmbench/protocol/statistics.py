"""What the harness makes of a cell's repeated times: their summary (mean, median, extremes,
spread) and the warning a wide spread deserves."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

WIDE_SPREAD_CV = 0.10  # coefficient of variation above which we warn
SPREAD = "wide spread"  # how that warning begins (the run's summary gathers them in one line)


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
        f"{SPREAD} (CV {stats.cv:.0%} over {stats.count} repeats): close other busy "
        "programs, or raise --repeats, before trusting the mean"
    )
