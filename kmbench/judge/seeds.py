"""Scans kept so that later scans of the same data start from their bounds (NOTES.md, "Carried
bounds"). A scan from centroids C leaves, per point, its nearest centroid and a lower bound on
its distance to every other one; from centroids C' that moved little, most points are settled by
those bounds without being scored again.

Two sources serve a step: the bank of the problem, which keeps the first scan made at each step
(the float64 reference's, or the first row's where the reference came from the cache; a row's
step t starts from centroids within rounding of the reference's until it parts from them), and
the last scans of the trajectory being certified (the centroids of consecutive steps converge).
The bank lives in host memory, within a byte budget, so that it holds no GPU memory between cells.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from kmbench.judge.precision import FLOAT64, gamma

BANK_BYTES = 2 << 30  # host memory the bank may hold (a seed costs 8 bytes a point)
DEVICE_SHARE = 1 / 8  # of a GPU's memory, the most the bank holds there


def bound_slack(d: int) -> float:
    """How much, relatively, carried bounds are widened for their own float64 roundings (a
    difference, a sum of d squares, a square root: under (d + 4) 2^-53 each); NOTES.md."""
    return max(1e-12, 4 * gamma(d + 8, FLOAT64.accumulate))


@dataclass
class Seed:
    """An earlier scan to start from: the centroids it scanned, each point's nearest among them,
    and a lower bound on each point's distance (not squared) to every other one of them (float32,
    rounded down; 0 where none is known)."""

    centroids: np.ndarray  # (k, d) float64, on the host wherever the rest is
    nearest: object  # (n,) int32
    lower: object  # (n,) float32

    @property
    def nbytes(self) -> int:
        return int(self.nearest.nbytes + self.lower.nbytes)

    def on(self, xp) -> "Seed":
        """The same seed with its arrays where xp computes (from a GPU, into page-locked host
        memory: the bank's seeds go back and forth, and pageable copies are several times slower)."""
        if isinstance(self.nearest, np.ndarray) == (xp is np):
            return self
        return Seed(self.centroids, *((_to_host(a) if xp is np else xp.asarray(a)) for a in (self.nearest, self.lower)))

    def moved(self, centroids, xp):
        """Per centroid, how far it is from this seed's: (k,) float64, rounded up."""
        gap = xp.asarray(centroids, dtype=xp.float64) - xp.asarray(self.centroids)
        return xp.sqrt((gap * gap).sum(axis=1)) * (1 + bound_slack(gap.shape[1]))

    def fits(self, centroids, n: int) -> bool:
        return tuple(self.centroids.shape) == tuple(centroids.shape) and self.nearest.shape[0] == n


def _to_host(array) -> np.ndarray:
    import cupyx

    out = cupyx.empty_pinned(array.shape, dtype=array.dtype)
    array.get(out=out)
    return out


class Bank:
    """The first scan made at each step of one problem's trajectories: on the GPU where it was
    made, while the bank's share of the GPU allows (no copy back and forth), else in host memory
    within its budget."""

    def __init__(self, budget: int | None = None):
        self.budget = int(os.environ.get("KMBENCH_SEED_BYTES", BANK_BYTES)) if budget is None else budget
        self.by_step: dict[int, Seed] = {}

    @property
    def nbytes(self) -> int:
        return sum(seed.nbytes for seed in self.by_step.values() if isinstance(seed.nearest, np.ndarray))

    def device_nbytes(self) -> int:
        return sum(seed.nbytes for seed in self.by_step.values() if not isinstance(seed.nearest, np.ndarray))

    def keep(self, step: int, seed: Seed) -> None:
        """Keep the seed of this step, where the step has none yet and a budget allows."""
        if step in self.by_step:
            return
        if not isinstance(seed.nearest, np.ndarray) and self.device_nbytes() + seed.nbytes <= _device_budget():
            self.by_step[step] = seed
        elif self.nbytes + seed.nbytes <= self.budget:
            self.by_step[step] = seed.on(np)

    def get(self, step: int) -> Seed | None:
        return self.by_step.get(step)

    def release_device(self) -> None:
        """Drop the seeds held on a GPU (their memory goes back with the pools')."""
        self.by_step = {step: seed for step, seed in self.by_step.items() if isinstance(seed.nearest, np.ndarray)}

    def clear(self) -> None:
        self.by_step.clear()


def _device_budget() -> int:
    """GPU memory the bank may hold: DEVICE_SHARE of the GPU's (none while the judge keeps off the
    GPUs, reference.judge_from_host)."""
    import cupy

    from kmbench.protocol import reference

    return 0 if reference.from_host() else int(DEVICE_SHARE * cupy.cuda.runtime.memGetInfo()[1])


def closest_first(candidates, centroids, n: int, xp, most: int = 1) -> list:
    """The seeds that fit these centroids, those that moved least first, at most `most` (one by
    default: a second one rarely settles what the closest could not, and costs a pass)."""
    usable = [seed for seed in candidates if seed is not None and seed.fits(centroids, n)]
    ranked = sorted(usable, key=lambda seed: float(seed.moved(centroids, xp).max()) if centroids.shape[0] else 0.0)
    return ranked[:most]
