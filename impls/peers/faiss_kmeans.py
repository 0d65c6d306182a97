"""faiss's k-means on the CPU (`faiss.Kmeans`), forced into the harness's protocol where its
API allows, and what it does not allow recorded with each result.

Forced: the harness's initial centroids (`init_centroids`), exactly `niter` iterations (faiss
1.8 and later stop once the objective stops falling, `early_stop_threshold` 0 by default: a
negative threshold never stops), every point used (faiss samples 256 points per centroid by default; here the cap is n), no
warning about few points per centroid. Not forcible: faiss computes in float32 only; it has
no per-label stop (its `early_stop_threshold` watches the objective), so under the
tolerance rule the runner hands it the oracle's iteration count; and it refills an empty
cluster by splitting a large one, where the oracle keeps the empty cluster's centroid. The
number of such splits is in each result's notes, so a disagreement can be read.
"""

from __future__ import annotations

import numpy as np

from kmbench.protocol import Implementation, Problem, Result
from kmbench.protocol.timing import host_region

HOW_TO_GET = "pip install 'kmbench[peers]' (or faiss-cpu alone)"
NEVER_STOP = -1.0  # faiss stops when the objective falls by less than threshold x itself


class FaissKMeans(Implementation):
    name = "faiss-cpu"
    row_order = 280
    relocates_empty_clusters = True
    takes_threads = True  # its BLAS / OpenMP pools, limited by the harness (threadpoolctl) to --threads
    label = "faiss (CPU)"
    description = "faiss.Kmeans on the CPU: given centroids, niter fixed, no subsampling; float32"
    source = "peer users pick (the Yinyang issue): faiss-cpu"
    dtype = "float32"

    def available(self):
        try:
            import faiss  # noqa: F401
        except ImportError:
            return False, f"faiss is not installed: {HOW_TO_GET}"
        return True, ""

    def prepare(self, problem: Problem) -> None:
        # faiss takes C-contiguous float32; converting a float64 dataset is setup, not Lloyd.
        self._points = np.ascontiguousarray(problem.data, dtype=np.float32)

    def run(self, problem: Problem) -> Result:
        import faiss

        model = faiss.Kmeans(problem.d, problem.k, niter=problem.iterations, verbose=False,
                             max_points_per_centroid=max(1, -(-problem.n // problem.k)),
                             min_points_per_centroid=1)
        if hasattr(model.cp, "early_stop_threshold"):  # older faiss has none and runs niter
            model.cp.early_stop_threshold = NEVER_STOP
        start = np.ascontiguousarray(problem.initial_centroids, dtype=np.float32)
        phases: dict[str, float] = {}
        with host_region(phases, "iterate"):
            model.train(self._points, init_centroids=start)
        splits = sum(int(stats["nsplit"]) for stats in model.iteration_stats)
        notes = [f"faiss refilled empty clusters {splits} times by splitting large ones "
                 "(the oracle keeps an empty cluster's centroid)"] if splits else []
        return Result(centroids=np.asarray(model.centroids, dtype=np.float64),
                      iterations=len(model.iteration_stats), phases=phases, notes=notes)

    def release(self) -> None:
        self.__dict__.pop("_points", None)

    def build_info(self) -> dict:
        import faiss

        return {"library": f"faiss {faiss.__version__}", "precision": "fp32",
                "threads": faiss.omp_get_max_threads(),
                "not_forced": "float32 only; empty clusters refilled by splitting; no tolerance rule"}
