"""The judge's own CUDA kernels (no row's): the two nearest centroids of each point, either
scored in float64 from the coordinates (low d), or picked from a float32 score matrix that
CuPy's matrix product made (high d). Each reads its input once; what they compute is bounded
in NOTES.md ("The judge's own scan")."""

from __future__ import annotations

import numpy as np

FUSED_TILE = 256  # centroids per shared-memory tile (and threads per block)
WARPS_PER_BLOCK = 8  # rows per block of the score kernel: a warp each

# Each thread one point: float64 squared distances to every centroid, the smallest with its
# lowest index and the second smallest. Only where d is small enough that a matrix product
# would spend its time writing n x k scores.
FUSED_SOURCE = r"""
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

# One warp per row of products x'.c' (float32, rows x k): the scores |c'|^2 - 2 x'.c' as float32
# computes them (the product times two is exact, the difference rounds once), and of each row
# the smallest with its lowest index and the second smallest, in one read of the row.
SCORED_SOURCE = r"""
extern "C" __global__ void best_two_scores(const float* products, long long rows, int k, const float* half,
                                           double* d1, double* d2, int* best) {
  long long row = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
  int lane = threadIdx.x & 31;
  if (row >= rows) return;  // the whole warp leaves together: it shares the row
  const float* p = products + row * (long long)k;
  float first = 1.0f / 0.0f, second = 1.0f / 0.0f;
  int index = lane;  // a row of no finite score keeps a real column (the caller scores it again)
  for (int j = lane; j < k; j += 32) {
    float s = __fsub_rn(half[j], 2.0f * p[j]);
    if (s < first) { second = first; first = s; index = j; }
    else if (s < second) second = s;
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    float other_first = __shfl_xor_sync(0xffffffffu, first, offset);
    float other_second = __shfl_xor_sync(0xffffffffu, second, offset);
    int other_index = __shfl_xor_sync(0xffffffffu, index, offset);
    if (other_first < first || (other_first == first && other_index < index)) {
      second = fminf(first, other_second);
      first = other_first;
      index = other_index;
    } else {
      second = fminf(second, other_first);
    }
  }
  if (lane == 0) { d1[row] = first; d2[row] = second; best[row] = index; }
}
"""


def fused_best_two(x, c_centred, mean, xp):
    """(d1, d2, nearest) from the fused float64 kernel (x: float64 points, c_centred: the
    centroids less the data's mean)."""
    kernel = xp.RawKernel(FUSED_SOURCE, "best_two")
    n, d = x.shape
    k = c_centred.shape[0]
    d1, d2 = xp.empty(n, xp.float64), xp.empty(n, xp.float64)
    best = xp.empty(n, xp.int32)
    blocks = (n + FUSED_TILE - 1) // FUSED_TILE
    kernel((blocks,), (FUSED_TILE,), (xp.ascontiguousarray(x), np.int64(n), np.int32(d),
                                      xp.ascontiguousarray(c_centred), np.int32(k), mean, d1, d2, best),
           shared_mem=FUSED_TILE * d * 8)
    return d1, d2, best


def scored_best_two(products, half, xp):
    """(d1, d2, nearest) of the float32 scores |c'|^2 - 2 x'.c' from products (rows x k)."""
    kernel = xp.RawKernel(SCORED_SOURCE, "best_two_scores")
    rows, k = products.shape
    d1, d2 = xp.empty(rows, xp.float64), xp.empty(rows, xp.float64)
    best = xp.empty(rows, xp.int32)
    threads = 32 * WARPS_PER_BLOCK
    blocks = (rows + WARPS_PER_BLOCK - 1) // WARPS_PER_BLOCK
    kernel((blocks,), (threads,), (xp.ascontiguousarray(products, dtype=xp.float32), np.int64(rows), np.int32(k),
                                   xp.ascontiguousarray(half, dtype=xp.float32), d1, d2, best))
    return d1, d2, best
