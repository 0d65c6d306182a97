"""SciPy's kmeans2, started from the harness's centroids for exactly `iter` iterations.

`missing='warn'` keeps an empty cluster's previous centroid, as the protocol asks.
"""

from __future__ import annotations

import warnings

import numpy as np

from kmbench.protocol import Implementation, Problem, Result
from kmbench.timing import host_region


class ScipyKMeans2(Implementation):
    name = "scipy"
    label = "scipy"
    description = "scipy.cluster.vq.kmeans2(minit='matrix', iter=iterations, missing='warn')"
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

        return {"library": f"scipy {scipy.__version__}"}
