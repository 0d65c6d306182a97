"""The float64 oracle's labels on a GPU, for kmbench.KMeans: reference.nearest's answer (the direct
form's winner, lowest index on a tie: a function of the point and the centres), in fewer passes.

reference.nearest ranks the centres of a chunk by the expanded form and hands the points whose best
two lie within its rounding (`reference.margin_factor`) to the direct form. On a GPU its n x k
float64 matrix is written once by the product and then read or rewritten ten more times by CuPy's
element-wise steps, argmin and min: at 1e7 x 128, k = 1,024 that is about 0.9 TB of traffic, most of
a 0.46 s labels pass. Here one kernel reads the product once and keeps, per row, the winner, its
index and the runner-up, adding the squares in reference._expanded's order (-2 p.c, + |p|^2,
+ |c|^2, clamped at 0), so the gaps are the same numbers. Everything else (the shift, the squares,
the margin, the direct form for the unsure points and the winners' distances) is reference's own
code (reference.settle). The answer needs no bit of the expanded form to match: a gap above the
margin fixes the direct form's winner whatever the rounding within it (protocol/NOTES.md), and the
rest are decided by the direct form itself.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from kmbench.protocol import reference

# One warp a row: each lane folds its columns into (best, its index, runner-up), then the warp
# merges lanes. A NaN anywhere in the row makes its gap NaN, as CuPy's min does in reference (the
# row is then unsure and goes to the direct form). Adds written as __dadd_rn so that no compiler
# contracts them with the product into a fused multiply-add.
_SOURCE = r"""
extern "C" __global__ void best_two(const double* products, const double* point_squares,
                                    const double* centre_squares, long long rows, int k,
                                    long long* found, double* winner, double* gap) {
    long long row = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const double* line = products + row * (long long)k;
    double square = point_squares[row];
    double best = __longlong_as_double(0x7ff0000000000000LL), second = best;  // +inf
    int index = 0x7fffffff;
    bool nan = false;
    for (int j = lane; j < k; j += 32) {
        double v = __dadd_rn(__dadd_rn(-2.0 * line[j], square), centre_squares[j]);
        v = v < 0.0 ? 0.0 : v;  // reference clamps with maximum(v, 0): a NaN stays NaN
        if (v != v) { nan = true; continue; }
        if (v < best) { second = best; best = v; index = j; }
        else if (v < second) { second = v; }
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        double other_best = __shfl_down_sync(0xffffffff, best, offset);
        double other_second = __shfl_down_sync(0xffffffff, second, offset);
        int other_index = __shfl_down_sync(0xffffffff, index, offset);
        nan |= __shfl_down_sync(0xffffffff, (int)nan, offset) != 0;
        bool theirs = other_best < best || (other_best == best && other_index < index);
        double loser = theirs ? best : other_best;
        second = fmin(fmin(second, other_second), loser);
        if (theirs) { best = other_best; index = other_index; }
    }
    if (lane == 0) {
        // A row of NaN only: index 0, as argmin gives; its gap is NaN either way.
        found[row] = index == 0x7fffffff ? 0 : index;
        winner[row] = best;
        gap[row] = nan ? __longlong_as_double(0x7ff8000000000000LL) : second - best;  // NaN
    }
}
"""
_WARPS_PER_BLOCK = 8


@cache
def _kernel():
    import cupy

    return cupy.RawKernel(_SOURCE, "best_two")


def rows_per_chunk(width: int) -> int:
    """Rows of a float64 chunk `width` wide: a sixteenth of the GPU's free memory, at least the
    oracle's GPU chunk (GPU_ELEMENTS, 1 GiB). Few chunks: each costs launches, not work."""
    import cupy

    elements = max(reference.chunk_elements(cupy), cupy.cuda.runtime.memGetInfo()[0] // 16 // 8)
    return max(1, elements // max(1, width))


def nearest(X, centers):
    """reference.nearest(X, centers, cupy)'s labels and squared distances (float64) for a CuPy
    array X in any float dtype."""
    import cupy

    centers = cupy.asarray(centers, dtype=cupy.float64)
    labels, best = cupy.empty(X.shape[0], dtype=cupy.int64), cupy.empty(X.shape[0], dtype=cupy.float64)
    step = rows_per_chunk(max(centers.shape[0], X.shape[1]))
    for first in range(0, X.shape[0], step):
        part = slice(first, first + step)
        points = X[part].astype(cupy.float64)
        if points.shape[1] < reference.EXPANDED_FROM_DIM or centers.shape[0] < 2:
            labels[part], best[part] = reference._nearest_chunk(points, centers, cupy, cupy.float64)
        else:
            labels[part], best[part] = _chunk(points, centers)
    return labels, best


def _chunk(points, centers):
    """One chunk by reference._nearest_chunk's rule, the expanded form's winner and gap taken by
    one kernel from the product (the same sums, in the same order, as reference._expanded)."""
    import cupy

    rows, k = points.shape[0], centers.shape[0]
    middle = centers.mean(axis=0)
    shifted, moved = points - middle, centers - middle
    products = shifted @ moved.T
    point_squares = (shifted * shifted).sum(axis=1)
    centre_squares = (moved * moved).sum(axis=1)
    found = cupy.empty(rows, dtype=cupy.int64)
    winner, gap = cupy.empty(rows, dtype=cupy.float64), cupy.empty(rows, dtype=cupy.float64)
    blocks = (rows + _WARPS_PER_BLOCK - 1) // _WARPS_PER_BLOCK
    _kernel()((blocks,), (32 * _WARPS_PER_BLOCK,),
              (products, point_squares, centre_squares, np.int64(rows), np.int32(k), found, winner, gap))
    del products
    return reference.settle(points, centers, found, gap, cupy.sqrt(point_squares), cupy.sqrt(centre_squares.max()),
                            cupy, cupy.float64)
