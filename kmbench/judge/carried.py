"""What an earlier scan's bounds are worth at new centroids (NOTES.md, "Carried bounds"): a
point's lower bound on every other centroid's distance, less the most those centroids moved; the
few centroids that moved far more than the rest are measured instead of bounded by their move.
The scans themselves are kept by kmbench.judge.seeds; kmbench.judge.scan tries them first.
"""

from __future__ import annotations

import numpy as np

from kmbench.judge.seeds import bound_slack
from kmbench.protocol import reference

MOVERS = 16  # at most this many centroids that moved most are measured exactly, not bounded by their move
MOVER_RATIO = 2.0  # ... and only those that moved this many times more than the rest's largest


def carried_bounds(seed, centroids, xp):
    """What a seed's lower bounds must give up at these centroids (NOTES.md, "Carried bounds"):
    per centroid j, the most any other centroid moved (`other`); the few centroids that moved far
    more than the rest (`movers`), whose distances may be measured instead; and per centroid j the
    most any other centroid but j and the movers moved (`rest`)."""
    moved = reference.to_numpy(seed.moved(centroids, xp))
    k = moved.shape[0]
    order = np.argsort(moved)[::-1]
    movers = np.zeros(0, dtype=np.int64)
    if k > MOVERS + 2:
        limit = MOVER_RATIO * moved[order[MOVERS]]
        movers = order[:MOVERS][moved[order[:MOVERS]] > limit]
    kept = moved.copy()
    kept[movers] = 0.0
    return xp.asarray(largest_but_own(moved)), movers, xp.asarray(largest_but_own(kept))


def largest_but_own(moved: np.ndarray) -> np.ndarray:
    """Per centroid j, the largest of `moved` over every other centroid."""
    out = np.zeros_like(moved)
    if moved.shape[0] > 1:
        first = int(np.argmax(moved))
        out[:] = moved[first]
        out[first] = np.max(np.delete(moved, first))
    return out


def measured_lower(below, was, x, c64, movers, xp):
    """`below` (a bound on every centroid but the movers and `was`) lowered to each mover's
    distance, measured in float64."""
    slack = bound_slack(x.shape[1])
    for mover in movers.tolist():  # few: `carried_bounds` keeps only those that moved far more than the rest
        gap = x - c64[mover]
        distance = xp.sqrt(reference.row_squares(gap, xp)) * (1 - slack)
        below = xp.minimum(below, xp.where(was == mover, xp.inf, distance))
    return below


def rows_of_seed(array, start: int, stop: int, xp):
    """Rows start:stop of a seed's array where xp computes: a view where it is already there, else
    a copy of those rows only (a seed kept in host memory goes to a GPU a chunk at a time)."""
    part = array[start:stop]
    return reference.to_numpy(part) if xp is np else xp.asarray(part)
