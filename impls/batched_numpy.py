"""Batched k-means (document 003) vectorised over every row and seed at once in NumPy: the
distances of all (row, seed, point, cluster) come from one broadcast, the sums from one-hot
products. Each seed stops by itself under document 003's rule (kmbench.batched); stopped
seeds keep their centroids while the others go on."""

from __future__ import annotations

import numpy as np

from kmbench.batched import BatchedProblem, BatchedResult
from kmbench.protocol import Implementation
from kmbench.timing import host_region


def _yard_sticks(starts: np.ndarray) -> np.ndarray:
    """(rows, seeds): the smallest distance between two initial centroids of each seed."""
    k = starts.shape[2]
    if k < 2:
        return np.zeros(starts.shape[:2])
    gaps = np.linalg.norm(starts[:, :, :, None, :] - starts[:, :, None, :, :], axis=-1)
    gaps[..., np.arange(k), np.arange(k)] = np.inf
    return gaps.min(axis=(2, 3))


class BatchedNumpy(Implementation):
    name = "batched-numpy"
    label = "NumPy (batched, vectorised)"
    description = "document 003's batched k-means, every row and seed in one NumPy broadcast"
    source = "003 (batched k-means), restated in NumPy"
    tasks = ("batched",)

    def run(self, problem: BatchedProblem) -> BatchedResult:
        data = problem.data.astype(np.float64)  # (rows, points, d)
        centroids = problem.initial_centroids.astype(np.float64).copy()  # (rows, seeds, k, d)
        rows, seeds, k, _ = centroids.shape
        limits = None if problem.epsilon is None else problem.epsilon * _yard_sticks(centroids)
        running = np.ones((rows, seeds), dtype=bool)
        iterations = np.zeros((rows, seeds), dtype=np.int64)
        phases: dict[str, float] = {}
        with host_region(phases, "iterate"):
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
        self.phases = phases
        return BatchedResult(centroids[pick, best], inertia[pick, best], best, iterations)
