"""kmbench.KMeans on sparse input, kept sparse: CSR rows with dense centres, as scikit-learn's
KMeans computes on them, by the compiled extension (impls/cpu/kmbench_cpu/sparse.hpp) wherever it
is built; densified as before where it is not. A 200,000 x 1,000 matrix at 0.1% had been refused
(its dense 1.6 GB above DENSE_LIMIT), a 20,000 x 2,000 one at 0.5% took 21.7x scikit-learn's time.

What differs from dense input: the data are not centred (that would fill them in; scikit-learn
does not centre sparse data either), in the fit or in k-means++ (kmbench.protocol.seeding on the
CSR rows); and labels and distances come from the expanded form |x|^2 - 2 x.c + |c|^2 in
float64 rather than the dense path's certified oracle.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from kmbench.estimator import inprocess
from kmbench.protocol import seeding


def kept(X, impl: str) -> bool:
    """Whether a fit of `impl` takes sparse X as it is: the extension is built, and the row asked
    for is the one it runs (or "auto")."""
    return sp.issparse(X) and impl in ("auto", inprocess.InProcessRow.name) and inprocess.MODULE is not None


def as_csr(X) -> sp.csr_matrix:
    """CSR with its three arrays contiguous, as the extension reads them."""
    X = sp.csr_matrix(X)
    for name in ("data", "indices", "indptr"):
        setattr(X, name, np.ascontiguousarray(getattr(X, name)))
    return X


def starts(X, k: int, init: str, seeds: list[int], weights) -> list[np.ndarray]:
    """Each run's start (k, d), dense in X's dtype: k rows drawn as the harness draws them
    (kmbench.protocol.settings.choose_start's rule) or its k-means++ on the CSR rows, the same
    draws as on the dense array (the picks differ only where rounding moves a draw across a
    boundary: the dense points are centred first, these are not)."""
    chosen = []
    for seed in seeds:
        if init == "random":
            chances = None if weights is None else weights / weights.sum()
            rows = np.sort(np.random.default_rng(seed).choice(X.shape[0], size=k, replace=False, p=chances))
            chosen.append(X[rows].toarray())
        else:
            chosen.append(seeding.kmeans_plusplus(X, k, seed, np, weights))  # on the CPU: scipy.sparse
    return [np.ascontiguousarray(start, dtype=X.dtype) for start in chosen]


def tolerance(X, tol: float | None) -> float | None:
    """lloyd.tolerance on CSR: tol times the mean per-feature variance (scikit-learn's, computed
    as its _tolerance computes it for sparse data)."""
    from sklearn.utils.sparsefuncs import mean_variance_axis

    if tol is None or tol == 0:
        return tol
    return float(np.mean(mean_variance_axis(X, axis=0)[1]) * tol)


def nearest(X, centers) -> tuple[np.ndarray, np.ndarray]:
    """(labels int64, squared distances float64): each row's nearest centre."""
    X = as_csr(X)
    labels = np.empty(X.shape[0], dtype=np.int32)
    found = np.empty(X.shape[0], dtype=np.float64)
    inprocess.MODULE.sparse_nearest(X.data, X.indices, X.indptr, np.ascontiguousarray(centers, dtype=np.float64),
                                    labels, found, 0)
    return labels.astype(np.int64), found


def distances(X, centers) -> np.ndarray:
    """Euclidean distance of each row to each centre, (n, k) float64."""
    centers = np.asarray(centers, dtype=np.float64)
    squares = np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64)
    found = squares - 2 * np.asarray(X @ centers.T, dtype=np.float64) + np.einsum("ij,ij->i", centers, centers)
    return np.sqrt(np.maximum(found, 0.0))


def weighted_sums(X, labels: np.ndarray, weights: np.ndarray, k: int) -> np.ndarray:
    """Each cluster's weighted sum of its rows, (k, d) float64."""
    assign = sp.csr_matrix((weights, (labels, np.arange(X.shape[0]))), shape=(k, X.shape[0]))
    return np.asarray((assign @ X).toarray(), dtype=np.float64)
