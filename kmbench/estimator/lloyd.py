"""kmbench.KMeans's own Lloyd: scikit-learn's loop (its stop rule and its verbose lines) over any
one-iteration step, and the step no row takes: (weighted) means with scikit-learn's relocation
of empty clusters (sklearn.cluster._k_means_common._relocate_empty_clusters_dense).

Rows follow the benchmark's protocol, where an empty cluster keeps its centroid; the estimator
runs this step instead wherever that differs from scikit-learn's answer (a row left a cluster
empty) or where the row cannot run the fit at all (sample weights, where it takes none). Labels and distances are the
float64 oracle's (kmbench.protocol.reference.nearest), bit for bit, through labels.py's product,
so this is exact Lloyd in float64 whatever the data's dtype.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from kmbench.estimator import sparse
from kmbench.estimator.labels import nearest

OWN = "own-numpy"  # the name `impl_` shows where this Lloyd ran a fit


def relocating_step(X: np.ndarray, weights: np.ndarray | None, centers: np.ndarray) -> tuple[np.ndarray, float]:
    """One Lloyd iteration from `centers` as scikit-learn's: every point to its nearest centre,
    the weighted means; then each cluster of no weight takes one of the points farthest from
    their own centres (the farthest to the first such cluster), that point's weight leaving the
    cluster it came from. Where every point sits on its centre (fewer distinct points than
    clusters) nothing moves. Returns the new centres and the inertia of `centers`."""
    k, d = centers.shape
    labels, distances = nearest(X, centers)
    weights = np.ones(X.shape[0]) if weights is None else weights
    totals = np.bincount(labels, weights=weights, minlength=k)
    if sp.issparse(X):
        sums = sparse.weighted_sums(X, labels, weights, k)
    else:
        sums = np.stack([np.bincount(labels, weights=weights * X[:, a], minlength=k) for a in range(d)], axis=1)
    empty = np.flatnonzero(totals == 0)
    if empty.size and distances.max() > 0:
        farthest = np.argsort(-distances, kind="stable")[:empty.size]
        for cluster, point in zip(empty, farthest):
            row = X[point].toarray().ravel() if sp.issparse(X) else X[point]
            share = weights[point] * row.astype(np.float64)
            sums[labels[point]] -= share
            totals[labels[point]] -= weights[point]
            sums[cluster], totals[cluster] = share, weights[point]
    moved = np.array(centers, dtype=np.float64)
    filled = totals > 0  # a cluster still empty keeps its centre, as the protocol's rows do
    moved[filled] = sums[filled] / totals[filled, None]
    return moved, float(distances @ weights)


def iterate(step, start: np.ndarray, max_iter: int, tol: float | None, verbose=False) -> tuple[np.ndarray, int]:
    """scikit-learn's Lloyd loop (sklearn.cluster._kmeans._kmeans_single_lloyd): at most max_iter
    steps from `start`, stopping after one that moved the centres by at most `tol` in all
    (squared Frobenius norm of the shift; None: never stop early). A step that moved nothing is
    scikit-learn's "strict convergence": the labels did not change. `step(centers)` returns the
    new centres and the inertia of `centers` (None where only verbose asks for it). Returns the
    last centres and the iterations run."""
    centers = np.asarray(start, dtype=np.float64)
    done = 0
    for done in range(1, max_iter + 1):
        moved, inertia = step(centers)
        if verbose:
            print(f"Iteration {done - 1}, inertia {inertia}.")
        shift = float(np.sum((moved - centers) ** 2))
        centers = moved
        if tol is not None and shift <= tol:
            if verbose:
                reason = "strict convergence" if shift == 0 else f"center shift {shift} within tolerance {tol}"
                print(f"Converged at iteration {done - 1}: {reason}.")
            break
    return centers, done


def tolerance(X: np.ndarray, tol: float | None) -> float | None:
    """scikit-learn's absolute tolerance (sklearn.cluster._kmeans._tolerance): tol times the mean
    of the per-feature variances, computed as it computes them, in X's dtype (the same number, so
    the same stopping iteration; in float64 it took 41 ms at 2e5 x 16 float32, a tenth of the
    fit); None stays None (exactly max_iter iterations)."""
    if sp.issparse(X):
        return sparse.tolerance(X, tol)
    if tol is None or tol == 0:
        return tol
    return float(np.mean(np.var(X, axis=0)) * tol)


def same_clustering(labels: np.ndarray, others: np.ndarray) -> bool:
    """Whether `others` is `labels` renamed (scikit-learn's _is_same_clustering): each label of
    the first maps to one label of the second."""
    pairs = np.unique(np.stack([labels, others]), axis=1)
    return pairs.shape[1] == np.unique(labels).size
