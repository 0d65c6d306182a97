"""The "batched" task (document 003): many small independent k-means problems, one per row
of a (rows, points, d) array; each row is started from several seeds and the seed with the
smallest inertia wins.

- Seeding (the harness's, shared by every implementation): for every row and seed, k
  distinct points of the row, sorted by their first coordinate, as the document sorts them.
- Stop rule: exactly `iterations`, or document 003's: a seed stops after the first iteration
  in which no centroid moved more than epsilon times its yard stick (the smallest distance
  between two of its initial centroids), at most `iterations`.
- Oracle: a float64 Lloyd run seed by seed and row by row, in plain loops (deliberately unlike
  the vectorised implementations), over a sample of rows when there are many.
- Validation: for every checked row, the best inertia must match the oracle's best within the
  dtype's tolerance. Inertia, not centroids, is compared: two seeds that reach the same
  clustering may be listed in either order.

Measured and recorded by kmbench.tasks.tasks (`kmbench reproduce assign-ladder` / `batched`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from kmbench.protocol import Implementation

TOLERANCES = {"float32": 1e-4, "float64": 1e-9}  # relative difference of the best inertia per row
MAX_CHECKED_ROWS = 2000


@dataclass(frozen=True)
class BatchedProblem:
    data: np.ndarray  # (rows, points, d)
    initial_centroids: np.ndarray  # (rows, seeds, k, d)
    iterations: int  # exactly this many, or the most with epsilon
    epsilon: float | None = None  # None: the iterations rule; else document 003's rule

    @property
    def rows(self) -> int:
        return self.data.shape[0]

    @property
    def seeds(self) -> int:
        return self.initial_centroids.shape[1]

    @property
    def k(self) -> int:
        return self.initial_centroids.shape[2]


@dataclass
class BatchedResult:
    centroids: np.ndarray  # (rows, k, d): the best seed's (NaN for rows not computed)
    inertia: np.ndarray  # (rows,): the best seed's (NaN for rows not computed)
    best_seed: np.ndarray  # (rows,)
    iterations: np.ndarray  # (rows, seeds): iterations each seed executed
    rows_done: int | None = None  # a time budget stopped it after this many rows (None: all)
    extrapolated_seconds: float | None = None  # the whole run's time, extrapolated, when cut

    @classmethod
    def unfilled(cls, rows: int, seeds: int, k: int, d: int) -> "BatchedResult":
        """NaN centroids and inertia, for a row-by-row implementation to fill."""
        return cls(np.full((rows, k, d), np.nan), np.full(rows, np.nan), np.zeros(rows, dtype=np.int64),
                   np.zeros((rows, seeds), dtype=np.int64))


SEEDING_ROWS = 4096  # rows drawn at a time: 100,000 rows x 32 seeds x 100 keys at once is 2.5 GB


def initial_centroids(data: np.ndarray, k: int, seeds: int, seed: int) -> np.ndarray:
    """(rows, seeds, k, d): k distinct points of each row per seed, sorted by first coordinate."""
    rows, points, d = data.shape
    if k > points:
        raise ValueError(f"k = {k} is larger than the points per row ({points}).")
    rng = np.random.default_rng(seed)
    out = np.empty((rows, seeds, k, d), dtype=data.dtype)
    for first in range(0, rows, SEEDING_ROWS):
        block = data[first:first + SEEDING_ROWS]
        # k distinct indices per (row, seed): the k smallest of random keys (a random
        # permutation's first k, as a set; the points are sorted below anyway).
        keys = rng.random((len(block), seeds, points))
        picks = np.argpartition(keys, k - 1, axis=2)[:, :, :k] if k < points else np.argsort(keys, axis=2)
        chosen = np.take_along_axis(block[:, None, :, :], picks[..., None], axis=2)
        order = np.argsort(chosen[..., 0], axis=2, kind="stable")
        out[first:first + SEEDING_ROWS] = np.take_along_axis(chosen, order[..., None], axis=2)
    return out


class BudgetedBatched(Implementation):
    """A slow CPU row of the batched task: it takes a time budget (kmbench.tasks.tasks hands it the
    suite's) and stops by RowBudget."""

    tasks = ("batched",)
    default_budget_s = 30.0

    def __init__(self, budget_s: float | None = None):
        self.budget_s = self.default_budget_s if budget_s is None else budget_s


class RowBudget:
    """A time budget for the slow CPU rows: `spent(done)` after each batch of rows says
    whether to stop; `cut(result)` marks a stopped result with the rows computed and the
    whole run's time extrapolated from them (stated as an extrapolation wherever shown)."""

    def __init__(self, seconds: float, rows: int):
        self.seconds, self.rows = seconds, rows
        self.start = time.perf_counter()
        self.done = rows

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def spent(self, done: int) -> bool:
        if done < self.rows and self.elapsed() > self.seconds:
            self.done = done
            return True
        return False

    def cut(self, result: "BatchedResult", elapsed: float) -> "BatchedResult":
        if self.done < self.rows:
            result.rows_done = self.done
            result.extrapolated_seconds = elapsed * self.rows / self.done
        return result


def yard_stick(centroids: np.ndarray) -> float:
    """The smallest distance between two of a seed's initial centroids (k x d)."""
    k = centroids.shape[0]
    if k < 2:
        return 0.0
    gaps = [np.linalg.norm(centroids[a] - centroids[b]) for a in range(k) for b in range(a + 1, k)]
    return float(min(gaps))


def lloyd_one(points: np.ndarray, start: np.ndarray, iterations: int, epsilon: float | None):
    """Plain float64 Lloyd for one row and one seed: (centroids, inertia, iterations)."""
    points = points.astype(np.float64)
    centroids = start.astype(np.float64).copy()
    limit = None if epsilon is None else epsilon * yard_stick(start.astype(np.float64))
    done = 0
    for done in range(1, iterations + 1):
        distances = ((points[:, None, :] - centroids[None, :, :]) ** 2).sum(axis=2)
        labels = distances.argmin(axis=1)
        moved = 0.0
        for cluster in range(centroids.shape[0]):
            members = points[labels == cluster]
            if len(members):
                new = members.mean(axis=0)
                moved = max(moved, float(np.linalg.norm(new - centroids[cluster])))
                centroids[cluster] = new
        if limit is not None and moved <= limit:
            break
    distances = ((points[:, None, :] - centroids[None, :, :]) ** 2).sum(axis=2)
    return centroids, float(distances.min(axis=1).sum()), done


@dataclass
class BatchedOracle:
    rows: np.ndarray  # which rows were checked
    inertia: np.ndarray  # (checked rows,): the best seed's inertia
    iterations: np.ndarray  # (checked rows, seeds)

    @classmethod
    def compute(cls, problem: BatchedProblem, max_rows: int = MAX_CHECKED_ROWS, seed: int = 0):
        rows = np.arange(problem.rows)
        if problem.rows > max_rows:
            rows = np.sort(np.random.default_rng(seed).choice(problem.rows, max_rows, replace=False))
        best = np.empty(len(rows))
        iterations = np.empty((len(rows), problem.seeds), dtype=np.int64)
        for slot, row in enumerate(rows):
            runs = [lloyd_one(problem.data[row], problem.initial_centroids[row, s], problem.iterations,
                              problem.epsilon) for s in range(problem.seeds)]
            best[slot] = min(run[1] for run in runs)
            iterations[slot] = [run[2] for run in runs]
        return cls(rows, best, iterations)


def judge(result: BatchedResult, oracle: BatchedOracle, dtype: str = "float32") -> tuple[str, str]:
    """("ok" | "mismatch", detail): every checked row's best inertia within the tolerance.
    A run cut by a time budget is judged on the checked rows it computed."""
    checked = np.ones(len(oracle.rows), dtype=bool)
    if result.rows_done is not None:
        checked = oracle.rows < result.rows_done
        if not checked.any():
            return "mismatch", f"none of the {len(oracle.rows)} checked rows was computed"
    mine = np.asarray(result.inertia, dtype=np.float64)[oracle.rows[checked]]
    if not np.isfinite(mine).all():
        return "mismatch", "some rows' inertia is NaN or infinite"
    expected = oracle.inertia[checked]
    scale = np.maximum(expected, 1e-300)
    difference = np.abs(mine - expected) / scale
    tolerance = TOLERANCES.get(dtype, TOLERANCES["float32"])
    bad = difference > tolerance
    if bad.any():
        worst = int(oracle.rows[checked][np.argmax(difference)])
        return "mismatch", (f"{int(bad.sum())} of {len(bad)} checked rows differ in best inertia by more than "
                            f"{tolerance:.0e} (worst: row {worst}, {difference.max():.2e})")
    return "ok", ""
