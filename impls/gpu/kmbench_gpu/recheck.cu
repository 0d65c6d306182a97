// kmbench-gpu's tensor-core path: the FP32 re-check of the points the TF32 pass could not
// certify, against their candidates only: the centroids whose TF32 score is within the point's
// limit (bound.py shows the exact winner is one). The TF32 pass leaves what says which they are,
// so the re-check is a handful of FP32 dot products per point, not a scan of every centroid
// tile: one warp per point.
//   candidate_recheck  where the pass packs its scores (rows on chip, d <= 128, or a Hopper
//                      pass): it listed each point's candidates from its (row, column slot) best
//                      two (tensor_kernels.py, hopper_common.cuh): a centroid, or (-1 - slot) a
//                      whole column of the tiles where the slot's runner-up was within the limit too.
//                      A warp's lanes split into groups, each scoring a different candidate
//                      (NOTES.md, "The candidate re-check in groups of lanes");
//   tile_recheck       where Triton's pass streams rows (d > 128): it kept every point's best,
//                      runner-up and winner of every tile; a listed point's candidates are the
//                      tiles' winners within its limit, or the whole tile where its runner-up is.
//                      A point with more than whole_most whole tiles (the path passes 0) is
//                      passed on to a list for exact_assign, whose blocks of points share each
//                      tile's loads: one warp reading whole tiles for one point is bound by L2
//                      (crowded centroids, 300k x 408, k = 5,000: 59.7 against 20.0 ms an iteration).
// The lists' lengths are read on the device (the launches sit in the run's CUDA graph).

#define FULL_MASK 0xffffffffu

struct Winner {
  float score = __int_as_float(0x7f800000);  // +inf
  int label = 0;
  int order = 0x7fffffff;  // the label's index in the harness's numbering
};

// A group of `lanes` lanes (a power of two, the warp split into 32 / lanes groups; `mask` its
// lanes) scores centroid j: each lane adds VEC coordinates at a time, the group's butterfly adds
// the same two numbers in every pair of lanes at each step, so all its lanes hold the same score.
template <int VEC>
__device__ __forceinline__ float group_score(const float* __restrict__ point, const float* __restrict__ centroids,
                                             const float* __restrict__ half_norms, int d, int j, int lanes,
                                             int member, unsigned mask) {
  const float* centroid = centroids + (long long)j * d;
  const float half_norm = half_norms[j];  // issued before the products, not after them
  float dot = 0.0f;
  for (int dim = member * VEC; dim < d; dim += lanes * VEC) {
    if constexpr (VEC == 4) {
      const float4 p = *reinterpret_cast<const float4*>(point + dim);
      const float4 c = *reinterpret_cast<const float4*>(centroid + dim);
      dot = fmaf(p.x, c.x, dot);
      dot = fmaf(p.y, c.y, dot);
      dot = fmaf(p.z, c.z, dot);
      dot = fmaf(p.w, c.w, dot);
    } else {
      dot = fmaf(point[dim], centroid[dim], dot);
    }
  }
  for (int offset = lanes / 2; offset > 0; offset >>= 1) dot += __shfl_xor_sync(mask, dot, offset);
  return half_norm - dot;
}

// h_j - x . c_j in FP32 by the whole warp (tile_recheck), every lane holding the same value.
__device__ __forceinline__ float fp32_score(const float* __restrict__ point, const float* __restrict__ centroids,
                                            const float* __restrict__ half_norms, int d, int j) {
  return group_score<1>(point, centroids, half_norms, d, j, 32, threadIdx.x & 31, FULL_MASK);
}

// Equal FP32 scores go to the lowest index in the harness's numbering (order_of), as in the
// oracle and in exact_assign, whatever order the path keeps its centroids in.
__device__ __forceinline__ void consider(Winner& winner, float score, int j, const int* __restrict__ order_of) {
  const int order = order_of[j];
  if (score < winner.score || (score == winner.score && order < winner.order)) {
    winner.score = score;
    winner.label = j;
    winner.order = order;
  }
}

