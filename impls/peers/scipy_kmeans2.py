"""SciPy's kmeans2, started from the harness's centroids for exactly `iter` iterations.

`missing='warn'` keeps an empty cluster's previous centroid, as the protocol asks.

kmeans2 sums the members' raw coordinates in the data's precision, so in float32 it is wrong
far from the origin (measured: centroids 630 spreads off on unit-spread data at 1e6); the
validator marks such cells `mismatch`.
"""

from __future__ import annotations

import warnings

import numpy as np

from kmbench.protocol import Implementation, Problem, Result
from kmbench.protocol.timing import host_region


class ScipyKMeans2(Implementation):
    name = "scipy"
    row_order = 290
    ranked_in_reports = True
    label = "scipy"
    description = ("scipy.cluster.vq.kmeans2(minit='matrix', iter=iterations, missing='warn'); "
                   "float32 sums of raw coordinates: wrong in float32 far from the origin")
    source = "000, section Python (the SciPy baseline)"

    def run(self, problem: Problem) -> Result:
        from scipy.cluster.vq import kmeans2

        phases: dict[str, float] = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "One of the clusters is empty" is handled
            with host_region(phases, "iterate"):
                centroids, labels = kmeans2(
                    problem.data, np.array(problem.initial_centroids), iter=problem.iterations,
                    minit="matrix", missing="warn",
                )
        return Result(centroids=np.asarray(centroids, dtype=np.float64),
                      iterations=problem.iterations, phases=phases, labels=labels)

    def build_info(self) -> dict:
        import scipy

        return {"library": f"scipy {scipy.__version__}", "precision": "the data's dtype"}
