// kmbench-gpu, low dimensions (DIM from 1 to 32, fixed when the adapter compiles the module).
//
// Points are stored row-major (n x DIM float32) after the adapter has subtracted the data's
// float32 mean (exactly, since the mean is a float32 number near the data), so coordinates
// are of the order of the spread wherever the data sit. Every sum that crosses blocks is
// float64. Labels and a changed counter are kept for the tolerance rule. Ties go to the
// lower index (strict <), as in the oracle; an empty cluster keeps its centroid.
//
// Two assignment kernels, one per regime (NOTES.md has the counts and the crossover):
// - small_k (k <= SMALL_K, DIM <= SMALL_DIM): direct distances from centroids in shared
//   memory, then per cluster one warp-wide shuffle sum of the members' coordinates, added by
//   lane 0 into the warp's own float64 accumulators in shared memory; one pass over the data.
// - tiled (any k): centroids staged in shared tiles of TILE, POINTS per thread share each
//   shared load. With DIRECT, the distance |x - c|^2 (DIM subtractions and DIM FMAs per
//   (point, cluster)); else the score |c|^2/2 - x.c from tiles of (c, |c|^2 / 2) (DIM FMAs).
//   The score rounds at the size of |x||c|, the distance at the size of |x - c|^2: on small
//   clusters far from the data's mean (the radial tree) the score cannot tell apart the
//   nearest centroids of a point in seven of every hundred, and the run's inertia drifts.
//   With PRUNE, each block first lists the centroids that can be nearest to some point of
//   its group (list_candidates, lowd_prune.cuh) and scans only those: a point's own centroids where the data
//   come clustered or sorted (the radial tree), every centroid where they do not.
//   Then the update: a warp whose points all chose one cluster adds one shuffle sum;
//   otherwise each point adds itself, float64 atomics spread over k clusters.
// finish turns the sums into centroids and clears them for the next iteration.

#ifndef DIM
#define DIM 2
#endif
#ifndef POINTS
#define POINTS 4
#endif
#ifndef DIRECT
#define DIRECT 1
#endif
#ifndef PRUNE
#define PRUNE 1
#endif
#if !DIRECT  // the pruning's rounding argument holds for distances, not for the expanded score
#undef PRUNE
#define PRUNE 0
#endif
#define SMALL_K 32
#define SMALL_DIM 8
#define TILE 128
#define BLOCK 256
#define WARPS (BLOCK / 32)
#define ROW (DIM + 1)  // a cluster's accumulator: DIM sums, then the count
#define LIST 2048       // candidates a block lists; past it the block scans every centroid
#ifndef BLOCK_SUMS
#define BLOCK_SUMS 64   // the first listed centroids' sums are gathered on chip, added once a group
#endif
// A computed distance (DIM subtractions, DIM FMAs, each rounded once, all terms >= 0) is
// within a factor (1 +- GAMMA) of the exact one; the box distances below likewise.
#define GAMMA ((DIM + 3) * 5.9604645e-8f)

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Records the new label and counts a change; labels == nullptr skips this (iterations rule).
__device__ __forceinline__ unsigned note_label(int* __restrict__ labels, long long i, int best) {
  if (labels == nullptr) return 0u;
  const int old = labels[i];
  if (old != best) labels[i] = best;
  return old != best;
}

__device__ __forceinline__ void add_changes(unsigned long long* changed, unsigned mine) {
  const unsigned warp_changes = __reduce_add_sync(0xffffffffu, mine);
  if ((threadIdx.x & 31) == 0 && warp_changes) atomicAdd(changed, (unsigned long long)warp_changes);
}

