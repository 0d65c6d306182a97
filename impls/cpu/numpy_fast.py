"""A fast vectorised NumPy Lloyd: distances through one matrix product, update by bincount.

The expanded distance |c|^2 - 2 x.c cancels catastrophically when the data sit far from the
origin: at 1e6, |c|^2 is 1e12 and float32 keeps it to about 6e4, far more than the distances
between clusters. So this row is wrong there in float32 (measured: inertia 3x the reference on
unit-spread data at 1e6) and even slightly off in float64. That is float32 arithmetic as declared,
so the judge certifies it (its bound for the expanded form grows with |x|^2 too); the figures show
how far it ends from float64's. It reports its trajectory to the judge itself (`traces`).
"""

from __future__ import annotations

import numpy as np

from kmbench.protocol import Implementation, Problem, Result, stop_done
from kmbench.protocol.timing import host_region

_ROWS_PER_BLOCK = 1 << 16  # keeps the (rows x k) distance block in cache-sized pieces


class NumpyFast(Implementation):
    name = "numpy"
    row_order = 20
    ranked_in_reports = True
    label = "NumPy (matmul + bincount)"
    description = ("vectorised NumPy: expanded distances by matrix product, bincount update; "
                   "the expansion cancels far from the origin")
    source = "kmbench's own; the algorithm of document 000's Python section, restated"
    traces = True  # a copy of the centroids per iteration costs nothing next to the product
    takes_threads = True  # its BLAS / OpenMP pools, limited by the harness (threadpoolctl) to --threads

    def follows_tolerance(self, tol: float) -> bool:
        return True

    def run(self, problem: Problem) -> Result:
        data = problem.data
        n, d = data.shape
        k = problem.k
        centroids = np.array(problem.initial_centroids, dtype=data.dtype)
        labels = np.empty(n, dtype=np.intp)
        previous = np.full(n, -1, dtype=np.intp) if problem.tol is not None else None
        trace = [] if problem.trace else None
        phases: dict[str, float] = {}
        done = 0
        emptied = False
        with host_region(phases, "iterate"):
            for done in range(1, problem.iterations + 1):
                # argmin_j ||x - c_j||^2 = argmin_j (||c_j||^2 - 2 x.c_j): ||x||^2 is common.
                half_norms = 0.5 * np.einsum("ij,ij->i", centroids, centroids)
                for start in range(0, n, _ROWS_PER_BLOCK):
                    block = data[start : start + _ROWS_PER_BLOCK]
                    scores = block @ centroids.T
                    np.subtract(half_norms, scores, out=scores)
                    labels[start : start + _ROWS_PER_BLOCK] = scores.argmin(axis=1)
                counts = np.bincount(labels, minlength=k)
                filled = counts > 0
                emptied = emptied or not filled.all()
                for dim in range(d):
                    sums = np.bincount(labels, weights=data[:, dim], minlength=k)
                    centroids[filled, dim] = sums[filled] / counts[filled]
                if trace is not None:
                    trace.append(centroids.astype(np.float64))
                if previous is not None:
                    changed = int(np.count_nonzero(labels != previous))
                    previous, labels = labels, previous
                    if stop_done(changed, n, problem.tol):
                        labels = previous
                        break
        return Result(centroids=centroids.astype(np.float64), iterations=done,
                      phases=phases, labels=labels, trace=trace, emptied=emptied)
