"""The means side of the judge: points grouped by label in float64, and how far a row's mean
of them may lie from their exact mean, summed in any order in a declared precision
(NOTES.md beside this file, "Means"). Also the bounded gathers of chosen rows that the
label-free check needs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kmbench.judge.points import Geometry, rows_of
from kmbench.judge.precision import FLOAT64, Precision, gamma, sum_factor
from kmbench.protocol import reference


@dataclass
class Groups:
    """Per cluster: how many points, their float64 sum, sum_i max(|x_i|, |x_i - m|, |x_i - c|)
    (the largest summand norm any anchor of a row's sum can have: the origin, the data's mean,
    the old centroid c), and sum_i |x_i - c|^2 (with exact labels, c's share of the inertia)."""

    counts: object
    sums: object
    weights: object
    squares: object = None

    def means(self, previous, xp):
        filled = self.counts > 0
        out = xp.array(previous, dtype=xp.float64, copy=True)
        out[filled] = self.sums[filled] / self.counts[filled, None]
        return out, filled

    def inertia(self) -> float:
        """The sum of squared distances of the grouped points from the centroids they were
        grouped against (the inertia of those centroids where the labels are the exact nearest)."""
        return float(self.squares.sum())


BINCOUNT_MAX_COLUMNS = 8  # up to here NumPy sums by cluster a column at a time (bincount), not by a sparse product
ONE_HOT_MAX_K = 64  # up to here a GPU sums by products with a one-hot matrix; above, by a sparse product
ONE_HOT_ROWS = 4096  # rows per product of a batch: one long product keeps a GPU's GEMM on one block
ONE_HOT_ELEMENTS = 1 << 25  # rows x clusters of one-hot at a time (256 MiB of float64)


def scatter(labels, values, k: int, xp):
    """(k, d) float64 sums of the rows of `values` by label. NumPy: a sparse product. CuPy, few
    clusters: a batch of small products with one-hot blocks, summed (atomics would all meet on k
    addresses); many clusters: a sparse (CSR) product, cuSPARSE's (atomics would be n d)."""
    if xp is np:
        if values.shape[1] <= BINCOUNT_MAX_COLUMNS:  # a bincount a column: no sparse matrix to build
            return np.stack([np.bincount(labels, weights=values[:, column], minlength=k)
                             for column in range(values.shape[1])], axis=1)
        from scipy import sparse

        onehot = sparse.csr_matrix((np.ones(labels.size), (labels, np.arange(labels.size))), shape=(k, labels.size))
        return np.asarray(onehot @ values)
    rows, width = values.shape
    if k <= ONE_HOT_MAX_K:
        out = xp.zeros((k, width), dtype=xp.float64)
        step = max(ONE_HOT_ROWS, ONE_HOT_ELEMENTS // k // ONE_HOT_ROWS * ONE_HOT_ROWS)  # the one-hot's memory
        for start in range(0, rows, step):
            own, part = labels[start : start + step], values[start : start + step]
            whole = own.size // ONE_HOT_ROWS * ONE_HOT_ROWS
            if whole:
                onehot = (own[:whole, None] == xp.arange(k)[None, :]).astype(xp.float64)
                batches = onehot.reshape(-1, ONE_HOT_ROWS, k).transpose(0, 2, 1) @ part[:whole].reshape(
                    -1, ONE_HOT_ROWS, width)
                out += batches.sum(axis=0)
            if whole < own.size:
                out += (own[whole:, None] == xp.arange(k)[None, :]).astype(xp.float64).T @ part[whole:]
        return out
    from cupyx.scipy import sparse

    index = (labels.astype(xp.int32), xp.arange(rows, dtype=xp.int32))  # cuSPARSE's indices are 32-bit
    onehot = sparse.coo_matrix((xp.ones(rows), index), shape=(k, rows)).tocsr()
    return onehot @ xp.ascontiguousarray(values)


def chosen_chunks(data, rows, labels, xp, geometry: Geometry | None = None):
    """(float64 rows, their labels) for the chosen `rows`, a bounded number of elements at a
    time: where every point is ambiguous, `rows` names each point once per admissible centroid."""
    step = max(1, reference.chunk_elements(xp) // max(data.shape[1], 1))
    for start in range(0, rows.size, step):
        index = rows[start : start + step]
        x = geometry.chosen(data, index, xp).float64() if geometry is not None else rows_of(data, index, xp)
        yield x, labels[start : start + step]


def widen_boxes(low, high, labels, x, xp):
    """low/high (k, d): the per-cluster box of the rows of `x`, widened in place."""
    if xp is not np:
        import cupyx

        cupyx.scatter_min(low, labels, x)
        cupyx.scatter_max(high, labels, x)
        return
    # ufunc.at is slow for millions of rows: sort by cluster and reduce each run at once.
    order = np.argsort(labels, kind="stable")
    labels, x = labels[order], x[order]
    starts = np.flatnonzero(np.r_[True, labels[1:] != labels[:-1]])
    owners = labels[starts]
    low[owners] = np.minimum(low[owners], np.minimum.reduceat(x, starts, axis=0))
    high[owners] = np.maximum(high[owners], np.maximum.reduceat(x, starts, axis=0))


def group(data, labels, previous, geometry: Geometry, xp, rows=None) -> Groups:
    """Groups of the points by `labels` (all points, or only `rows`, with labels for them)."""
    k, d = previous.shape
    counts, sums, weights, squares = xp.zeros(k), xp.zeros((k, d)), xp.zeros(k), xp.zeros(k)
    if rows is not None:
        chunks = ((points, own) for index, own in _chosen_index(rows, labels, d, xp)
                  for points in [geometry.chosen(data, index, xp)])
    else:
        step = max(1, reference.chunk_elements(xp) // max(d, 1))
        chunks = ((geometry.rows(block, first, start, min(start + step, block.shape[0]), xp),
                   labels[first + start : first + min(start + step, block.shape[0])])
                  for first, block in reference.blocks(data, xp) for start in range(0, block.shape[0], step))
    for points, own in chunks:
        x = points.float64()
        own = own.astype(xp.int64)
        square = reference.row_squares(x - previous[own], xp)
        norm = xp.maximum(xp.maximum(points.norm, points.centred_norm), xp.sqrt(square))
        if xp is not np:  # one product for all columns (atomics would meet on few bins, or be many)
            totals = scatter(own, xp.concatenate([xp.ones((x.shape[0], 1)), norm[:, None], square[:, None], x],
                                                 axis=1), k, xp)
            counts, weights, squares = counts + totals[:, 0], weights + totals[:, 1], squares + totals[:, 2]
            sums += totals[:, 3:]
            continue
        counts += xp.bincount(own, minlength=k)
        weights += xp.bincount(own, weights=norm, minlength=k)
        squares += xp.bincount(own, weights=square, minlength=k)
        sums += scatter(own, x, k, xp)
    return Groups(counts, sums, weights, squares)


def _chosen_index(rows, labels, d: int, xp):
    """(rows, labels) a bounded number of elements at a time."""
    step = max(1, reference.chunk_elements(xp) // max(d, 1))
    for start in range(0, rows.size, step):
        yield rows[start : start + step], labels[start : start + step]


def cluster_sum_factors(counts, precision: Precision, xp):
    """Per cluster of `counts` points: the row's sum_factor plus the judge's own float64 sum's."""
    sizes = reference.to_numpy(xp.maximum(counts, 1)).astype(np.float64)
    return xp.asarray(sum_factor(precision, sizes) + gamma(sizes + 2, FLOAT64.accumulate))


def kept_bound(previous, precision: Precision, xp):
    """How far a kept centroid may move: its stored rounding, twice."""
    return 2 * precision.store * xp.sqrt((previous * previous).sum(axis=1))


def rounding_bound(groups: Groups, means, precision: Precision, xp):
    """Per cluster: how far a row's mean of these points may lie from their exact mean, summed
    in any order in `precision` (sum_factor), plus the judge's own float64 sum's error."""
    centre = xp.sqrt((means * means).sum(axis=1))
    return (cluster_sum_factors(groups.counts, precision, xp) * groups.weights / xp.maximum(groups.counts, 1)
            + 3 * precision.store * centre)