extern "C" __global__ void __launch_bounds__(BLOCK) small_k(
    const float* __restrict__ x, long long n, const float* __restrict__ centroids, int k,
    double* __restrict__ sums, int* __restrict__ labels, unsigned long long* __restrict__ changed) {
#if DIM <= SMALL_DIM
  __shared__ float c_s[SMALL_K * DIM];
  __shared__ double acc[WARPS][SMALL_K][ROW];
  for (int t = threadIdx.x; t < k * DIM; t += BLOCK) c_s[t] = centroids[t];
  for (int t = threadIdx.x; t < WARPS * SMALL_K * ROW; t += BLOCK) (&acc[0][0][0])[t] = 0.0;
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long stride = (long long)gridDim.x * BLOCK;
  unsigned changes = 0;
  // The loop bound is uniform across the block, so every warp shuffle sees 32 lanes.
  for (long long base = (long long)blockIdx.x * BLOCK; base < n; base += stride) {
    const long long i = base + threadIdx.x;
    const bool active = i < n;
    float p[DIM];
#pragma unroll
    for (int j = 0; j < DIM; ++j) p[j] = active ? x[i * DIM + j] : 0.0f;
    int best = 0;
    float best_distance = 3.402823466e+38f;
    for (int c = 0; c < k; ++c) {
      float distance = 0.0f;
#pragma unroll
      for (int j = 0; j < DIM; ++j) {
        const float diff = p[j] - c_s[c * DIM + j];
        distance = fmaf(diff, diff, distance);
      }
      if (distance < best_distance) {
        best_distance = distance;
        best = c;
      }
    }
    if (active) changes += note_label(labels, i, best);
    for (int c = 0; c < k; ++c) {
      const unsigned members = __ballot_sync(0xffffffffu, active && best == c);
      if (members == 0u) continue;  // uniform across the warp
      const bool mine = active && best == c;
#pragma unroll
      for (int j = 0; j < DIM; ++j) {
        const float total = warp_sum(mine ? p[j] : 0.0f);
        if (lane == 0) acc[warp][c][j] += (double)total;
      }
      if (lane == 0) acc[warp][c][DIM] += (double)__popc(members);
    }
  }
  add_changes(changed, changes);
  __syncthreads();
  for (int t = threadIdx.x; t < k * ROW; t += BLOCK) {
    double total = 0.0;
    for (int w = 0; w < WARPS; ++w) total += (&acc[w][0][0])[t];
    if (total != 0.0) atomicAdd(&sums[t], total);
  }
#endif
}

#include "lowd_prune.cuh"

