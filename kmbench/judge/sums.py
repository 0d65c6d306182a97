"""The means side of the judge: points grouped by label in float64, and how far a row's mean
of them may lie from their exact mean, summed in any order in a declared precision
(NOTES.md beside this file, "Means"). Also the bounded gathers of chosen rows that the
label-free check needs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kmbench.judge.precision import FLOAT64, Precision, gamma, sum_factor
from kmbench.protocol import reference


@dataclass
class Groups:
    """Per cluster: how many points, their float64 sum, and sum_i max(|x_i|, |x_i - m|, |x_i - c|)
    (the largest summand norm any anchor of a row's sum can have: the origin, the data's mean,
    the old centroid c)."""

    counts: object
    sums: object
    weights: object

    def means(self, previous, xp):
        filled = self.counts > 0
        out = xp.array(previous, dtype=xp.float64, copy=True)
        out[filled] = self.sums[filled] / self.counts[filled, None]
        return out, filled


def scatter(labels, values, k: int, xp):
    """(k, d) float64 sums of the rows of `values` by label, one pass."""
    if xp is np:
        from scipy import sparse

        onehot = sparse.csr_matrix((np.ones(labels.size), (labels, np.arange(labels.size))), shape=(k, labels.size))
        return np.asarray(onehot @ values)
    import cupyx

    out = xp.zeros((k, values.shape[1]), dtype=xp.float64)
    cupyx.scatter_add(out, labels, values)
    return out


def rows_of(data, index, xp):
    """Chosen rows of the data as float64 on xp, wherever the data live."""
    if reference._computes_in_place(data, xp):
        return xp.asarray(data[index], dtype=xp.float64)
    return xp.asarray(np.asarray(data)[reference.to_numpy(index)], dtype=xp.float64)


def chosen_chunks(data, rows, labels, xp):
    """(float64 rows, their labels) for the chosen `rows`, a bounded number of elements at a
    time: where every point is ambiguous, `rows` names each point once per admissible centroid."""
    step = max(1, reference.CHUNK_ELEMENTS // max(data.shape[1], 1))
    for start in range(0, rows.size, step):
        yield rows_of(data, rows[start : start + step], xp), labels[start : start + step]


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


def group(data, labels, previous, mean, xp, rows=None) -> Groups:
    """Groups of the points by `labels` (all points, or only `rows`, with labels for them)."""
    k, d = previous.shape
    counts, sums, weights = xp.zeros(k), xp.zeros((k, d)), xp.zeros(k)
    if rows is not None:
        chunks = chosen_chunks(data, rows, labels, xp)
    else:
        chunks = ((x, labels[start : start + x.shape[0]]) for start, x in
                  reference._chunks(data, xp, max(1, reference.CHUNK_ELEMENTS // max(d, 1))))
    for x, own in chunks:
        own = own.astype(xp.int64)
        norm = xp.maximum(xp.sqrt((x * x).sum(axis=1)), xp.sqrt(((x - mean) ** 2).sum(axis=1)))
        norm = xp.maximum(norm, xp.sqrt(((x - previous[own]) ** 2).sum(axis=1)))
        counts += xp.bincount(own, minlength=k)
        weights += xp.bincount(own, weights=norm, minlength=k)
        sums += scatter(own, x, k, xp)
    return Groups(counts, sums, weights)


def cluster_sum_factors(counts, precision: Precision, xp):
    """Per cluster of `counts` points: the row's sum_factor plus the judge's own float64 sum's."""
    return xp.asarray([sum_factor(precision, int(c)) + gamma(int(c) + 2, FLOAT64.accumulate)
                       for c in reference.to_numpy(xp.maximum(counts, 1))])


def kept_bound(previous, precision: Precision, xp):
    """How far a kept centroid may move: its stored rounding, twice."""
    return 2 * precision.store * xp.sqrt((previous * previous).sum(axis=1))


def rounding_bound(groups: Groups, means, precision: Precision, xp):
    """Per cluster: how far a row's mean of these points may lie from their exact mean, summed
    in any order in `precision` (sum_factor), plus the judge's own float64 sum's error."""
    centre = xp.sqrt((means * means).sum(axis=1))
    return (cluster_sum_factors(groups.counts, precision, xp) * groups.weights / xp.maximum(groups.counts, 1)
            + 3 * precision.store * centre)
