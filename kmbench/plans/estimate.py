"""How long a cell will take, said before it starts when that is long (issue 34: `reproduce
yinyang` began 300,000 x 408 CPU cells without a word on their hours).

The yardstick is the one piece of every cell the harness itself computes: the judge's float64
pass (kmbench.protocol.reference), timed once here on a small block of the cell's shape and
scaled by n x k x d. A cell costs the reference's iterations once per dataset, then per row its
warm-up and counted runs plus the judge's stepping of one run. Rows run at their own speed, so a
row as fast as the float64 pass is the estimate; faster rows (every GPU row) take less.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from kmbench.protocol import reference

LONG_S = 60.0  # cells expected to take longer are announced
BLOCK_POINTS = 4096


@dataclass(frozen=True)
class Planned:
    """One dataset and its settings, with the rows that can run on it."""

    name: str
    n: int
    d: int
    settings: object  # runner.Settings: k, iterations, warmup, repeats, max_time
    rows: int


@lru_cache(maxsize=32)
def float64_terms_per_second(d: int, k: int) -> float:
    """Point x centroid x dimension terms per second of the judge's float64 distances here."""
    rng = np.random.default_rng(0)
    points, centroids = rng.standard_normal((BLOCK_POINTS, d)), rng.standard_normal((min(k, 256), d))
    reference.squared_distances(points, centroids)  # first touch of the arrays and of BLAS
    start = time.perf_counter()
    reference.squared_distances(points, centroids)
    return points.shape[0] * centroids.shape[0] * d / max(time.perf_counter() - start, 1e-9)


def seconds(planned: Planned) -> tuple[float, float]:
    """(the whole step, one row of it): the estimate in seconds."""
    s = planned.settings
    iteration = planned.n * s.k * planned.d / float64_terms_per_second(planned.d, s.k)
    run = iteration * s.iterations
    counted = s.repeats * run if s.max_time is None else min(s.repeats * run, s.max_time + run)
    row = s.warmup * run + counted + run  # warm-up, counted runs, the judge's stepping
    return run + planned.rows * row, row


def duration_text(value: float) -> str:
    if value < 120:
        return f"{value:.0f} s"
    if value < 2 * 3600:
        return f"{value / 60:.0f} min"
    return f"{value / 3600:.1f} h"


def long_cells(plan: list[Planned], limit: float = LONG_S) -> list[str]:
    """A sentence for each step expected to take longer than `limit` seconds."""
    lines = []
    for planned in plan:
        if planned.rows == 0:
            continue
        total, row = seconds(planned)
        if total < limit:
            continue
        s = planned.settings
        lines.append(f"{planned.name} ({planned.n:,} x {planned.d}, k = {s.k:,}, {s.iterations} iterations): "
                     f"about {duration_text(total)} for {planned.rows} row{'s' if planned.rows > 1 else ''}, "
                     f"{duration_text(row)} a row at this machine's float64 rate (faster rows take less)")
    return lines
