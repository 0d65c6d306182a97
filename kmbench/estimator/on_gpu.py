"""kmbench.KMeans on a GPU: CuPy arrays and torch CUDA tensors in, arrays of the same kind out,
on the same device; NumPy data sent there by impl="gpu", or by "auto" where the work is large.

Input is recognised by what it is, never copied to the host: a torch tensor on "cuda", or any
object with `__cuda_array_interface__` or a CUDA DLPack device (CuPy, Numba, JAX...), viewed as a
CuPy array without a copy; torch in gives torch out, anything else CuPy. The fit runs as the CPU
path does (estimator/__init__.py, fitting.py), with the same parameters, seeds and stop rule:
- starts: the harness's seeding on the GPU (kmbench.protocol.seeding): the same random numbers
  drawn on the host in the same order as for NumPy data, distances in float64, so a seed picks
  the same points (a GPU test checks it against the NumPy seeding);
- float32 data, unweighted: kmbench-gpu's certified passes on the data where they are. With tol
  0 or None, whole calls of the row, stopped by its own rule (at 0 scikit-learn's strict
  convergence: no label changed) or before an iteration that would leave a cluster empty, which
  the estimator's own step takes, relocating as scikit-learn does (as the CPU path does); a
  positive tol (the centre-shift rule) is read on the host after each one-iteration call;
- float64 data or sample weights: the estimator's own Lloyd on the GPU (`OWN`), exact in float64
  (the float64 oracle's labels, weighted float64 sums, scikit-learn's relocation of empty clusters);
- labels_, inertia_, predict and score: the float64 oracle's labels (those labels.py computes on
  the CPU); transform: the oracle's distances.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from kmbench.estimator import choice, fitting, lloyd
from kmbench.estimator.device_arrays import as_cupy, as_kind, host, kind_of
from kmbench.estimator.gpu_nearest import nearest, rows_per_chunk
from kmbench.protocol import Problem, reference
from kmbench.protocol.device import cuda_status

GPU = "gpu"  # impl="gpu": this module's fit for any input
ROW = "kmbench-gpu"  # the row that runs float32 fits
OWN = "own-cupy"  # impl_ where the estimator's own float64 Lloyd ran on the GPU
ON_GPU_IMPLS = ("auto", GPU, ROW)  # the impl values a GPU array may be fitted under
# impl="auto" sends float32 NumPy data to the GPU where n d k (an assignment's multiply-adds)
# reaches GPU_FROM_WORK and k GPU_FROM_K. Why: the data cross once, 4 n d bytes at about 1 GB/s
# from pageable memory (kmbench.protocol.residence), and a process's first GPU fit compiles for a
# second or more; a CPU iteration costs about n d k / 1.5e11 s on 16 cores (kmbench-cpu, 2e5 x 64,
# k = 100: 8.4 ms, bench/README.md), k / 600 of the copy. From k = 64 a tenth of it, so a fit's
# tens of iterations pay for the copy; from n d k = 1e10 (0.07 s an iteration on 16 cores, about
# 0.5 s on 2) they pay for the compile too. Estimated from those figures, not a measured crossover.
GPU_FROM_WORK = 1e10
GPU_FROM_K = 64


# ---------------------------------------------------------------------- which fits run here

def wanted(model, X, sample_weight=None) -> bool:
    """Whether this fit runs here: GPU input (under "auto", "gpu" or "kmbench-gpu"; a CPU row's
    name is an error), impl="gpu", or under "auto" float32 NumPy data, unweighted, large enough
    (GPU_FROM_WORK, GPU_FROM_K) where a GPU can run it."""
    kind = kind_of(X)
    if kind is not None:
        if model.impl not in ON_GPU_IMPLS:
            raise ValueError(f"X is a {kind} array on the GPU, and impl={model.impl!r} runs on the CPU: use "
                             f"impl='auto' (or 'gpu'), or pass a NumPy array.")
        return True
    if model.impl == GPU:
        return True
    if model.impl != "auto" or sample_weight is not None or not isinstance(X, np.ndarray):
        return False
    k = model.n_clusters
    large = X.ndim == 2 and X.dtype == np.float32 and X.shape[0] * X.shape[1] * k >= GPU_FROM_WORK and k >= GPU_FROM_K
    return large and cuda_status()[0]


def _device_data(model, X, reset: bool):
    """(X as a C-ordered float32 or float64 CuPy array, the caller's kind): GPU input checked here
    (2-D, finite, the fitted width), NumPy input checked by the CPU path, then copied over."""
    ready, why = cuda_status()
    if not ready:
        raise RuntimeError(f"kmbench.KMeans was asked to compute on a GPU (impl={model.impl!r}), and none can run "
                           f"here: {why}.")
    import cupy

    kind = kind_of(X)
    if kind is None:
        return cupy.asarray(model._data(X, reset=reset)), None
    X = as_cupy(X)
    if X.ndim != 2:
        raise ValueError(f"Expected a 2-D array of samples x features; got a {kind} array of shape {X.shape}.")
    with X.device:
        if X.dtype not in (cupy.float32, cupy.float64):
            X = X.astype(cupy.float64)  # as validate_data turns integers and float16 into float64
        X = cupy.ascontiguousarray(X)
        if not bool(cupy.isfinite(X).all()):
            raise ValueError("Input X contains NaN or infinity.")
    if reset:
        model.n_features_in_ = X.shape[1]
        model.__dict__.pop("feature_names_in_", None)
    elif X.shape[1] != model.n_features_in_:
        raise ValueError(f"X has {X.shape[1]} features, but KMeans is expecting {model.n_features_in_} features "
                         f"as input.")
    return X, kind


# ---------------------------------------------------------------------- the fit

def fit(model, X, sample_weight=None):
    """model.fit on the GPU (model: a kmbench.KMeans with its parameters checked)."""
    X, kind = _device_data(model, X, reset=True)
    with X.device:
        return _fit(model, X, kind, sample_weight)


def _fit(model, X, kind, sample_weight):
    import cupy

    n, k = X.shape[0], model.n_clusters
    if n < k:
        raise ValueError(f"n_samples={n} should be >= n_clusters={k}.")
    weights = model._weights(host(sample_weight), n)  # host float64 or None, checked as on the CPU
    model._n_init = model._init_count()
    starts = [np.asarray(host(start), dtype=np.float64) for start in model._starts(X, weights, model._n_init)]
    on_device = None if weights is None else cupy.asarray(weights)
    row = choice.choose(ROW, X.dtype) if X.dtype == cupy.float32 and weights is None else None
    still = lloyd.tolerance(X, model.tol)  # scikit-learn's: tol times the mean variance, in X's dtype
    runs = [one_run(row, X, start, on_device, still, int(model.max_iter), model.verbose) for start in starts]
    centers, model.n_iter_, model.impl_, labels, distances = runs[0] if len(runs) == 1 else best(runs, X, on_device)
    model.cluster_centers_ = as_kind(cupy.asarray(centers, dtype=X.dtype), kind)
    model.labels_ = as_kind(labels.astype(cupy.int32), kind)
    model.inertia_ = fitting.weighted_sum(distances, on_device)
    distinct = int(cupy.count_nonzero(cupy.bincount(labels, minlength=k)))
    if distinct < k:
        warnings.warn(f"Number of distinct clusters ({distinct}) found smaller than n_clusters ({k}). Possibly "
                      f"due to duplicate points in X.", ConvergenceWarning, stacklevel=3)
    return model


def one_run(row, X, start, weights, still, max_iter: int, verbose):
    """One run from `start` (host float64): (centres, iterations, what ran it, the float64 labels
    and squared distances of the end, `_end`). On the row where there is one, the estimator's
    own step relocating where it would leave a cluster empty (run_row); the estimator's own
    Lloyd on the GPU without a row, or where the row cannot say and its end leaves one empty."""
    import cupy

    if verbose:
        print("Initialization complete")
    if row is not None:
        centers, n_iter, emptied = run_row(row, X, start, still, max_iter, verbose)
        labels, distances = _end(X, centers)
        if emptied is False or int(cupy.count_nonzero(cupy.bincount(labels, minlength=len(start)))) == len(start):
            return centers, n_iter, row.name, labels, distances
    centers, n_iter = lloyd.iterate(OwnStep(X, weights), start, max_iter, still, verbose)
    return (centers, n_iter, OWN, *_end(X, centers))


def _end(X, centers):
    """The float64 oracle's labels and squared distances from the centres as the model keeps them
    (in X's dtype), so labels_ is predict(X)'s and inertia_ is -score(X), as on the CPU; one pass
    also tells whether the run left a cluster empty (the CPU path makes a pass of its own for that)."""
    import cupy

    return nearest(X, cupy.asarray(centers, dtype=X.dtype).astype(cupy.float64))


def run_row(row, X, start, still, max_iter: int, verbose) -> tuple[np.ndarray, int, bool | None]:
    """The row's run from `start`, and whether it said that no cluster was left empty (False;
    None: it cannot say, as the one-launch resident strategy). Where the row's own rule is
    scikit-learn's (tol 0: no label changed; None: every iteration), whole calls, each ending
    before an iteration that would leave a cluster empty (Problem.halt_on_empty: kmbench-gpu
    counts each iteration's labels), taken by the estimator's own step, which relocates it, the
    row going on from there (fitting.whole_runs, as on the CPU); even with verbose (stepped, its
    float64 sums by atomics would move unchanged means by a last bit, and tol=0 would never stop).
    Else one call an iteration, the centre shift read on the host after each."""
    whole = still is None or still == 0

    def make(centers, iterations: int) -> Problem:
        return Problem(data=X, initial_centroids=np.asarray(centers, dtype=np.float64), iterations=iterations,
                       tol=0.0 if whole and still is not None else None, warmup=0, repeats=1, halt_on_empty=True)

    def relocate(centers):
        return relocating_step(X, None, centers)[:2]

    row.prepare(make(start, max_iter if whole else 1))  # copies the points once on the device, compiles
    try:
        if whole:
            centers, n_iter, emptied = fitting.whole_runs(row, X, start, still, None, max_iter, relocate, make)
            if verbose:
                print(f"{row.name} ran {n_iter} iterations in whole calls (no line an iteration).")
            return centers, n_iter, emptied
        said = []

        def step(centers):
            result = row.run(make(centers, 1))
            if result.emptied:
                return relocate(centers)
            said.append(result.emptied is not None)
            inertia = _inertia(X, centers, None) if verbose else None
            return np.asarray(result.centroids, dtype=np.float64), inertia

        centers, n_iter = lloyd.iterate(step, start, max_iter, still, verbose)
        return centers, n_iter, False if all(said) else None
    finally:
        row.release()


class OwnStep:
    """relocating_step, with scikit-learn's strict convergence: where an assignment gives the
    labels of the one before (and relocated nothing), the means are those of the step before,
    to the bit, so the shift is 0 and lloyd.iterate stops as scikit-learn's loop does. Computed
    again, float64 sums by atomics in another order would move them by a last bit, and a fit
    with tol=0 would run on to max_iter."""

    def __init__(self, X, weights):
        self.X, self.weights, self.labels, self.moved = X, weights, None, None

    def __call__(self, centers: np.ndarray) -> tuple[np.ndarray, float]:
        moved, inertia, labels, relocated = relocating_step(self.X, self.weights, centers)
        if not relocated and self.labels is not None and bool((labels == self.labels).all()):
            moved = self.moved
        self.labels, self.moved = (None, None) if relocated else (labels, moved)
        return moved, inertia


def relocating_step(X, weights, centers: np.ndarray):
    """lloyd.relocating_step on the GPU: the float64 oracle's labels, the weighted float64 means,
    each empty cluster given one of the points farthest from their centres (the farthest to the
    first), that point's weight leaving its cluster. Returns the new centres (host), the
    inertia of `centers`, the labels, and whether a cluster was relocated."""
    import cupy
    import cupyx

    k, d = centers.shape
    labels, distances = nearest(X, centers)
    weights = cupy.ones(X.shape[0]) if weights is None else weights
    totals = cupy.bincount(labels, weights=weights, minlength=k)
    sums = cupy.zeros((k, d))
    step = rows_per_chunk(d)
    for first in range(0, X.shape[0], step):  # float64 rows a chunk at a time, not the whole data
        part = slice(first, first + step)
        cupyx.scatter_add(sums, labels[part], X[part].astype(cupy.float64) * weights[part, None])
    sums, totals = sums.get(), totals.get()
    empty = np.flatnonzero(totals == 0)
    relocated = bool(empty.size) and float(distances.max()) > 0
    if relocated:
        # Rare: the distances come to the host, where NumPy's stable sort breaks ties as the CPU path does.
        farthest = np.argsort(-distances.get(), kind="stable")[:empty.size]
        owners = labels[cupy.asarray(farthest)].get()
        for cluster, point, owner in zip(empty, farthest, owners):
            weight = float(weights[int(point)])
            share = weight * X[int(point)].astype(cupy.float64).get()
            sums[owner] -= share
            totals[owner] -= weight
            sums[cluster], totals[cluster] = share, weight
    moved = np.array(centers, dtype=np.float64)
    filled = totals > 0
    moved[filled] = sums[filled] / totals[filled, None]
    return moved, fitting.weighted_sum(distances, weights), labels, relocated


def best(runs, X, weights):
    """fitting.best's choice on the GPU: the first run of least inertia, a later one replacing it
    only where it is not the same clustering."""
    chosen = None
    for run in runs:
        inertia = fitting.weighted_sum(run[4], weights)
        if chosen is None or (inertia < chosen[0] and not lloyd.same_clustering(run[3].get(), chosen[1][3].get())):
            chosen = (inertia, run)
    return chosen[1]


def _inertia(X, centers, weights) -> float:
    return fitting.weighted_sum(nearest(X, centers)[1], weights)


# ---------------------------------------------------------------------- after the fit

def _fitted(model, X):
    """(X on the GPU, the caller's kind, the fitted centres as float64 there)."""
    import cupy

    X, kind = _device_data(model, X, reset=False)
    with X.device:
        centers = model.cluster_centers_
        centers = as_cupy(centers) if kind_of(centers) else cupy.asarray(centers)
        return X, kind, cupy.asarray(centers, dtype=cupy.float64)


def predict(model, X):
    """The float64 oracle's nearest centre of each sample, as the CPU predict gives it."""
    import cupy

    X, kind, centers = _fitted(model, X)
    with X.device:
        return as_kind(nearest(X, centers)[0].astype(cupy.int32), kind)


def score(model, X, sample_weight=None):
    """Minus the float64 inertia of X."""
    import cupy

    X, _kind, centers = _fitted(model, X)
    with X.device:
        weights = model._weights(host(sample_weight), X.shape[0])
        return -_inertia(X, centers, None if weights is None else cupy.asarray(weights))


def transform(model, X):
    """Distances to every centre, (n, k) in X's dtype: the oracle's squared distances (direct up
    to reference.EXPANDED_FROM_DIM dimensions, else expanded on centred coordinates), rooted."""
    import cupy

    X, kind, centers = _fitted(model, X)
    with X.device:
        out = cupy.empty((X.shape[0], centers.shape[0]), dtype=X.dtype)
        step = rows_per_chunk(max(centers.shape[0], X.shape[1]))
        for first in range(0, X.shape[0], step):
            part = reference.squared_distances(X[first:first + step], centers, cupy)
            out[first:first + step] = cupy.sqrt(cupy.maximum(part, 0))
        return as_kind(out, kind)
