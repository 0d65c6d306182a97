"""The judge's scorers: each chosen point's two smallest squared distances to one assignment's
centroids and the nearest of them, by the judge's own arithmetic (shared with no row), with the
factor of the judge's error on them. Which arithmetic is chosen here, in one place:

- on the CPU at low d, float64: a direct scan (few centroids) or SciPy's k-d tree (many);
- on the GPU at low d, float64: the judge's own fused kernel (kmbench.judge.kernels);
- elsewhere, float32 expanded distances by a matrix product, on coordinates centred on the data's
  mean (TF32 where CuPy is told to use it).

The caller (kmbench.judge.scan) decides from these scores which points are clear.
"""

from __future__ import annotations

import os

import numpy as np

from kmbench.judge import kernels
from kmbench.judge.precision import FLOAT32, FLOAT64, PRECISIONS, Precision, distance_factor
from kmbench.protocol import reference

SCORE_ELEMENTS = 1 << 24  # points x centroids per float32 score chunk (64 MiB; up to 2 GiB on a GPU)
KD_TREE_MAX_DIM = 8  # up to here NumPy's scan finds the two nearest without a product
DIRECT_MAX_WORK = 256  # k * d up to which NumPy scores every centroid directly, not by a k-d tree
TREE_ROWS = 1 << 20  # points per k-d tree query (each query starts its threads once)
TREE_CANDIDATES = 8  # nearest centroids a near-tie is first scored against in float64 (k-d tree)
FUSED_MAX_DIM = 8  # up to here CuPy's scan runs the judge's own fused float64 kernel, not a product
FUSED_ROWS = 1 << 25  # points per fused chunk (their float64 copy: 512 MiB at d = 2)


