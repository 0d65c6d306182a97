"""The float64 oracle: plain Lloyd iterations from the given centroids.

Deliberately written differently from the fast implementations (distances as
sums of squared differences, not the expanded matrix-product form) so that a
shared mistake is unlikely. Chunked over points so 1e7 points fit in bounded
memory. Works with NumPy or, when handed `cupy` as `xp`, on the GPU.
"""

from __future__ import annotations

import numpy as np

CHUNK_ELEMENTS = 1 << 23  # points x clusters per distance chunk (64 MiB of float64)


def _chunk_rows(k: int) -> int:
    return max(1, CHUNK_ELEMENTS // max(1, k))


def nearest(data, centroids, xp=np, dtype=None):
    """Index of the nearest centroid and its squared distance, for every point, computed
    in `dtype` (float64 unless told otherwise)."""
    dtype = dtype or xp.float64
    centroids = xp.asarray(centroids, dtype=dtype)
    n = data.shape[0]
    labels = xp.empty(n, dtype=xp.int64)
    best = xp.empty(n, dtype=dtype)
    step = _chunk_rows(centroids.shape[0])
    for start in range(0, n, step):
        chunk = xp.asarray(data[start : start + step], dtype=dtype)
        distances = xp.zeros((chunk.shape[0], centroids.shape[0]), dtype=dtype)
        for dim in range(chunk.shape[1]):
            distances += (chunk[:, dim : dim + 1] - centroids[None, :, dim]) ** 2
        labels[start : start + step] = xp.argmin(distances, axis=1)
        best[start : start + step] = xp.min(distances, axis=1)
    return labels, best


def update(data, labels, centroids, xp=np, dtype=None):
    """New centroids: means of the assigned points; an empty cluster keeps its centroid.
    Sums are float64 (bincount) unless `dtype` asks for float32 running sums in point
    order (`add.at`), the accumulation a plain loop or atomicAdd performs."""
    k, d = centroids.shape
    counts = xp.bincount(labels, minlength=k).astype(xp.float64)
    if dtype is None or dtype == xp.float64:
        sums = xp.empty((k, d), dtype=xp.float64)
        for dim in range(d):
            sums[:, dim] = xp.bincount(labels, weights=xp.asarray(data[:, dim], dtype=xp.float64),
                                       minlength=k)
    else:
        sums = xp.zeros((k, d), dtype=dtype)
        xp.add.at(sums, labels, xp.asarray(data, dtype=dtype))
        sums = sums.astype(xp.float64)
    filled = counts > 0
    new = xp.array(centroids, dtype=xp.float64, copy=True)
    new[filled] = sums[filled] / counts[filled, None]
    return new


def lloyd(data, initial_centroids, iterations: int, xp=np, dtype=None):
    """Run exactly `iterations` Lloyd iterations; return (centroids, labels).

    In float64 by default. `dtype=float32` computes distances, running sums and stored
    centroids in float32, as a plain float32 program does: the validator uses it to
    measure how much a problem amplifies float32 rounding."""
    data = xp.asarray(data)
    centroids = xp.asarray(initial_centroids, dtype=xp.float64)
    labels = None
    for _ in range(iterations):
        labels, _ = nearest(data, centroids, xp, dtype)
        centroids = update(data, labels, centroids, xp, dtype)
        if dtype is not None:
            centroids = centroids.astype(dtype).astype(xp.float64)
    return centroids, labels


def inertia(data, centroids, xp=np) -> float:
    """Sum of squared distances from each point to its nearest centroid (float64)."""
    _, best = nearest(xp.asarray(data), centroids, xp)
    return float(best.sum())


def array_module(n: int, k: int, iterations: int):
    """CuPy when a GPU is there and the work is large enough to matter, else NumPy."""
    if n * k * iterations < 1e9:
        return np
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
        return cupy
    except Exception:
        return np


def to_numpy(array) -> np.ndarray:
    return array.get() if hasattr(array, "get") else np.asarray(array)
