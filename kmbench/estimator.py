"""A scikit-learn estimator backed by any registered implementation: how a user takes the
winner of a benchmark into their own code.

    from kmbench import KMeans
    model = KMeans(n_clusters=8, impl="kmbench-gpu").fit(X)

It follows kmbench's protocol, not scikit-learn's in two places, both said here and in
docs/usage.md: `tol` is the fraction of points that may still change cluster in the last iteration
(kmbench's tolerance rule; 0 stops when no label changes), and an empty cluster keeps its
centroid. The initial centroids come from the harness's own seeding (k-means++ or k distinct
points), so every implementation starts from the same place for the same random_state.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, ClusterMixin, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from kmbench.protocol import reference

INITS = {"k-means++": "kmeans++", "random": "random"}
# impl="auto": the first of these that can run here, fastest first (kmbench-gpu needs a GPU;
# numpy runs anywhere the estimator itself can).
AUTO = ("kmbench-gpu", "numpy")


class KMeans(ClassNamePrefixFeaturesOutMixin, TransformerMixin, ClusterMixin, BaseEstimator):
    """Lloyd's k-means run by a kmbench implementation (`kmbench list` names them).

    Parameters: n_clusters; impl (an implementation's name, or "auto": the fastest that can
    run here, see AUTO); init ("k-means++", "random" or
    an (n_clusters, n_features) array); max_iter; tol (fraction of points allowed to change
    cluster in the last iteration; None runs exactly max_iter iterations); random_state.
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
        if self.tol is not None and not 0 <= self.tol <= 1:
            raise ValueError(f"tol is a fraction of the points, from 0 to 1 (or None); got {self.tol!r}.")
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
        from kmbench.protocol import Problem

        X = validate_data(self, X, dtype=[np.float64, np.float32], order="C")
        self._check_params(X.shape[0])
        implementation = self._implementation()
        problem = Problem(data=X, initial_centroids=self._start(X), iterations=int(self.max_iter),
                          tol=None if self.tol is None else float(self.tol), warmup=0, repeats=1)
        if problem.tol is not None and not implementation.follows_tolerance(problem.tol):
            problem = replace(problem, tol=None)  # it runs exactly max_iter iterations
        implementation.prepare(problem)
        try:
            result = implementation.run(problem)
        finally:
            implementation.release()
        self.cluster_centers_ = np.asarray(result.centroids, dtype=X.dtype)
        self.n_iter_ = int(result.iterations)
        self.impl_ = implementation.name
        labels, distances = reference.nearest(X, self.cluster_centers_)
        self.labels_ = labels.astype(np.int32)
        self.inertia_ = float(distances.sum())
        return self

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
