"""One assignment from given centroids, as the judge knows it: which label each point must get
from a row of a declared precision, and which labels are admissible where rounding could go
either way. NOTES.md beside this file derives the bounds.

Every point is scored once: in float32 by a matrix product (expanded distances on coordinates
centred on the data's mean; the judge's own arithmetic, shared with no row), or at low d on the
CPU by SciPy's k-d tree, which gives the two nearest centroids' float64 distances in
O(log k) per point where a product costs k, or at low d on the GPU by the judge's own fused
float64 kernel. A point whose two best scores are further apart than twice the judge's error
plus twice the row's is *clear*: its nearest centroid is known exactly, and it is the only
admissible label. Only the other points are scored again in float64, against every centroid;
their admissible labels are those within the rounding of the declared precision of the
smallest float64 distance, and the float64 decision is the smallest (lowest index on ties).

Works with NumPy or CuPy arrays (`xp`); data larger than the GPU stay in host memory and come
a block at a time (kmbench.protocol.reference.blocks).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import os

from kmbench.judge.precision import FLOAT32, FLOAT64, PRECISIONS, Precision, distance_factor, gamma
from kmbench.protocol import reference

SCORE_ELEMENTS = 1 << 24  # points x centroids per float32 score chunk (64 MiB; up to 2 GiB on a GPU)
KD_TREE_MAX_DIM = 8  # up to here NumPy's scan finds the two nearest with a k-d tree, not a product
FUSED_MAX_DIM = 8  # up to here CuPy's scan runs the judge's own fused float64 kernel, not a product
FUSED_ROWS = 1 << 25  # points per fused chunk (their float64 copy: 512 MiB at d = 2)
FUSED_TILE = 256  # centroids per shared-memory tile

# The judge's own kernel (no row's): each thread one point, float64 squared distances to every
# centroid, the smallest with its lowest index and the second smallest. Only where d is small
# enough that a matrix product would spend its time writing n x k scores.
_FUSED_SOURCE = r"""
extern "C" __global__ void best_two(const double* x, long long n, int d, const double* centroids, int k,
                                    const double* mean, double* d1, double* d2, int* best) {
  extern __shared__ double tile[];
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  double p[8];
  if (i < n) for (int j = 0; j < d; ++j) p[j] = x[i * d + j] - mean[j];
  double first = 1.0 / 0.0, second = 1.0 / 0.0;
  int index = 0;
  for (int start = 0; start < k; start += blockDim.x) {
    int m = min((int)blockDim.x, k - start);
    __syncthreads();
    for (int t = threadIdx.x; t < m * d; t += blockDim.x) tile[t] = centroids[(long long)start * d + t];
    __syncthreads();
    if (i < n) {
      for (int q = 0; q < m; ++q) {
        double s = 0.0;
        for (int j = 0; j < d; ++j) { double v = p[j] - tile[q * d + j]; s += v * v; }
        if (s < first) { second = first; first = s; index = start + q; }
        else if (s < second) second = s;
      }
    }
  }
  if (i < n) { d1[i] = first; d2[i] = second; best[i] = index; }
}
"""


@dataclass
class Geometry:
    """What every assignment of one problem shares: the data's mean (the judge's anchor)."""

    mean: object  # (d,) float64 on xp

    @classmethod
    def of(cls, data, xp=np) -> "Geometry":
        return cls(reference.mean(data, xp))


@dataclass
class Assignment:
    """The judge's view of one assignment from `centroids` (all arrays on xp, n long):
    - nearest: the float64 decision (exact nearest centroid, lowest index on exact ties);
    - unique: the only label a row of the declared precision may give (clear points, and points
      whose float64 distances leave one label within the rounding);
    - pairs: (point, centroid) for every admissible label of the other points, sorted by point;
    - allowance: per point, twice the judge's float64 error plus twice the row's error: how far
      above the smallest distance an admissible label may lie (float32, rounded up: for reports).
    Kept compact (int32 labels, float32 allowances): at 1e9 points they are what the GPU holds."""

    nearest: object
    unique: object
    pair_points: object
    pair_centroids: object
    allowance: object

    @property
    def near_ties(self) -> int:
        return int((~self.unique).sum())


def _exact_points(x, largest_anchor: float, precision: Precision, xp):
    """Points where every form of the row's arithmetic is exact, given integer centroids and
    mean (the caller checks those once): integer coordinates, and every sum of products below
    the precision's exact-integer limit (`largest_anchor`: the largest |centroid| plus |mean|
    coordinate). Only there does rounding vanish, so only there are exact ties decided by the
    lowest-index rule."""
    integral = xp.all(x == xp.round(x), axis=1)
    largest = xp.abs(x).max(axis=1) + largest_anchor
    return integral & (x.shape[1] * largest * largest * 4 < precision.exact_below)


def _integer_anchors(centroids, mean, xp) -> float | None:
    """The largest |centroid| plus |mean| coordinate where both are integers, else None."""
    if not (bool(xp.all(centroids == xp.round(centroids))) and bool(xp.all(mean == xp.round(mean)))):
        return None
    return float(xp.abs(centroids).max()) + float(xp.abs(mean).max())


def _score_elements(xp) -> int:
    """Points x centroids per float32 score chunk: larger on a GPU, where each chunk costs a
    few launches and synchronisations, within a sixteenth of its free memory (float32 scores
    and their temporaries)."""
    if xp is np:
        return SCORE_ELEMENTS
    return int(max(SCORE_ELEMENTS, min(32 * SCORE_ELEMENTS, reference._free_bytes(xp) // 64)))


def _row_error(x, x_centred_norm, c_norm_max, c_centred_max, precision: Precision, xp):
    """E(x): a bound on how far the row's squared distance from x to any centroid is off, over
    the anchors it may centre on (the origin and the data's mean); NOTES.md, "Distances"."""
    factor = distance_factor(precision, x.shape[1])
    raw = xp.sqrt((x * x).sum(axis=1)) + c_norm_max
    centred = x_centred_norm + c_centred_max
    return factor * xp.maximum(raw * raw, centred * centred)


def _round_up(values, xp):
    """float64 values to the float32 at or above each."""
    rounded = values.astype(xp.float32)
    return xp.where(rounded.astype(xp.float64) < values, xp.nextafter(rounded, xp.float32(np.inf)), rounded)


def _product_precision(xp) -> Precision:
    """What the judge's own float32 product computes in: TF32 where CuPy is told to use it."""
    return PRECISIONS["tf32"] if xp is not np and os.environ.get("CUPY_TF32") == "1" else FLOAT32


def _product_best_two(x_centred, c32, c_half, x_centred_norm, xp):
    """(d1, d2, nearest): the two smallest float32 expanded squared distances and the index of
    the smallest, from one float32 product of the centred coordinates."""
    scores = c_half[None, :] - 2 * (x_centred.astype(xp.float32) @ c32.T)
    rows = xp.arange(x_centred.shape[0])
    best = xp.argmin(scores, axis=1)
    common = x_centred_norm ** 2
    d1 = scores[rows, best].astype(xp.float64) + common
    if scores.shape[1] > 1:
        scores[rows, best] = xp.inf
        d2 = scores.min(axis=1).astype(xp.float64) + common
    else:
        d2 = xp.full(x_centred.shape[0], xp.inf)
    return d1, d2, best


def _fused_best_two(x, c_centred, mean, xp):
    """(d1, d2, nearest) from the judge's fused float64 kernel (x: float64 points)."""
    kernel = xp.RawKernel(_FUSED_SOURCE, "best_two")
    n, d = x.shape
    k = c_centred.shape[0]
    d1, d2 = xp.empty(n, xp.float64), xp.empty(n, xp.float64)
    best = xp.empty(n, xp.int32)
    blocks = (n + FUSED_TILE - 1) // FUSED_TILE
    kernel((blocks,), (FUSED_TILE,), (xp.ascontiguousarray(x), np.int64(n), np.int32(d),
                                      xp.ascontiguousarray(c_centred), np.int32(k), mean, d1, d2, best),
           shared_mem=FUSED_TILE * d * 8)
    return d1, d2, best


def _tree_best_two(tree, x_centred, k: int):
    """(d1, d2, nearest) from the k-d tree of the centred centroids, float64 distances squared."""
    distances, index = tree.query(x_centred, k=2, workers=-1)
    return distances[:, 0] ** 2, distances[:, 1] ** 2, index[:, 0]


def _direct_error(d_a, d_b, reach, factor: float, unit: float):
    """E(x, c_a) + E(x, c_b) for a row that declares direct distances, sum of (x - c)^2: each is
    off by gamma_{d+2} |x - c|^2 plus what rounding the shifted coordinates or the stored centroid
    moves it: each point and centroid may be rounded twice (to the working format, then after the
    shift), so |x - c| moves by at most 2 u S, adding 4 u |x - c| S + 4 u^2 S^2 (NOTES.md,
    "Direct distances")."""
    roots = d_a.clip(0) ** 0.5 + d_b.clip(0) ** 0.5
    return factor * (d_a + d_b) + 4 * unit * reach * roots + 8 * unit * unit * reach * reach


def assign(data, centroids, precision: Precision, geometry: Geometry, xp=np, direct: bool = False) -> Assignment:
    """The judge's assignment from `centroids` (k, d) for a row of `precision`; direct: the row
    declares that it computes sum of (x - c)^2 (a bound relative to each distance, not to |x|^2)."""
    k, d = centroids.shape
    direct = direct and precision.input == precision.accumulate == precision.store
    direct_factor = gamma(d + 2, precision.accumulate)
    c64 = xp.asarray(centroids, dtype=xp.float64)
    mean = geometry.mean
    c_centred = c64 - mean
    c32 = c_centred.astype(xp.float32)
    c_half = (c32.astype(xp.float64) ** 2).sum(axis=1).astype(xp.float32)  # |c'|^2, rounded once
    c_norm_max = float(xp.sqrt((c64 * c64).sum(axis=1)).max())
    c_centred_max = float(xp.sqrt((c_centred * c_centred).sum(axis=1)).max())
    judge32, judge64 = distance_factor(_product_precision(xp), d), distance_factor(FLOAT64, d)
    parts = {name: [] for name in ("nearest", "unique", "pair_points", "pair_centroids", "allowance")}
    tree = None
    if xp is np and d <= KD_TREE_MAX_DIM and k > 1:
        from scipy.spatial import cKDTree

        tree = cKDTree(c_centred)
    fused = xp is not np and d <= FUSED_MAX_DIM and k > 1
    elements = _score_elements(xp)
    step = FUSED_ROWS if fused else max(1, elements // max(k, 1))
    anchors = _integer_anchors(c64, mean, xp)
    for first, block in reference.blocks(data, xp):
        for start in range(0, block.shape[0], step):
            x = xp.asarray(block[start : start + step], dtype=xp.float64)
            offset = first + start
            x_centred = x - mean
            x_centred_norm = xp.sqrt((x_centred * x_centred).sum(axis=1))
            spread_term = (x_centred_norm + c_centred_max) ** 2
            if tree is not None or fused:  # float64 distances: the judge's error is float64's
                d1, d2, best = (_tree_best_two(tree, x_centred, k) if tree is not None
                                else _fused_best_two(x, c_centred, mean, xp))
                judge_error = judge64 * spread_term
            else:
                d1, d2, best = _product_best_two(x_centred, c32, c_half, x_centred_norm, xp)
                judge_error = judge32 * spread_term
            exact = (xp.zeros(x.shape[0], dtype=bool) if anchors is None
                     else _exact_points(x, anchors, precision, xp))
            if direct:
                reach = xp.maximum(xp.sqrt((x * x).sum(axis=1)) + c_norm_max, x_centred_norm + c_centred_max)
                pair_error = _direct_error(d1, d2, reach, direct_factor, precision.accumulate)
                row_error = xp.zeros_like(d1)
            else:
                row_error = _row_error(x, x_centred_norm, c_norm_max, c_centred_max, precision, xp)
                pair_error = 2 * row_error
            pair_error = xp.where(exact, 0.0, pair_error)
            row_error = xp.where(exact, 0.0, row_error)
            clear = (d2 - d1) > 2 * judge_error + pair_error
            nearest = best.astype(xp.int32)
            unique = clear.copy()
            allowance = pair_error + 2 * xp.where(exact, 0.0, judge64 * spread_term)
            waiting = xp.nonzero(~clear)[0]
            rows_at_once = max(1, (SCORE_ELEMENTS * (1 if xp is np else 8)) // max(k, 1))  # float64 rows
            for part in range(0, waiting.size, rows_at_once):  # float64 rows: bounded memory
                pending = waiting[part : part + rows_at_once]
                near = x_centred[pending]
                distances = ((near * near).sum(axis=1)[:, None] - 2 * (near @ c_centred.T)
                             + (c_centred * c_centred).sum(axis=1)[None, :])
                closest = xp.argmin(distances, axis=1)
                smallest = distances[xp.arange(pending.size), closest]
                if direct:
                    judged = 2 * xp.where(exact[pending], 0.0, judge64 * spread_term[pending])
                    slack = _direct_error(distances, smallest[:, None], reach[pending][:, None], direct_factor,
                                          precision.accumulate)
                    slack = xp.where(exact[pending][:, None], 0.0, slack) + judged[:, None]
                    admissible = distances <= smallest[:, None] + slack
                else:
                    admissible = distances <= (smallest + allowance[pending])[:, None]
                nearest[pending] = closest
                # Where the arithmetic is exact, an exact tie goes to the lowest index, nowhere else.
                several_mask = (admissible.sum(axis=1) > 1) & ~exact[pending]
                unique[pending] = ~several_mask
                several = xp.nonzero(several_mask)[0]
                point_index, centroid_index = xp.nonzero(admissible[several])
                parts["pair_points"].append(pending[several][point_index] + offset)
                parts["pair_centroids"].append(centroid_index)
            parts["nearest"].append(nearest)
            parts["unique"].append(unique)
            parts["allowance"].append(_round_up(allowance, xp))
    joined = {name: (xp.concatenate(values) if values else xp.zeros(0, dtype=xp.int64))
              for name, values in parts.items()}
    return Assignment(**joined)


def admissible(assignment: Assignment, labels, k: int, xp=np):
    """Per point: may a row of the declared precision give it `labels`?"""
    labels = xp.asarray(labels).astype(xp.int64)
    ok = assignment.unique & (labels == assignment.nearest)
    tied = xp.nonzero(~assignment.unique)[0]
    if tied.size:
        keys = assignment.pair_points * k + assignment.pair_centroids
        wanted = tied * k + labels[tied]
        place = xp.minimum(xp.searchsorted(keys, wanted), keys.size - 1)
        ok[tied] = keys[place] == wanted  # every tied point has at least two pairs
    return ok