__device__ __forceinline__ void consider_all(Winner& winner, const float* __restrict__ point,
                                             const float* __restrict__ centroids, const float* __restrict__ half_norms,
                                             const int* __restrict__ order_of, int d, int first, int step, int last) {
  for (int j = first; j < last; j += step) consider(winner, fp32_score(point, centroids, half_norms, d, j), j, order_of);
}

// One warp per listed point. Why groups (NOTES.md): one candidate at a time, a warp waited on the
// candidate's index, then its centroid, then five shuffles, about 35 instructions a candidate
// (116 us for 122k points at 1e6 x 64); 32 / lanes candidates in flight at once share them.
// Each group keeps its own winner; the winners meet at the end by (score, harness index), a
// total order, so the label is the one a single pass over the candidates would give.
template <int VEC>
__device__ __forceinline__ void recheck_rows(const float* __restrict__ x, int d, const float* __restrict__ centroids,
                                             const float* __restrict__ half_norms, const int* __restrict__ order_of,
                                             int k, int block_n, const int* __restrict__ rows,
                                             const int* __restrict__ sizes, const int* __restrict__ candidates,
                                             int per_row, unsigned int count, int lanes, int* __restrict__ labels) {
  const unsigned int warps = (gridDim.x * blockDim.x) >> 5;
  const int lane = threadIdx.x & 31, groups = 32 / lanes, group = lane / lanes, member = lane % lanes;
  const unsigned mask = lanes == 32 ? FULL_MASK : ((1u << lanes) - 1) << (group * lanes);
  for (unsigned int i = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; i < count; i += warps) {
    const long long row = rows[i];
    const float* point = x + row * d;
    const int* list = candidates + (long long)i * per_row;
    const int size = sizes[i];
    Winner winner;
    for (int base = 0; base < size; base += 32) {
      // The list's entries come in one load, lane c holding entry base + c.
      const int entry = base + lane < size ? list[base + lane] : k;
      const int here = min(32, size - base);
      // Single centroids: group g takes entries g, g + groups, ...
      for (int c = group; c < here + group; c += groups) {  // the same trips in every group
        const int j = __shfl_sync(FULL_MASK, entry, c < here ? c : 0);
        // j < k holds wherever scores stay far below the packed sentinel (bound.packable); the
        // streamed path does not check its chunks for that yet, so guard the reads here.
        if (c < here && j >= 0 && j < k)
          consider(winner, group_score<VEC>(point, centroids, half_norms, d, j, lanes, member, mask), j, order_of);
      }
      // Columns: slot s holds centroids s, s + block_n, ...; the groups take turns along it.
      unsigned int columns = __ballot_sync(FULL_MASK, entry < 0);
      while (columns) {
        const int from = __ffs(columns) - 1;
        columns &= columns - 1;
        const int slot = -1 - __shfl_sync(FULL_MASK, entry, from);
        for (int j = slot + group * block_n; j < k; j += groups * block_n)
          consider(winner, group_score<VEC>(point, centroids, half_norms, d, j, lanes, member, mask), j, order_of);
        __syncwarp();
      }
    }
    for (int offset = lanes; offset < 32; offset <<= 1) {  // the groups' winners
      const float score = __shfl_xor_sync(FULL_MASK, winner.score, offset);
      const int label = __shfl_xor_sync(FULL_MASK, winner.label, offset);
      const int order = __shfl_xor_sync(FULL_MASK, winner.order, offset);
      if (score < winner.score || (score == winner.score && order < winner.order)) {
        winner.score = score;
        winner.label = label;
        winner.order = order;
      }
    }
    if (lane == 0) labels[row] = winner.label;
  }
}