def _score_elements(xp) -> int:
    """Points x centroids per float32 score chunk: larger on a GPU, where each chunk costs a
    few launches and synchronisations, within a sixteenth of its free memory (float32 scores
    and their temporaries)."""
    if xp is np:
        return SCORE_ELEMENTS
    return int(max(SCORE_ELEMENTS, min(32 * SCORE_ELEMENTS, reference._free_bytes(xp) // 64)))


def _product_precision(xp) -> Precision:
    """What the judge's own float32 product computes in: TF32 where CuPy is told to use it."""
    return PRECISIONS["tf32"] if xp is not np and os.environ.get("CUPY_TF32") == "1" else FLOAT32


def _top_two(scores, xp):
    """(smallest, second smallest, index of the smallest) of each row of `scores` (overwritten)."""
    rows = xp.arange(scores.shape[0])
    best = xp.argmin(scores, axis=1)
    first = scores[rows, best]
    if scores.shape[1] > 1:
        scores[rows, best] = xp.inf
        second = scores.min(axis=1)
    else:
        second = xp.full(scores.shape[0], xp.inf, dtype=scores.dtype)
    return first, second, best


class Scorer:
    """Scores chosen points against every centroid of one assignment: (d1, d2, nearest) and the
    factor K of the judge's own error K (|x'| + max |c'|)^2 on those distances."""

    def __init__(self, c_centred, mean, xp):
        self.xp, self.mean = xp, mean
        self.k, self.d = c_centred.shape
        self.c_centred = c_centred
        self.tree = self.direct = self.fused = False
        if xp is np and self.d <= KD_TREE_MAX_DIM and self.k > 1:
            self.direct = self.k * self.d <= DIRECT_MAX_WORK
            if not self.direct:
                from scipy.spatial import cKDTree

                self.tree = cKDTree(c_centred)
        self.fused = xp is not np and self.d <= FUSED_MAX_DIM and self.k > 1
        exact64 = self.tree is not False or self.direct or self.fused
        self.factor = distance_factor(FLOAT64 if exact64 else _product_precision(xp), self.d)
        if not exact64:
            c32 = c_centred.astype(xp.float32)
            half = (c32.astype(xp.float64) ** 2).sum(axis=1).astype(xp.float32)  # |c'|^2, rounded once
            # The NumPy product scores |c'|^2 - 2 x'.c' in one GEMM of d + 1 terms (x' with a 1,
            # c' times -2 with |c'|^2): no pass over the scores before the two smallest are found.
            self.c32, self.half = c32, half
            self.augmented = xp.concatenate([-2 * c32, half[:, None]], axis=1) if xp is np else None

    def rows_per_chunk(self, xp) -> int:
        if self.fused:
            return FUSED_ROWS
        if self.tree is not False:
            return TREE_ROWS
        return max(1, _score_elements(xp) // max(self.k, 1))

    def nearest_few(self, x_centred):
        """(float64 squared distances, centroid indices) of the TREE_CANDIDATES nearest, nearest first."""
        distances, index = self.tree.query(x_centred, k=TREE_CANDIDATES, workers=-1)
        return distances ** 2, index

    def best_two(self, points, rows):
        """(d1, d2, nearest) of the chosen rows of `points`."""
        xp = self.xp
        if self.fused:
            return kernels.fused_best_two(points.float64(rows), self.c_centred, self.mean, xp)
        x_centred = points.centred(rows)
        if self.tree is not False:
            distances, index = self.tree.query(x_centred, k=2, workers=-1)
            return distances[:, 0] ** 2, distances[:, 1] ** 2, index[:, 0]
        if self.direct:
            return direct_best_two(x_centred, self.c_centred)
        common = points.centred_norm[rows] ** 2
        x32 = x_centred.astype(xp.float32)
        if xp is np:
            scores = np.concatenate([x32, np.ones((x32.shape[0], 1), np.float32)], axis=1) @ self.augmented.T
            d1, d2, best = _top_two(scores, xp)
        else:
            d1, d2, best = kernels.scored_best_two(x32 @ self.c32.T, self.half, xp)
        return d1.astype(xp.float64) + common, d2.astype(xp.float64) + common, best


DIRECT_BLOCK = 8192  # points per block of the NumPy direct scan: its dozen arrays stay in cache


def direct_best_two(x_centred, c_centred):
    """(d1, d2, nearest) in float64, sum of (x' - c')^2, for NumPy with few centroids: a block of
    points at a time, one centroid at a time over contiguous columns, every operation in place (a
    points x centroids matrix and its top two cost several times more in passes over memory); the
    first of equal smallest is the lowest index."""
    n = x_centred.shape[0]
    first, second, nearest = np.empty(n), np.empty(n), np.empty(n, dtype=np.int64)
    for start in range(0, n, DIRECT_BLOCK):
        rows = slice(start, start + DIRECT_BLOCK)
        first[rows], second[rows], nearest[rows] = _direct_block(x_centred[rows], c_centred)
    return first, second, nearest


def _direct_block(x_centred, c_centred):
    columns = np.ascontiguousarray(x_centred.T)
    n = columns.shape[1]
    first, second = np.full(n, np.inf), np.full(n, np.inf)
    nearest, step = np.zeros(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    distance, part, closer = np.empty(n), np.empty(n), np.empty(n, dtype=bool)
    for j, centre in enumerate(c_centred):
        np.subtract(columns[0], centre[0], out=distance)
        np.square(distance, out=distance)
        for dim in range(1, columns.shape[0]):
            np.subtract(columns[dim], centre[dim], out=part)
            np.square(part, out=part)
            distance += part
        # Masked copies are slow in NumPy (a millisecond per 1e5): min and max do the same here.
        # The second smallest of {first, second, distance} is min(second, max(first, distance)).
        np.less(distance, first, out=closer)
        np.maximum(first, distance, out=part)
        np.minimum(second, part, out=second)
        np.minimum(first, distance, out=first)
        np.subtract(nearest, j, out=step)  # nearest becomes j where this centroid is strictly closer
        np.multiply(step, closer, out=step)
        np.subtract(nearest, step, out=nearest)
    return first, second, nearest
