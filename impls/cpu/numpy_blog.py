"""Document 000's pure-NumPy k-means: an n x d x k broadcast, no Python loop over points.

Two published defects are not carried over: members are counted from the one-hot
assignment (the published `sparse != 0` count misses points with a zero coordinate),
and the initial centroids come from the harness (the published code drew indices
with replacement).

Far from the origin it is wrong in float32, as published: the member sums are float32 sums of
raw coordinates, so at 1e6 each addition rounds away about 0.06 and a cluster of 20,000 points
loses its mean (measured: centroids 630 spreads off on unit-spread data at 1e6). The validator
marks such cells `mismatch`; float64 data are fine.
"""

from __future__ import annotations

import os

import numpy as np

from kmbench.errors import ImplementationError
from kmbench.protocol import Implementation, Problem, Result, stop_done
from kmbench.protocol.timing import host_region


MAX_BYTES = float(os.environ.get("KMBENCH_NUMPY_BLOG_MAX_GIB", 4)) * 2**30


class NumpyBlog(Implementation):
    name = "numpy-blog"
    row_order = 10
    ranked_in_reports = True
    label = "Our Python"
    description = ("NumPy n x d x k broadcast algorithm of the blog, counting defect fixed; "
                   "float32 sums of raw coordinates: wrong in float32 far from the origin")
    source = "000 (Exploring K-Means in Python, C++ and CUDA), section Python"
    # A copy of k x d means per iteration costs nothing beside its n x d x k broadcasts; the judge
    # then needs one run, not one per iteration (its trace run is also its warm-up).
    traces = True

    def prepare(self, problem: Problem) -> None:
        k = problem.k
        # The design holds n x d x k values twice over (the repeated data, and the n x k x d
        # products per iteration): refuse before allocating what the machine cannot hold.
        needed = 2 * problem.n * problem.d * k * problem.data.itemsize
        if needed > MAX_BYTES:
            raise ImplementationError(
                f"{self.name} would need {needed / 2**30:.1f} GiB for its n x d x k broadcasts "
                f"(limit {MAX_BYTES / 2**30:.1f} GiB, KMBENCH_NUMPY_BLOG_MAX_GIB)")
        # The data repeated k times depthwise: (n, d, k), built once like the blog did.
        self._repeated = np.repeat(problem.data[:, :, None], k, axis=2)
        self._rows = np.arange(problem.n)

    def follows_tolerance(self, tol: float) -> bool:
        return True

    def run(self, problem: Problem) -> Result:
        data, k = problem.data, problem.k
        n, d = data.shape
        means = np.array(problem.initial_centroids.T, dtype=data.dtype)  # (d, k)
        phases: dict[str, float] = {}
        previous = np.full(n, -1) if problem.tol is not None else None
        trace = [] if problem.trace else None
        done = 0
        with host_region(phases, "iterate"):
            for done in range(1, problem.iterations + 1):
                distances = np.square(self._repeated - means).sum(axis=1)  # (n, k)
                assignment = distances.argmin(axis=1)
                one_hot = np.zeros((n, k), dtype=data.dtype)
                one_hot[self._rows, assignment] = 1
                sparse = one_hot[:, :, None] * data[:, None, :]  # (n, k, d)
                counts = one_hot.sum(axis=0)  # (k,)
                sums = sparse.sum(axis=0)  # (k, d)
                filled = counts > 0
                means[:, filled] = (sums[filled] / counts[filled, None]).T
                if trace is not None:
                    trace.append(means.T.astype(np.float64))
                if previous is not None:
                    changed = int(np.count_nonzero(assignment != previous))
                    previous = assignment
                    if stop_done(changed, n, problem.tol):
                        break
        return Result(centroids=means.T.astype(np.float64), iterations=done,
                      phases=phases, labels=assignment, trace=trace)

    def release(self) -> None:
        self.__dict__.pop("_repeated", None)
