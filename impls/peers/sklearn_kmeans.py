"""scikit-learn's KMeans (Lloyd), started from the harness's centroids.

scikit-learn stops at strict convergence even with tol=0 (when no label changes,
further iterations would change nothing), so it may run fewer than the asked-for
iterations; the record carries `n_iter_` so the table shows it. scikit-learn moves an
empty cluster's centroid to a far point instead of keeping it: on data with empty
clusters it can legitimately disagree with the oracle, and the validator says so.

Far from the origin it stays right in float32: KMeans subtracts the data's mean before it
iterates (measured `ok` on unit-spread data at 1e6, where the NumPy rows and SciPy are not).
"""

from __future__ import annotations

import warnings

import numpy as np

from impls import installed
from kmbench.protocol import Implementation, Problem, Result
from kmbench.protocol.timing import host_region


class SklearnKMeans(Implementation):
    name = "sklearn"
    row_order = 260
    ranked_in_reports = True
    baseline = True
    relocates_empty_clusters = True
    takes_threads = True  # its BLAS / OpenMP pools, limited by the harness (threadpoolctl) to --threads
    label = "scikit-learn"
    description = "sklearn.cluster.KMeans(algorithm='lloyd', init=given, n_init=1, tol=0)"
    source = "000, section Python (the scikit-learn baseline)"

    def available(self):
        if not installed("sklearn"):
            return False, "scikit-learn is not installed"
        return True, ""

    def follows_tolerance(self, tol: float) -> bool:
        # Its strict convergence (no label changed) is the tolerance rule at tol = 0; its own
        # tol measures centroid movement, another rule, so tol > 0 cannot be followed.
        return tol == 0

    def run(self, problem: Problem) -> Result:
        from sklearn.cluster import KMeans

        model = KMeans(
            n_clusters=problem.k, init=np.asarray(problem.initial_centroids), n_init=1,
            max_iter=problem.iterations, tol=0.0, algorithm="lloyd",
        )
        phases: dict[str, float] = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ConvergenceWarning at max_iter is expected
            with host_region(phases, "iterate"):
                model.fit(problem.data)
        # No labels: labels_ are assigned again from the final centroids after the loop, so they are
        # not the assignment the final centroids were averaged from, which is what the judge checks.
        return Result(centroids=model.cluster_centers_.astype(np.float64),
                      iterations=int(model.n_iter_), phases=phases)

    def build_info(self) -> dict:
        import sklearn

        return {"library": f"scikit-learn {sklearn.__version__}", "precision": "the data's dtype"}
