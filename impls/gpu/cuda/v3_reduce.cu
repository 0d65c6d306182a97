// cuda-v3 (document 000, "Our CUDA (3)"): no atomics. A "fine" kernel assigns each point
// and reduces, per block and per cluster, the members' x, y and count; a "coarse" kernel,
// one block per cluster, tree-reduces that cluster's partials over every block (any
// block count) and writes the new mean, or keeps the old one for an empty cluster.
//
// The fine reduction: each thread holds POINTS_PER_THREAD points and their labels in
// registers. For each cluster a lane first sums its own members, then a shuffle tree
// reduces the warp, then one thread per cluster adds the warps' partials, which go to
// global memory as partial[cluster * blocks + block]. Clusters are handled in tiles of
// CLUSTER_TILE, so shared memory does not grow with k beyond the staged means, and any k
// up to the means' limit works at any block size (1..1024). See NOTES.md for the counts.
#include "common.cuh"

#define CLUSTER_TILE 32
#define MAX_WARPS 32
#define COARSE_THREADS 1024
#ifndef POINTS_PER_THREAD
#define POINTS_PER_THREAD 8
#endif
// The largest block this build is launched with; the register budget follows from it
// (64 per thread at 1024 threads). The adapter keeps it consistent with the points.
#ifndef FINE_MAX_THREADS
#define FINE_MAX_THREADS 1024
#endif

extern "C" __global__ void __launch_bounds__(FINE_MAX_THREADS) fine_reduce(const float* __restrict__ x, const float* __restrict__ y, int n,
                                       const float* __restrict__ means_x,
                                       const float* __restrict__ means_y, int k,
                                       float* __restrict__ partial_x, float* __restrict__ partial_y,
                                       int* __restrict__ partial_count) {
  extern __shared__ float shared_means[];
  __shared__ float warp_x[MAX_WARPS][CLUSTER_TILE];
  __shared__ float warp_y[MAX_WARPS][CLUSTER_TILE];
  __shared__ int warp_count[MAX_WARPS][CLUSTER_TILE];
  float* shared_x = shared_means;
  float* shared_y = shared_means + k;
  stage_means(shared_x, shared_y, means_x, means_y, k);

  // Point p of this thread: consecutive threads read consecutive points (coalesced).
  // All loads are issued first; then clusters run in the outer loop so each staged mean is
  // read from shared memory once per thread, not once per point (NOTES.md, change 3).
  const long long first = (long long)blockIdx.x * blockDim.x * POINTS_PER_THREAD + threadIdx.x;
  float px[POINTS_PER_THREAD], py[POINTS_PER_THREAD], best[POINTS_PER_THREAD];
  int label[POINTS_PER_THREAD];
#pragma unroll
  for (int p = 0; p < POINTS_PER_THREAD; ++p) {
    const long long index = first + (long long)p * blockDim.x;
    const bool active = index < n;  // inactive threads stay for the barriers below
    px[p] = active ? x[index] : 0.0f;
    py[p] = active ? y[index] : 0.0f;
    best[p] = KMBENCH_FLT_MAX;
    label[p] = 0;
  }
  for (int c = 0; c < k; ++c) {
    const float mx = shared_x[c];
    const float my = shared_y[c];
#pragma unroll
    for (int p = 0; p < POINTS_PER_THREAD; ++p) {
      const float dx = px[p] - mx;
      const float dy = py[p] - my;
      const float distance = dx * dx + dy * dy;
      if (distance < best[p]) {  // strict: ties go to the lower index, as in the oracle
        best[p] = distance;
        label[p] = c;
      }
    }
  }
#pragma unroll
  for (int p = 0; p < POINTS_PER_THREAD; ++p)
    if (first + (long long)p * blockDim.x >= n) label[p] = -1;

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  // The last warp may be partial when blockDim.x is not a multiple of 32.
  const int live = min(32, (int)blockDim.x - warp * 32);
  const unsigned mask = live == 32 ? 0xffffffffu : ((1u << live) - 1u);

  for (int base = 0; base < k; base += CLUSTER_TILE) {
    const int tile = min(CLUSTER_TILE, k - base);
    for (int t = 0; t < tile; ++t) {
      const int cluster = base + t;
      float sx = 0.0f, sy = 0.0f;
      int count = 0;
#pragma unroll
      for (int p = 0; p < POINTS_PER_THREAD; ++p) {
        const bool mine = label[p] == cluster;
        sx += mine ? px[p] : 0.0f;
        sy += mine ? py[p] : 0.0f;
        count += mine;
      }
      if (__ballot_sync(mask, count > 0)) {  // uniform: skip clusters the warp lacks
        for (int offset = 16; offset > 0; offset >>= 1) {
          const float ox = __shfl_down_sync(mask, sx, offset);
          const float oy = __shfl_down_sync(mask, sy, offset);
          const int oc = __shfl_down_sync(mask, count, offset);
          if (lane + offset < live) {
            sx += ox;
            sy += oy;
            count += oc;
          }
        }
      }
      if (lane == 0) {
        warp_x[warp][t] = sx;
        warp_y[warp][t] = sy;
        warp_count[warp][t] = count;
      }
    }
    __syncthreads();
    // Strided, not `if (threadIdx.x < tile)`: a block of fewer than CLUSTER_TILE threads
    // must still write every cluster of the tile.
    for (int t = threadIdx.x; t < tile; t += blockDim.x) {
      float bx = 0.0f, by = 0.0f;
      int bc = 0;
      for (int w = 0; w < warps; ++w) {
        bx += warp_x[w][t];
        by += warp_y[w][t];
        bc += warp_count[w][t];
      }
      const long long slot = (long long)(base + t) * gridDim.x + blockIdx.x;
      partial_x[slot] = bx;
      partial_y[slot] = by;
      partial_count[slot] = bc;
    }
    __syncthreads();  // the warp partials are reused by the next tile
  }
}

extern "C" __global__ void coarse_reduce(const float* __restrict__ partial_x,
                                         const float* __restrict__ partial_y,
                                         const int* __restrict__ partial_count, int blocks,
                                         float* __restrict__ means_x, float* __restrict__ means_y) {
  __shared__ float sum_x[COARSE_THREADS];
  __shared__ float sum_y[COARSE_THREADS];
  __shared__ int sum_count[COARSE_THREADS];
  const int cluster = blockIdx.x;
  const long long row = (long long)cluster * blocks;
  float ax = 0.0f, ay = 0.0f;
  int ac = 0;
  for (int b = threadIdx.x; b < blocks; b += COARSE_THREADS) {
    ax += partial_x[row + b];
    ay += partial_y[row + b];
    ac += partial_count[row + b];
  }
  sum_x[threadIdx.x] = ax;
  sum_y[threadIdx.x] = ay;
  sum_count[threadIdx.x] = ac;
  __syncthreads();
  for (int stride = COARSE_THREADS / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) {
      sum_x[threadIdx.x] += sum_x[threadIdx.x + stride];
      sum_y[threadIdx.x] += sum_y[threadIdx.x + stride];
      sum_count[threadIdx.x] += sum_count[threadIdx.x + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0 && sum_count[0] > 0) {
    means_x[cluster] = sum_x[0] / sum_count[0];
    means_y[cluster] = sum_y[0] / sum_count[0];
  }
}
