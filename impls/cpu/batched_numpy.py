"""Batched k-means (document 003) vectorised in NumPy: the distances of every (row, seed,
point, cluster) of a chunk of rows come from one broadcast, the sums from one-hot products.
The chunk bounds the broadcast's memory (it grows with rows x seeds x points x k), and like
the scikit-learn loop the row stops at a time budget and says so. Each seed stops by
itself under document 003's rule (kmbench.tasks.batched); stopped seeds keep their centroids
while the others go on."""

from __future__ import annotations

import numpy as np

from kmbench.tasks.batched import BatchedProblem, BatchedResult, BudgetedBatched, RowBudget


def _yard_sticks(starts: np.ndarray) -> np.ndarray:
    """(rows, seeds): the smallest distance between two initial centroids of each seed."""
    k = starts.shape[2]
    if k < 2:
        return np.zeros(starts.shape[:2])
    gaps = np.linalg.norm(starts[:, :, :, None, :] - starts[:, :, None, :, :], axis=-1)
    gaps[..., np.arange(k), np.arange(k)] = np.inf
    return gaps.min(axis=(2, 3))


CHUNK_BYTES = 1 << 26  # the (rows, seeds, points, k) float64 distances of one chunk of rows


class BatchedNumpy(BudgetedBatched):
    name = "batched-numpy"
    row_order = 300
    label = "NumPy (batched, vectorised)"
    description = "document 003's batched k-means, every row and seed of a chunk of rows in one NumPy broadcast"
    source = "003 (batched k-means), restated in NumPy"
    default_budget_s = 60.0

    def run(self, problem: BatchedProblem) -> BatchedResult:
        rows, seeds, k, d = problem.initial_centroids.shape
        points = problem.data.shape[1]
        chunk = max(1, CHUNK_BYTES // (seeds * points * k * 8))
        result = BatchedResult.unfilled(rows, seeds, k, d)
        budget = RowBudget(self.budget_s, rows)
        for first in range(0, rows, chunk):
            part = slice(first, first + chunk)
            (result.centroids[part], result.inertia[part], result.best_seed[part],
             result.iterations[part]) = self._rows(problem.data[part], problem.initial_centroids[part], problem)
            if budget.spent(min(rows, first + chunk)):
                break
        elapsed = budget.elapsed()
        self.phases = {"iterate": elapsed}
        return budget.cut(result, elapsed)

    @staticmethod
    def _rows(data: np.ndarray, starts: np.ndarray, problem: BatchedProblem):
        data = data.astype(np.float64)  # (rows, points, d)
        centroids = starts.astype(np.float64).copy()  # (rows, seeds, k, d)
        rows, seeds, k, _ = centroids.shape
        limits = None if problem.epsilon is None else problem.epsilon * _yard_sticks(centroids)
        running = np.ones((rows, seeds), dtype=bool)
        iterations = np.zeros((rows, seeds), dtype=np.int64)
        for _ in range(problem.iterations):
            if not running.any():
                break
            distances = ((data[:, None, :, None, :] - centroids[:, :, None, :, :]) ** 2).sum(-1)
            onehot = np.eye(k)[distances.argmin(-1)]  # (rows, seeds, points, k)
            counts = onehot.sum(axis=2)  # (rows, seeds, k)
            sums = np.einsum("rspk,rpd->rskd", onehot, data)
            filled = (counts > 0)[..., None] & running[:, :, None, None]
            new = np.where(filled, sums / np.maximum(counts, 1)[..., None], centroids)
            moved = np.linalg.norm(new - centroids, axis=-1).max(axis=-1)  # (rows, seeds)
            centroids = new
            iterations += running
            if limits is not None:
                running &= moved > limits
        distances = ((data[:, None, :, None, :] - centroids[:, :, None, :, :]) ** 2).sum(-1)
        inertia = distances.min(-1).sum(-1)  # (rows, seeds)
        best = inertia.argmin(axis=1)
        pick = np.arange(rows)
        return centroids[pick, best], inertia[pick, best], best, iterations
