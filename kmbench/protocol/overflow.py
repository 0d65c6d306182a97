"""Values a row's precision cannot hold, found before the row runs.

A row computes every point's squared distance to every centroid in the precision it declares
(kmbench.judge.precision). Where a point's squared distance to its *nearest* initial centroid is
above the largest value that precision sums in, every one of its distances is infinite there: its
label, and so the whole first step, is not computed, whatever the row's form (coordinates of 1e30
in float32: squares of 1e60, above 3.4e38). A precision that holds the coordinates themselves in
a narrow format (float16: 65504 at most) fails sooner, where the points span more than twice that
in one coordinate: wherever a row centres them, some lie beyond it. Such a row would end
`mismatch` with no cause the judge can name; it is skipped instead, with the reason, and the run
says so before its cells.

The tests are cheap and never wrong in that direction: one pass over the data finds each
coordinate's range and the points farthest from the initial centroids' mean, and those few are
measured exactly against every initial centroid (a lower bound on the largest nearest distance of
the first step; if even it overflows, the step cannot be computed). A row that expands
|x|^2 - 2 x.c + |c|^2 from the origin may overflow sooner, on |x|^2 alone, which depends on the
row: `expanded_cause` names it as a likely cause of a mismatch instead of skipping it.
"""

from __future__ import annotations

import numpy as np

_F16, _F32, _F64 = (float(np.finfo(kind).max) for kind in (np.float16, np.float32, np.float64))
_BF16 = 3.3895313892515355e38  # bfloat16's largest: float32's exponent, 8 bits of significand
# Per declared precision: the largest coordinate it holds (the input format: TF32 keeps float32's
# exponent), and the largest sum it computes a squared distance in (the accumulator: float32 for
# the tensor-core precisions, as kmbench.judge.precision's `accumulate` says).
LARGEST_VALUE = {"float64": _F64, "float32": _F32, "tf32": _F32, "bfloat16": _BF16, "float16": _F16}
LARGEST_SUM = {"float64": _F64, "float32": _F32, "tf32": _F32, "bfloat16": _F32, "float16": _F32}
CANDIDATES = 64  # the farthest points measured exactly against every centroid
CHUNK_ROWS = 1 << 16  # rows of the data in float64 at a time: the pass holds no copy of it

_last: tuple | None = None  # (data, centroids, figures): one problem's figures, for every row of it


def _farthest(data: np.ndarray, anchor: np.ndarray, count: int) -> np.ndarray:
    """The indices of (up to) `count` points farthest from `anchor`, by one pass in chunks."""
    best_index = np.empty(0, dtype=np.int64)
    best_value = np.empty(0)
    for start in range(0, data.shape[0], CHUNK_ROWS):
        block = np.asarray(data[start:start + CHUNK_ROWS], dtype=np.float64) - anchor
        with np.errstate(over="ignore", invalid="ignore"):
            squared = np.einsum("ij,ij->i", block, block)
        squared = np.nan_to_num(squared, nan=np.inf)
        index = np.concatenate([best_index, np.arange(start, start + len(block))])
        value = np.concatenate([best_value, squared])
        keep = np.argpartition(-value, count - 1)[:count] if len(value) > count else slice(None)
        best_index, best_value = index[keep], value[keep]
    return best_index


def _nearest_squared(points: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Each point's squared distance to its nearest centroid, in float64 after a power-of-two
    scaling that keeps the squares finite (inf only beyond float64's range); one point at a time,
    so k x d is the most it holds."""
    scale = float(max(np.abs(points).max(initial=0.0), np.abs(centroids).max(initial=0.0)))
    if scale == 0.0 or not np.isfinite(scale):
        return np.full(len(points), 0.0 if scale == 0.0 else np.inf)
    power = 2.0 ** np.ceil(np.log2(scale))
    scaled = centroids / power
    nearest = np.array([np.einsum("ij,ij->i", scaled - point / power, scaled - point / power).min()
                        for point in points])
    with np.errstate(over="ignore"):
        return nearest * power * power


def _span(data: np.ndarray) -> float:
    """The widest range of one coordinate over the points (max - min), by chunks."""
    low = high = None
    for start in range(0, data.shape[0], CHUNK_ROWS):
        block = np.asarray(data[start:start + CHUNK_ROWS], dtype=np.float64)
        low = block.min(axis=0) if low is None else np.minimum(low, block.min(axis=0))
        high = block.max(axis=0) if high is None else np.maximum(high, block.max(axis=0))
    if low is None:
        return 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.nan_to_num(high - low, nan=np.inf).max(initial=0.0))


def figures(data: np.ndarray, centroids: np.ndarray) -> tuple[float, float]:
    """(span, reach): the widest coordinate range, and a lower bound on the largest squared
    distance from a point to its nearest initial centroid (exact over the points farthest from
    the centroids' mean). Computed once per problem, whatever number of rows asks."""
    global _last
    if _last is not None and _last[0] is data and _last[1] is centroids:
        return _last[2]
    start = np.asarray(centroids, dtype=np.float64)
    if len(data) == 0 or len(start) == 0:
        return 0.0, 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        anchor = start.mean(axis=0)
    anchor = np.nan_to_num(anchor, nan=0.0, posinf=0.0, neginf=0.0)
    candidates = np.asarray(data[np.sort(_farthest(data, anchor, CANDIDATES))], dtype=np.float64)
    found = (_span(data), float(_nearest_squared(candidates, start).max()))
    _last = (data, centroids, found)
    return found


def _about(value: float) -> str:
    return "beyond float64's range" if not np.isfinite(value) else f"about {value:.1e}"


def cannot_hold(data: np.ndarray, centroids: np.ndarray, computes_in: str) -> str | None:
    """Why a row computing in `computes_in` cannot compute this problem's first step, or None."""
    if computes_in not in LARGEST_SUM:
        return None
    span, reach = figures(data, centroids)
    value, total = LARGEST_VALUE[computes_in], LARGEST_SUM[computes_in]
    if span > 2 * value:
        return (f"{computes_in} cannot hold these points: one coordinate spans {_about(span)}, so wherever a "
                f"row centres them some lie beyond {computes_in}'s largest value ({value:.1e})")
    if reach > total:
        return (f"{computes_in} cannot hold these squared distances: a point's squared distance to its "
                f"nearest initial centroid is {_about(reach)}, above the largest value {computes_in} sums "
                f"in ({total:.1e}), so all its distances overflow")
    return None


def expanded_cause(data: np.ndarray, computes_in: str) -> str | None:
    """Where the data's largest |x|^2 is above what `computes_in` sums in: a likely cause of a
    mismatch of a row that expands its distances from the origin (or None)."""
    total = LARGEST_SUM.get(computes_in)
    if total is None or len(data) == 0:
        return None
    origin = np.zeros((1, data.shape[1]))
    farthest = np.asarray(data[_farthest(data, origin[0], 1)], dtype=np.float64)
    found = float(_nearest_squared(farthest, origin)[0])
    if found <= total:
        return None
    return (f"{computes_in} cannot hold |x|^2 of these points ({_about(found)}, above {total:.1e}): "
            "a row that expands |x|^2 - 2 x.c + |c|^2 without centring the data overflows")