extern "C" __global__ void __launch_bounds__(BLOCK) tiled(
    const float* __restrict__ x, long long n, const float* __restrict__ centroids,
    const float* __restrict__ half_norms, int k, double* __restrict__ sums,
    int* __restrict__ labels, unsigned long long* __restrict__ changed) {
  __shared__ float c_s[TILE * DIM];
#if !DIRECT
  __shared__ float h_s[TILE];
#endif
#if PRUNE
  __shared__ int list_s[LIST];
  __shared__ float box_s[WARPS + 1][2 * DIM];  // each warp's box, then the block's
  __shared__ float bound_s[WARPS];
  __shared__ int counts_s[2][WARPS];
  __shared__ double block_sums[BLOCK_SUMS > 0 ? BLOCK_SUMS : 1][ROW];
#endif
  const int lane = threadIdx.x & 31;
  const long long stride = (long long)gridDim.x * BLOCK * POINTS;
  unsigned changes = 0;
  for (long long base = (long long)blockIdx.x * BLOCK * POINTS; base < n; base += stride) {
    float p[POINTS][DIM], best_score[POINTS];
    int best[POINTS];
#pragma unroll
    for (int q = 0; q < POINTS; ++q) {
      const long long i = base + (long long)q * BLOCK + threadIdx.x;
#pragma unroll
      for (int j = 0; j < DIM; ++j) p[q][j] = i < n ? x[i * DIM + j] : 0.0f;
      best_score[q] = 3.402823466e+38f;
      best[q] = 0;
    }
    // The centroids scanned: positions 0 .. scanned - 1 of the list, or every centroid.
    int scanned = k;
#if PRUNE
    const int listed = list_candidates(p, base, n, centroids, k, list_s, box_s, bound_s, counts_s);
    if (listed >= 0) scanned = listed;
    // Positions below `held` are summed in block_sums: on clustered data a group's points
    // choose among a few dozen centroids, and k-wide float64 atomics on those few addresses
    // in global memory cost more than the whole pruned scan. Zeroed here; the tile loop's
    // first barrier orders this before any add.
    const int held = min(listed, BLOCK_SUMS);  // 0 where nothing is listed
    for (int t = threadIdx.x; t < held * ROW; t += BLOCK) (&block_sums[0][0])[t] = 0.0;
#define CENTROID(position) (listed >= 0 ? list_s[position] : (position))
#define ADD(label, position, j, value)                                                   \
  ((position) < held ? atomicAdd(&block_sums[position][j], (value))                      \
                     : atomicAdd(&sums[(long long)(label) * ROW + (j)], (value)))
#else
#define CENTROID(position) (position)
#define ADD(label, position, j, value) atomicAdd(&sums[(long long)(label) * ROW + (j)], (value))
#endif
    for (int first = 0; first < scanned; first += TILE) {
      const int count = min(TILE, scanned - first);
      __syncthreads();  // the previous tile is no longer read
      for (int t = threadIdx.x; t < count * DIM; t += BLOCK)
        c_s[t] = centroids[(long long)CENTROID(first + t / DIM) * DIM + t % DIM];
#if !DIRECT
      for (int t = threadIdx.x; t < count; t += BLOCK) h_s[t] = half_norms[CENTROID(first + t)];
#endif
      __syncthreads();
      for (int t = 0; t < count; ++t) {
        float c[DIM];
#pragma unroll
        for (int j = 0; j < DIM; ++j) c[j] = c_s[t * DIM + j];
#pragma unroll
        for (int q = 0; q < POINTS; ++q) {
#if DIRECT
          float score = 0.0f;
#pragma unroll
          for (int j = 0; j < DIM; ++j) {
            const float diff = p[q][j] - c[j];
            score = fmaf(diff, diff, score);
          }
#else
          float score = h_s[t];
#pragma unroll
          for (int j = 0; j < DIM; ++j) score = fmaf(-p[q][j], c[j], score);
#endif
          if (score < best_score[q]) {  // strict: ties go to the lower index (the list is in order)
            best_score[q] = score;
            best[q] = first + t;
          }
        }
      }
    }
    int position[POINTS];  // in the list (or the centroid itself where nothing is listed)
#pragma unroll
    for (int q = 0; q < POINTS; ++q) {
      position[q] = best[q];
      best[q] = CENTROID(best[q]);
    }
#undef CENTROID
#pragma unroll
    for (int q = 0; q < POINTS; ++q) {
      const long long i = base + (long long)q * BLOCK + threadIdx.x;
      const bool active = i < n;
      if (active) changes += note_label(labels, i, best[q]);
      // Sorted or clustered data: often a whole warp chose one cluster; then one sum.
      const int lead = __shfl_sync(0xffffffffu, best[q], 0);
      const int lead_position = __shfl_sync(0xffffffffu, position[q], 0);
      const unsigned all_active = __ballot_sync(0xffffffffu, active);
      if (__all_sync(0xffffffffu, !active || best[q] == lead)) {
#pragma unroll
        for (int j = 0; j < DIM; ++j) {
          const float total = warp_sum(active ? p[q][j] : 0.0f);
          if (lane == 0) ADD(lead, lead_position, j, (double)total);
        }
        if (lane == 0 && all_active) ADD(lead, lead_position, DIM, (double)__popc(all_active));
      } else if (active) {
#pragma unroll
        for (int j = 0; j < DIM; ++j) ADD(best[q], position[q], j, (double)p[q][j]);
        ADD(best[q], position[q], DIM, 1.0);
      }
    }
#undef ADD
#if PRUNE
    __syncthreads();  // every add of the group is in block_sums
    for (int t = threadIdx.x; t < held * ROW; t += BLOCK) {
      const double total = (&block_sums[0][0])[t];
      if (total != 0.0) atomicAdd(&sums[(long long)list_s[t / ROW] * ROW + t % ROW], total);
    }
#endif
  }
  add_changes(changed, changes);
}

// centroid = sum / count where the cluster has points (float64, then its float32 copy and
// |c|^2 / 2 for the tiled kernel); the sums are cleared for the next iteration.
extern "C" __global__ void finish(double* __restrict__ sums, float* __restrict__ centroids,
                                  double* __restrict__ centroids64, float* __restrict__ half_norms, int k) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= k) return;
  const double count = sums[(long long)c * ROW + DIM];
  float norm = 0.0f;
  for (int j = 0; j < DIM; ++j) {
    const long long slot = (long long)c * DIM + j;
    if (count > 0.0) {
      const double mean = sums[(long long)c * ROW + j] / count;
      centroids64[slot] = mean;
      centroids[slot] = (float)mean;
    }
    norm = fmaf(centroids[slot], centroids[slot], norm);
    sums[(long long)c * ROW + j] = 0.0;
  }
  sums[(long long)c * ROW + DIM] = 0.0;
  half_norms[c] = 0.5f * norm;
}