// vec4: d a multiple of 4 and x, centroids 16-byte aligned (16-byte loads); lanes: a power of two
// from 8 to 32 (tensor_settings.recheck_lanes). Six blocks an SM, launched in one wave
// (recheck.RECHECK_BLOCKS_PER_SM): each warp walks a fixed share of the list, and with 1,056
// blocks of 48 registers a second wave started a third of the shares late.
extern "C" __global__ void __launch_bounds__(256, 6) candidate_recheck(const float* __restrict__ x, int d, const float* __restrict__ centroids,
                                             const float* __restrict__ half_norms, const int* __restrict__ order_of,
                                             int k, int block_n, const int* __restrict__ rows,
                                             const int* __restrict__ sizes, const int* __restrict__ candidates,
                                             int per_row, const unsigned int* __restrict__ listed_count,
                                             int lanes, int vec4, int* __restrict__ labels) {
  const unsigned int count = *listed_count;
  if (vec4)
    recheck_rows<4>(x, d, centroids, half_norms, order_of, k, block_n, rows, sizes, candidates, per_row, count, lanes,
                    labels);
  else
    recheck_rows<1>(x, d, centroids, half_norms, order_of, k, block_n, rows, sizes, candidates, per_row, count, lanes,
                    labels);
}

// tile_best, tile_second, tile_labels: tile-major, tiles x n. Lane t looks at tile t (and t + 32,
// ...); the tiles in play are taken one at a time through a ballot.
extern "C" __global__ void tile_recheck(const float* __restrict__ x, int d, long long n,
                                        const float* __restrict__ centroids, const float* __restrict__ half_norms,
                                        const int* __restrict__ order_of, int k, int block_n,
                                        const float* __restrict__ tile_best, const float* __restrict__ tile_second,
                                        const int* __restrict__ tile_labels, const int* __restrict__ flagged,
                                        const float* __restrict__ limits, const unsigned int* __restrict__ flagged_count,
                                        int* __restrict__ labels, int whole_most, int* __restrict__ passed,
                                        float* __restrict__ passed_limits, unsigned int* __restrict__ passed_count) {
  const unsigned int count = *flagged_count;
  const unsigned int warps = (gridDim.x * blockDim.x) >> 5;
  const int lane = threadIdx.x & 31;
  const int tiles = (k + block_n - 1) / block_n;
  for (unsigned int i = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; i < count; i += warps) {
    const long long row = flagged[i];
    const float limit = limits[i];
    const float* point = x + row * d;
    int wholes = 0;  // tiles this point would score whole
    for (int tile = lane; tile < tiles; tile += 32) {
      const long long at = (long long)tile * n + row;
      wholes += tile_best[at] <= limit && tile_second[at] <= limit;
    }
    for (int offset = 16; offset > 0; offset >>= 1) wholes += __shfl_xor_sync(FULL_MASK, wholes, offset);
    if (wholes > whole_most) {  // uniform across the warp: every lane holds the same sum
      if (lane == 0) {
        const unsigned int place = atomicAdd(passed_count, 1u);
        passed[place] = (int)row;
        passed_limits[place] = limit;
      }
      continue;
    }
    Winner winner;
    for (int base = 0; base < tiles; base += 32) {
      const int tile = base + lane;
      const long long at = (long long)tile * n + row;
      const bool near = tile < tiles && tile_best[at] <= limit;
      const bool whole = near && tile_second[at] <= limit;  // a third of this tile may be in play
      const int single = near ? tile_labels[at] : 0;
      unsigned int pending = __ballot_sync(FULL_MASK, near);
      while (pending) {
        const int from = __ffs(pending) - 1;
        pending &= pending - 1;
        const int first = (base + from) * block_n;
        if (__shfl_sync(FULL_MASK, (int)whole, from))
          consider_all(winner, point, centroids, half_norms, order_of, d, first, 1, min(first + block_n, k));
        else {
          const int j = __shfl_sync(FULL_MASK, single, from);
          consider(winner, fp32_score(point, centroids, half_norms, d, j), j, order_of);
        }
      }
    }
    if (lane == 0) labels[row] = winner.label;
  }
}
