"""k-means++ seeding, computed once by the harness and handed to every implementation.

The greedy variant scikit-learn uses: the first centre is a uniformly drawn point; each next
one is the best of 2 + ln(k) candidates drawn with probability proportional to the squared
distance to the nearest centre so far, "best" meaning the one that leaves the smallest total
of those squared distances. Written once for NumPy and CuPy: on a GPU the n x candidates
distances are one matrix product per step, so seeding 5,000 centres in 300,000 x 408 takes
seconds, not the CPU's minutes.

The random draws come from NumPy's generator on the host in both cases, so the same seed
draws the same numbers on either device; the picks can differ only where float64 sums in a
different order move a draw across a boundary between two points. Distances use the data
shifted by their mean, in float64, so the expanded form loses nothing far from the origin.
"""

from __future__ import annotations

import time

import numpy as np

from kmbench.protocol.reference import device_module


def kmeans_plusplus(data: np.ndarray, k: int, seed: int, xp=np, weights: np.ndarray | None = None) -> np.ndarray:
    """k rows of `data` (data's dtype, where data are: a host array, or a CuPy array with xp CuPy),
    chosen by greedy k-means++ on `xp`.
    `weights` (kmbench.KMeans's sample weights): a point of weight w counts as w points, in the
    draws and in the totals, as in scikit-learn's; None draws as before, so the benchmark's
    starts stay what they were."""
    import scipy.sparse as sp  # here: `kmbench --help` loads no scipy (tests/test_startup_imports.py)

    rng = np.random.default_rng(seed)
    n = data.shape[0]
    trials = 2 + int(np.log(k))
    if sp.issparse(data):  # kmbench.KMeans's CSR input, left uncentred (centring would fill it in)
        points = sp.csr_matrix(data, dtype=np.float64)
        norms = np.asarray(points.multiply(points).sum(axis=1), dtype=np.float64).ravel()
    else:
        points = xp.array(data, dtype=xp.float64)  # a copy: shifted in place below
        points -= points.mean(axis=0)
        norms = (points * points).sum(axis=1)

    def squared_distances(rows):  # (len(rows), n), clamped: rounding may dip below zero
        # norms - 2 x.c + |c|^2 in place, in that order: the same bits as the expression, with
        # one array of len(rows) x n where it made four (a quarter of kmbench.KMeans's seeding).
        found = (points[rows] @ points.T).toarray() if sp.issparse(points) else points[rows] @ points.T
        found *= 2.0
        xp.subtract(norms[None, :], found, out=found)
        found += norms[rows][:, None]
        return xp.maximum(found, 0.0, out=found)

    first = rng.integers(n) if weights is None else rng.choice(n, p=weights / weights.sum())
    weights = None if weights is None else xp.asarray(weights, dtype=xp.float64)
    picked = [int(first)]
    closest = squared_distances(xp.asarray(picked))[0]
    for _ in range(1, k):
        totals = xp.cumsum(closest if weights is None else closest * weights)
        draws = xp.asarray(rng.random(trials)) * totals[-1]
        candidates = xp.minimum(xp.searchsorted(totals, draws), n - 1)
        merged = xp.minimum(closest[None, :], squared_distances(candidates))
        best = int(xp.argmin(merged.sum(axis=1) if weights is None else merged @ weights))
        picked.append(int(candidates[best]))
        closest = merged[best]
    rows = np.asarray(picked)
    if sp.issparse(data):
        return np.ascontiguousarray(data[rows].toarray())
    if isinstance(data, np.ndarray):
        return np.ascontiguousarray(data[rows])
    return data[xp.asarray(rows)]  # data on the GPU (kmbench.KMeans's CuPy input): the rows stay there


def seed_kmeans_plusplus(data: np.ndarray, k: int, seed: int,
                         weights: np.ndarray | None = None) -> tuple[np.ndarray, dict]:
    """The centres and how they were made: {"method", "device", "seconds"}."""
    xp = device_module()
    start = time.perf_counter()
    centres = kmeans_plusplus(data, k, seed, xp, weights)
    if xp is not np:
        xp.cuda.Device().synchronize()
    info = {"method": "kmeans++", "device": "gpu (cupy)" if xp is not np else "cpu (numpy)",
            "seconds": time.perf_counter() - start}
    return centres, info
