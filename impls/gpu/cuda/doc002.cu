// cuda-002: the design of document 002 in double precision, our own code.
//
// As in the document: points as a struct of arrays (x[], y[]) of doubles, one point per
// thread, each block reducing its points' sums and counts per cluster into block partials,
// two further reduction passes that bring the partials down to one row, an update kernel,
// and a changed counter (the document's convergence flag, counted so a tolerance can use it).
//
// Where we differ, and why:
// - The grid is bounded (a few blocks per multiprocessor) and each thread strides over the
//   points, one point per step. The document launched n / BLOCK blocks and kept n / BLOCK x k
//   partials: 3.9 GB at n = 1e8, k = 1000, and a second pass limited to 1024 blocks.
// - A block accumulates its partials in shared memory (warp sums first for small k), not
//   with k tree reductions of log2(BLOCK) barriers each, which cost seconds per iteration at
//   k = 1000. Above SHARED_MAX_K clusters the partials are accumulated in global memory.
// - Every loop over clusters strides by the block, so any k works (the document's update ran
//   <<<1, k>>>, which fails past 1024 clusters); counts are 64-bit and indices too.
// - An empty cluster keeps its centroid; ties go to the lower index (strict <).

#include "common.cuh"

#define SHARED_MAX_K 1024  // 1024 x (8 + 8 + 8) bytes = 24 KiB of shared accumulators
#define WARP_REDUCE_MAX_K 32

__device__ __forceinline__ double warp_sum(double v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ unsigned long long warp_sum(unsigned long long v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

// Assign every point (grid-stride, one point per thread per step), count label changes, and
// write this block's per-cluster sums and counts to row blockIdx.x of the partials.
extern "C" __global__ void assign_reduce(const double* __restrict__ x, const double* __restrict__ y,
                                         long long n, const double* __restrict__ cx,
                                         const double* __restrict__ cy, int k,
                                         int* __restrict__ membership, double* __restrict__ part_x,
                                         double* __restrict__ part_y,
                                         unsigned long long* __restrict__ part_count,
                                         unsigned long long* __restrict__ changed) {
  extern __shared__ double shared[];  // sx[k], sy[k], sc[k] when k <= SHARED_MAX_K
  const bool in_shared = k <= SHARED_MAX_K;
  double* sx = shared;
  double* sy = shared + k;
  unsigned long long* sc = reinterpret_cast<unsigned long long*>(shared + 2 * k);
  double* row_x = part_x + (long long)blockIdx.x * k;
  double* row_y = part_y + (long long)blockIdx.x * k;
  unsigned long long* row_c = part_count + (long long)blockIdx.x * k;
  if (in_shared) {
    for (int c = threadIdx.x; c < k; c += blockDim.x) {
      sx[c] = 0.0;
      sy[c] = 0.0;
      sc[c] = 0ull;
    }
  }
  __syncthreads();
  const long long stride = (long long)gridDim.x * blockDim.x;
  // Every thread runs the same number of steps, so the warp shuffles below see full warps.
  const long long steps = (n + stride - 1) / stride;
  unsigned long long my_changes = 0;
  for (long long step = 0; step < steps; ++step) {
    const long long i = step * stride + (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const bool active = i < n;
    double px = 0.0, py = 0.0;
    int best = -1;
    if (active) {
      px = x[i];
      py = y[i];
      best = nearest_centroid(px, py, cx, cy, k);
      if (membership[i] != best) {
        ++my_changes;
        membership[i] = best;
      }
    }
    if (k <= WARP_REDUCE_MAX_K) {
      // Few clusters: a warp sums each cluster's members with shuffles, one lane adds.
      const int lane = threadIdx.x & 31;
      for (int c = 0; c < k; ++c) {
        const bool mine = best == c;
        const unsigned members = __ballot_sync(0xffffffffu, mine);
        if (members == 0u) continue;  // uniform across the warp
        const double wx = warp_sum(mine ? px : 0.0);
        const double wy = warp_sum(mine ? py : 0.0);
        if (lane == 0) {
          atomicAdd(&sx[c], wx);
          atomicAdd(&sy[c], wy);
          atomicAdd(&sc[c], (unsigned long long)__popc(members));
        }
      }
    } else if (active) {
      if (in_shared) {
        atomicAdd(&sx[best], px);
        atomicAdd(&sy[best], py);
        atomicAdd(&sc[best], 1ull);
      } else {
        atomicAdd(&row_x[best], px);
        atomicAdd(&row_y[best], py);
        atomicAdd(&row_c[best], 1ull);
      }
    }
  }
  const unsigned long long warp_changes = warp_sum(my_changes);
  if ((threadIdx.x & 31) == 0 && warp_changes) atomicAdd(changed, warp_changes);
  __syncthreads();
  if (in_shared) {
    for (int c = threadIdx.x; c < k; c += blockDim.x) {
      row_x[c] = sx[c];
      row_y[c] = sy[c];
      row_c[c] = sc[c];
    }
  }
}

// One reduction pass: output row b sums input rows [b * group, (b + 1) * group) for every
// cluster. The document's two passes are this kernel launched twice.
extern "C" __global__ void reduce_partials(const double* __restrict__ in_x, const double* __restrict__ in_y,
                                           const unsigned long long* __restrict__ in_count, int rows,
                                           int group, int k, double* __restrict__ out_x,
                                           double* __restrict__ out_y,
                                           unsigned long long* __restrict__ out_count) {
  const int first = blockIdx.x * group;
  const int last = min(rows, first + group);
  for (int c = threadIdx.x; c < k; c += blockDim.x) {
    double ax = 0.0, ay = 0.0;
    unsigned long long ac = 0ull;
    for (int r = first; r < last; ++r) {
      const long long slot = (long long)r * k + c;
      ax += in_x[slot];
      ay += in_y[slot];
      ac += in_count[slot];
    }
    const long long out = (long long)blockIdx.x * k + c;
    out_x[out] = ax;
    out_y[out] = ay;
    out_count[out] = ac;
  }
}

// New centroids from the single reduced row; an empty cluster keeps its centroid.
extern "C" __global__ void update_centroids(double* __restrict__ cx, double* __restrict__ cy,
                                            const double* __restrict__ sum_x,
                                            const double* __restrict__ sum_y,
                                            const unsigned long long* __restrict__ count, int k) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c < k && count[c] > 0ull) {
    cx[c] = sum_x[c] / (double)count[c];
    cy[c] = sum_y[c] / (double)count[c];
  }
}
