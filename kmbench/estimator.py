"""A scikit-learn estimator backed by any registered implementation: how a user takes the
winner of a benchmark into their own code.

    from kmbench import KMeans
    model = KMeans(n_clusters=8, impl="kmbench-gpu").fit(X)

Its stop rule is scikit-learn's: stop once the centroids moved, in all, by at most `tol` times
the data's mean variance (squared Frobenius norm of the shift; 0 stops when nothing moves), so a
fit runs the iterations scikit-learn's would. A row that follows that rule itself
(`follows_shift`: kmbench-cpu) runs the fit at once; any other is stepped one iteration at a
time from the centroids of the last, the rule checked in between. Unlike
scikit-learn, an empty cluster keeps its centroid. The initial centroids come from the
harness's own seeding (k-means++ or k distinct points), so every implementation starts from
the same place for the same random_state.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, ClusterMixin, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from kmbench.protocol import reference

INITS = {"k-means++": "kmeans++", "random": "random"}
# impl="auto": the first of these that can run here, fastest first, exact rows only (kmbench-gpu
# needs a GPU, kmbench-cpu a C++ compiler; numpy runs anywhere the estimator itself can).
AUTO = ("kmbench-gpu", "kmbench-cpu", "numpy")


class KMeans(ClassNamePrefixFeaturesOutMixin, TransformerMixin, ClusterMixin, BaseEstimator):
    """Lloyd's k-means run by a kmbench implementation (`kmbench list` names them).

    Parameters: n_clusters; impl (an implementation's name, or "auto": the fastest that can
    run here, see AUTO); init ("k-means++", "random" or
    an (n_clusters, n_features) array); max_iter; tol (scikit-learn's: the centroids' total
    squared shift, relative to the data's mean variance, below which the fit stops; None runs
    exactly max_iter iterations); random_state.
    Fitted: cluster_centers_, labels_, inertia_, n_iter_, n_features_in_, impl_ (the
    implementation that ran).
    """

    def __init__(self, n_clusters=8, impl="auto", init="k-means++", max_iter=300, tol=1e-4,
                 random_state=None):
        self.n_clusters = n_clusters
        self.impl = impl
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    # ------------------------------------------------------------------ checks

    def _check_params(self, n_samples: int) -> None:
        if not isinstance(self.n_clusters, (int, np.integer)) or self.n_clusters < 1:
            raise ValueError(f"n_clusters must be a positive integer; got {self.n_clusters!r}.")
        if n_samples < self.n_clusters:
            raise ValueError(f"n_samples={n_samples} should be >= n_clusters={self.n_clusters}.")
        if not isinstance(self.max_iter, (int, np.integer)) or self.max_iter < 1:
            raise ValueError(f"max_iter must be a positive integer; got {self.max_iter!r}.")
        if self.tol is not None and not (isinstance(self.tol, (int, float, np.number)) and self.tol >= 0):
            raise ValueError(f"tol must be a number >= 0 (or None); got {self.tol!r}.")
        if isinstance(self.init, str) and self.init not in INITS:
            raise ValueError(f"init must be one of {', '.join(INITS)} or an array; got {self.init!r}.")

    def _implementation(self):
        from kmbench import registry
        from kmbench.protocol import runner
        from kmbench.errors import UsageError

        if not isinstance(self.impl, str) or "," in self.impl or not self.impl.strip():
            raise ValueError(f"impl must name one implementation; got {self.impl!r}.")
        if self.impl == "auto":
            for name in AUTO:
                (candidate,) = registry.select(name)
                if runner.usable(candidate)[0]:
                    return candidate
        try:
            (chosen,) = registry.select(self.impl)  # Lloyd implementations only
        except UsageError as exc:
            raise ValueError(str(exc)) from None
        ready, why = runner.usable(chosen)
        if not ready:
            raise RuntimeError(f"Implementation {self.impl!r} cannot run here: {why}.")
        return chosen

    def _start(self, X: np.ndarray) -> np.ndarray:
        from kmbench.protocol import runner
        if not isinstance(self.init, str):
            start = np.asarray(self.init, dtype=X.dtype)
            if start.shape != (self.n_clusters, X.shape[1]):
                raise ValueError(f"init has shape {start.shape}; expected {(self.n_clusters, X.shape[1])}.")
            return np.ascontiguousarray(start)
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        return runner.initial_centroids(X, self.n_clusters, INITS[self.init], seed)

    # ------------------------------------------------------------------ the estimator API

    def fit(self, X, y=None):
        X = validate_data(self, X, dtype=[np.float64, np.float32], order="C")
        self._check_params(X.shape[0])
        implementation = self._implementation()
        start = self._start(X)
        implementation.prepare(self._problem(X, start, 1))  # once: compile, write or upload the data
        try:
            if self.tol is None:
                centroids, self.n_iter_ = self._run(implementation, X, start, int(self.max_iter)), int(self.max_iter)
            else:
                centroids, self.n_iter_ = self._step_until_still(implementation, X, start)
        finally:
            implementation.release()
        self.cluster_centers_ = np.asarray(centroids, dtype=X.dtype)
        self.impl_ = implementation.name
        labels, distances = reference.nearest(X, self.cluster_centers_)
        self.labels_ = labels.astype(np.int32)
        self.inertia_ = float(distances.sum())
        return self

    def _step_until_still(self, implementation, X, start) -> tuple[np.ndarray, int]:
        """scikit-learn's rule (sklearn.cluster._kmeans._tolerance and its Lloyd loop): stop after
        the first iteration whose total squared centroid shift is at most tol x the mean of the
        per-feature variances. Steps of one iteration each, from the last step's centroids."""
        still = float(np.mean(np.var(X, axis=0, dtype=np.float64))) * float(self.tol)
        if implementation.follows_shift:
            problem = replace(self._problem(X, start, int(self.max_iter)), shift_tol=still)
            result = implementation.run(problem)
            return np.asarray(result.centroids, dtype=np.float64), int(result.iterations)
        centroids = np.asarray(start, dtype=np.float64)
        for done in range(1, int(self.max_iter) + 1):
            moved = self._run(implementation, X, centroids, 1)
            shift = float(np.sum((moved - centroids) ** 2))
            centroids = moved
            if shift <= still:
                break
        return centroids, done

    @staticmethod
    def _problem(X, start, iterations: int):
        from kmbench.protocol import Problem

        return Problem(data=X, initial_centroids=np.ascontiguousarray(start, dtype=X.dtype), iterations=iterations,
                       tol=None, warmup=0, repeats=1)

    def _run(self, implementation, X, start, iterations: int) -> np.ndarray:
        """`iterations` Lloyd iterations from `start` under the iterations rule."""
        result = implementation.run(self._problem(X, start, iterations))
        return np.asarray(result.centroids, dtype=np.float64)

    def predict(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        return reference.nearest(X, self.cluster_centers_)[0].astype(np.int32)

    def transform(self, X):
        """Euclidean distance from each point to each cluster centre."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        return np.sqrt(reference.squared_distances(X, self.cluster_centers_)).astype(X.dtype)

    def score(self, X, y=None):
        """Minus the inertia of X with respect to the fitted centres (higher is better)."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        return -float(reference.nearest(X, self.cluster_centers_)[1].sum())

    @property
    def _n_features_out(self):
        return self.cluster_centers_.shape[0]
