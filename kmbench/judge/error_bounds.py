"""The error bounds of one scan, per point (NOTES.md, "Distances" and "Direct distances"): how far
a row's squared distances may be off, where its arithmetic is exact, and the float64 bounds
rounded to the float32 an Assignment keeps, always on the safe side.
"""

from __future__ import annotations

import numpy as np

from kmbench.judge.precision import Precision, distance_factor

def exact_points(x, largest_anchor: float, precision: Precision, xp):
    """Points where every form of the row's arithmetic is exact, given integer centroids and
    mean (the caller checks those once): integer coordinates, and every sum of products below
    the precision's exact-integer limit (`largest_anchor`: the largest |centroid| plus |mean|
    coordinate). Only there does rounding vanish, so only there are exact ties decided by the
    lowest-index rule."""
    integral = xp.all(x == xp.round(x), axis=1)
    largest = xp.abs(x).max(axis=1) + largest_anchor
    return integral & (x.shape[1] * largest * largest * 4 < precision.exact_below)


def integer_anchors(centroids, mean, xp) -> float | None:
    """The largest |centroid| plus |mean| coordinate where both are integers, else None."""
    if not (bool(xp.all(centroids == xp.round(centroids))) and bool(xp.all(mean == xp.round(mean)))):
        return None
    return float(xp.abs(centroids).max()) + float(xp.abs(mean).max())


def row_error_bound(points, c_norm_max, c_centred_max, precision: Precision, xp):
    """E(x): a bound on how far the row's squared distance from x to any centroid is off, over
    the anchors it may centre on (the origin and the data's mean); NOTES.md, "Distances"."""
    factor = distance_factor(precision, points.x.shape[1])
    raw = points.norm + c_norm_max
    centred = points.centred_norm + c_centred_max
    return factor * xp.maximum(raw * raw, centred * centred)


def round_up(values, xp):
    """Non-negative float64 values to a float32 at or above each: widened by 2^-22 relatively and
    2^-149 absolutely, more than rounding to the nearest float32 can take off (half an ulp: 2^-24
    relatively, 2^-150 among subnormals). Past float32's largest, inf: still a bound above (data
    of 1e30 get there), and no warning to say."""
    with np.errstate(over="ignore"):
        return (values * (1 + 2.0 ** -22) + 2.0 ** -149).astype(xp.float32)


def round_down(values, xp):
    """Non-negative float64 values to a float32 at or below each (the same margins, taken off;
    past float32's largest, its largest: inf would be no bound)."""
    largest = float(np.finfo(np.float32).max)
    return xp.clip(values * (1 - 2.0 ** -22) - 2.0 ** -149, 0.0, largest).astype(xp.float32)


def direct_error(d_a, d_b, reach, factor: float, unit: float):
    """E(x, c_a) + E(x, c_b) for a row that declares direct distances, sum of (x - c)^2: each is
    off by gamma_{d+2} |x - c|^2 plus what rounding the shifted coordinates or the stored centroid
    moves it: each point and centroid may be rounded twice (to the working format, then after the
    shift), so |x - c| moves by at most 2 u S, adding 4 u |x - c| S + 4 u^2 S^2 (NOTES.md,
    "Direct distances")."""
    roots = d_a.clip(0) ** 0.5 + d_b.clip(0) ** 0.5
    return factor * (d_a + d_b) + 4 * unit * reach * roots + 8 * unit * unit * reach * reach
