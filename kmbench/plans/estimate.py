"""How long a cell will take, said before it starts when that is long (issue 34: `reproduce
yinyang` began 300,000 x 408 CPU cells without a word on their hours).

The yardsticks are the pieces of every cell the harness itself computes, each timed once here on
a small block of the cell's shape and scaled by n (and k): the judge's float64 distances, the
rate a row as fast as the float64 pass runs at, and one step of the judge's certifier, which the
validation repeats for every iteration. A cell costs the reference's iterations once per dataset,
then per row its warm-up and counted runs, and its validation: one stepped run of the row, each
step certified. Rows run at their own speed: faster rows (every GPU row) take less, and a slower
one says so itself once its warm-up has shown it (kmbench.progress's `expect`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from kmbench.judge.certify import Certifier
from kmbench.judge.precision import FLOAT32
from kmbench.progress import LONG_S
from kmbench.protocol import reference
from kmbench.report.formatting import rough_duration

BLOCK_TERMS = 1 << 24  # points x centroids x d of a block: enough work to time, little to wait for
BLOCK_POINTS = (1024, 16384)  # at least, at most
BLOCK_CENTROIDS = 256  # at most: the block's cost is scaled by k over this


@dataclass(frozen=True)
class Planned:
    """One dataset and its settings, with the rows that can run on it."""

    name: str
    n: int
    d: int
    settings: object  # runner.Settings: k, iterations, warmup, repeats, max_time
    rows: int


def _block(d: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    centroids = min(k, BLOCK_CENTROIDS)
    count = int(np.clip(BLOCK_TERMS // (centroids * d), *BLOCK_POINTS))
    points = np.random.default_rng(0).standard_normal((count, d)).astype(np.float32)
    return points, points[:centroids].astype(np.float64)


def _fastest(work, times: int = 3) -> float:
    """The least of a few timings of work() after a first, untimed call (first touch, BLAS):
    a block of milliseconds is easily slowed by a neighbour, never sped up."""
    work()
    best = float("inf")
    for _ in range(times):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return max(best, 1e-9)


@lru_cache(maxsize=32)
def float64_terms_per_second(d: int, k: int) -> float:
    """Point x centroid x dimension terms per second of the judge's float64 distances here."""
    points, centroids = _block(d, k)
    return points.shape[0] * centroids.shape[0] * d / _fastest(lambda: reference.squared_distances(points, centroids))


@lru_cache(maxsize=32)
def judge_seconds_per_point(d: int, k: int) -> float:
    """Seconds one certified step costs per point here (a float32 row's step, k centroids)."""
    points, centroids = _block(d, k)
    labels, _ = reference.nearest(points, centroids)
    step = reference.update(points, labels, centroids)  # a true Lloyd step: certified to its end
    certifier = Certifier.of(points, FLOAT32)
    seconds = _fastest(lambda: certifier.step(1, centroids, step))
    return seconds / points.shape[0] * k / centroids.shape[0]


def seconds(planned: Planned) -> tuple[float, float]:
    """(the whole step, one row of it): the estimate in seconds."""
    s = planned.settings
    iteration = planned.n * s.k * planned.d / float64_terms_per_second(planned.d, s.k)
    run = iteration * s.iterations
    counted = s.counting().counted_seconds(run)  # under a budget, never fewer than its least runs
    validation = run + planned.n * s.iterations * judge_seconds_per_point(planned.d, s.k)
    row = s.warmup * run + counted + validation
    return run + planned.rows * row, row


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
        # The total is for rows at the yardstick's speed, said before the count: a slower row's
        # own line ("timed runs about 79 s more") otherwise read as contradicting "78 s for 7 rows".
        rows = f"{planned.rows} row{'s' if planned.rows > 1 else ''}"
        lines.append(f"{planned.name} ({planned.n:,} x {planned.d}, k = {s.k:,}, {s.iterations} iterations): "
                     f"about {rough_duration(total)} if its {rows} {'are' if planned.rows > 1 else 'is'} as fast "
                     f"as NumPy in float64 here ({rough_duration(row)} a row with its validation); a slower row "
                     "says its own time once its warm-up has run")
    return lines
