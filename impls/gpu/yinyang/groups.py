"""yinyang-gpu's centroid groups: how many, which centroid goes in which (five float64 Lloyd
iterations on the initial centroids themselves), and the renumbering that makes each group a
contiguous range of centroids, with the tables the kernels read. Part of the timed run: the
grouping is part of Yinyang's cost."""

from __future__ import annotations

import math

GROUP_RATIO = 0.1  # groups per centroid, as kmcuda's yinyang_t
GROUPING_ITERATIONS = 5


def group_count(k: int) -> int:
    return max(1, math.ceil(k * GROUP_RATIO))


def group_centroids(start, groups: int, iterations: int = GROUPING_ITERATIONS):
    """Group labels for the k centroids (cupy float64 array): Lloyd on the centroids themselves,
    started from every (k / groups)-th one; an emptied group keeps its centre."""
    import cupy

    k = start.shape[0]
    centres = start[(cupy.arange(groups) * k) // groups].copy()
    squares = (start * start).sum(axis=1)[:, None]
    owner = cupy.zeros(k, dtype=cupy.int64)
    for _ in range(iterations):
        owner = (squares - 2 * start @ centres.T + (centres * centres).sum(axis=1)[None, :]).argmin(axis=1)
        members = cupy.zeros((groups, k))
        members[owner, cupy.arange(k)] = 1.0
        counts = members.sum(axis=1)
        filled = counts > 0
        centres[filled] = (members @ start)[filled] / counts[filled, None]
    return owner


def group_layout(start64, groups: int):
    """Group the initial centroids and renumber them group by group: (the order, internal index
    -> the harness's index; each group's first centroid, with the total last; each centroid's
    group; a group x member table, -1 padded, for each group's largest drift)."""
    import cupy

    owner = group_centroids(start64, groups)
    order = cupy.argsort(owner, kind="stable")
    sizes = cupy.bincount(owner, minlength=groups)
    group_start = cupy.concatenate([cupy.zeros(1, dtype=cupy.int64), cupy.cumsum(sizes)]).astype(cupy.int32)
    group_of = owner[order].astype(cupy.int32)
    widest = int(sizes.max())
    member = group_start[:-1, None] + cupy.arange(widest, dtype=cupy.int32)[None, :]
    group_member = cupy.where(member < group_start[1:, None], member, -1)
    return order, group_start, group_of, group_member
