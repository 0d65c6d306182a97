// yinyang-gpu: exact Yinyang k-means (Ding et al., 2015) for any d. Compiled with -DDIM=d.
//
// Centroids are permuted so that each group is a contiguous range [group_start[g],
// group_start[g + 1]). Per point: upper[i] bounds the distance to its centroid from above,
// lower[i * groups + g] bounds from below the distance to every centroid of group g other
// than its own. All bounds are distances (not squares): the triangle inequality moves them by
// the centroids' drift. Every bound is stored with a margin (`slack`, on the squared distance,
// per point) that covers float32 rounding of the distance itself, so a filter only ever skips
// a centroid that exact arithmetic would also skip: the assignments are Lloyd's.
//
// Kernels, one iteration after the first:
//   filter      warp per point: shift the bounds by the drift, global filter; a point whose
//               upper bound exceeds its smallest lower bound is appended to `active`
//   examine     warp per active point: tighten the upper bound, then the group filter, and
//               exact distances to every centroid of each group that passes it
//   rows_bounds (instead of examine, when most points are active) warp per row of a GEMM
//               chunk of scores: the nearest centroid and every group's bound from scratch
//   tensor_bounds (instead of rows_bounds, d > 32 where Triton runs) every point's bounds
//               after kmbench-gpu's exact tensor-core assignment
//   move        warp per active point whose label changed: its coordinates leave the old
//               cluster's float64 sums and join the new one's

#if !defined(DIM) || !defined(SLACK)
#error "compile with -DDIM=<dimensions> -DSLACK=<relative rounding margin>f"
#endif

#define LANES 32
#define PER_LANE ((DIM + LANES - 1) / LANES)
#define FULL 0xffffffffu

__device__ __forceinline__ float warp_sum(float value) {
  for (int offset = 16; offset > 0; offset >>= 1) value += __shfl_xor_sync(FULL, value, offset);
  return value;
}

__device__ __forceinline__ float warp_min(float value) {
  for (int offset = 16; offset > 0; offset >>= 1) value = fminf(value, __shfl_xor_sync(FULL, value, offset));
  return value;
}

// Smallest value; of equal values the lower index (the oracle's rule).
__device__ __forceinline__ void warp_argmin(float& value, int& index) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float other_value = __shfl_xor_sync(FULL, value, offset);
    const int other_index = __shfl_xor_sync(FULL, index, offset);
    if (other_value < value || (other_value == value && other_index < index)) {
      value = other_value;
      index = other_index;
    }
  }
}

// Bounds from squared distances, widened by the rounding margin and rounded outwards.
__device__ __forceinline__ float upper_of(float squared, float slack) {
  return __fsqrt_ru(__fadd_ru(fmaxf(squared, 0.0f), slack));
}
__device__ __forceinline__ float lower_of(float squared, float slack) {
  return __fsqrt_rd(fmaxf(__fsub_rd(squared, slack), 0.0f));
}

// The squared distance from the point held in `mine` (lane j holds coordinates j, j + 32, ...)
// to one centroid, summed over the warp directly, as (x - c)^2: no cancellation.
__device__ __forceinline__ float squared_distance(const float (&mine)[PER_LANE], const float* __restrict__ centroid,
                                                  int lane) {
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < PER_LANE; ++j) {
    const int dim = lane + j * LANES;
    if (dim < DIM) {
      const float diff = mine[j] - __ldg(centroid + dim);
      sum = fmaf(diff, diff, sum);
    }
  }
  return warp_sum(sum);
}

extern "C" __global__ void filter(float* __restrict__ upper, float* __restrict__ lower,
                                  const int* __restrict__ labels, const float* __restrict__ drift,
                                  const float* __restrict__ group_drift, long long n, int groups,
                                  int* __restrict__ active, unsigned int* __restrict__ active_count) {
  const long long point = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / LANES;
  const int lane = threadIdx.x % LANES;
  if (point >= n) return;  // whole warps leave together
  float* row = lower + point * groups;
  float smallest = 3.402823466e+38f;
  for (int g = lane; g < groups; g += LANES) {
    const float moved = fmaxf(__fsub_rd(row[g], group_drift[g]), 0.0f);
    row[g] = moved;
    smallest = fminf(smallest, moved);
  }
  smallest = warp_min(smallest);
  if (lane == 0) {
    const float bound = __fadd_ru(upper[point], drift[labels[point]]);
    upper[point] = bound;
    if (bound > smallest) active[atomicAdd(active_count, 1u)] = (int)point;
  }
}

extern "C" __global__ void examine(const float* __restrict__ x, const float* __restrict__ centroids,
                                   const int* __restrict__ group_start, int groups,
                                   const int* __restrict__ active, unsigned int count,
                                   const int* __restrict__ group_of, const float* __restrict__ point_norms,
                                   const float* __restrict__ cmax, float* __restrict__ upper,
                                   float* __restrict__ lower, int* __restrict__ labels) {
  const long long slot = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / LANES;
  const int lane = threadIdx.x % LANES;
  if (slot >= count) return;
  const long long point = active[slot];
  float mine[PER_LANE];
#pragma unroll
  for (int j = 0; j < PER_LANE; ++j) {
    const int dim = lane + j * LANES;
    mine[j] = dim < DIM ? x[point * DIM + dim] : 0.0f;
  }
  const float reach = point_norms[point] + *cmax;
  const float slack = SLACK * reach * reach;
  float* row = lower + point * groups;
  int best = labels[point];
  float best_squared = squared_distance(mine, centroids + (long long)best * DIM, lane);
  float best_bound = upper_of(best_squared, slack);  // the tightened upper bound
  float smallest = 3.402823466e+38f;
  for (int g = lane; g < groups; g += LANES) smallest = fminf(smallest, row[g]);
  smallest = warp_min(smallest);
  if (best_bound > smallest) {
    // Group filter, 32 groups at a time: a group is examined only if its bound is below the
    // current best distance (which only shrinks as the scan goes on).
    for (int base = 0; base < groups; base += LANES) {
      const int g_lane = base + lane;
      unsigned int todo = __ballot_sync(FULL, g_lane < groups && row[g_lane] < best_bound);
      while (todo) {
        const int g = base + __ffs(todo) - 1;
        todo &= todo - 1;
        if (!(row[g] < best_bound)) continue;  // the best improved since the ballot (uniform)
        float first = 3.402823466e+38f, second = 3.402823466e+38f;
        int first_index = -1;
        for (int c = group_start[g]; c < group_start[g + 1]; ++c) {
          const float squared = squared_distance(mine, centroids + (long long)c * DIM, lane);
          if (squared < first) {
            second = first;
            first = squared;
            first_index = c;
          } else if (squared < second) {
            second = squared;
          }
        }
        const bool was_best_here = best >= group_start[g] && best < group_start[g + 1];
        if (first_index >= 0 && first_index != best && first < best_squared) {
          // A new nearest centroid. The old one becomes an ordinary member of its group: its
          // group's bound must not exceed its distance (its own group covers it via `second`).
          if (!was_best_here && lane == 0)
            row[group_of[best]] = fminf(row[group_of[best]], lower_of(best_squared, slack));
          best = first_index;
          best_squared = first;
          best_bound = upper_of(best_squared, slack);
          if (lane == 0) row[g] = lower_of(second, slack);
        } else {
          // The best stays elsewhere (or is this group's nearest): bound by the nearest other.
          const float other = first_index == best ? second : first;
          if (lane == 0) row[g] = lower_of(other, slack);
        }
        __syncwarp();
      }
    }
  }
  if (lane == 0) {
    upper[point] = best_bound;
    labels[point] = best;
  }
}

// One row of scores (x . c for every centroid) per warp: the nearest centroid, its distance as
// the upper bound, and for every group the nearest other centroid as its lower bound.
// squared = |x|^2 - 2 x.c + |c|^2; rows[r] is the point's index (or -1: rows are first + r).
extern "C" __global__ void rows_bounds(const float* __restrict__ scores, const float* __restrict__ norms,
                                       const float* __restrict__ point_norms, const int* __restrict__ rows,
                                       long long first, long long count, int k,
                                       const int* __restrict__ group_start, int groups,
                                       const float* __restrict__ cmax,
                                       float* __restrict__ upper, float* __restrict__ lower,
                                       int* __restrict__ labels) {
  const long long r = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / LANES;
  const int lane = threadIdx.x % LANES;
  if (r >= count) return;
  const long long point = rows ? (long long)rows[r] : first + r;
  const float* line = scores + r * k;
  const float x_squared = point_norms[point] * point_norms[point];
  const float reach = point_norms[point] + *cmax;
  const float slack = SLACK * reach * reach;
  float value = 3.402823466e+38f;
  int index = k;
  for (int c = lane; c < k; c += LANES) {
    const float squared = x_squared - 2.0f * line[c] + norms[c];
    if (squared < value) {
      value = squared;
      index = c;
    }
  }
  warp_argmin(value, index);
  float* row = lower + point * groups;
  for (int g = lane; g < groups; g += LANES) {
    float nearest = 3.402823466e+38f;
    for (int c = group_start[g]; c < group_start[g + 1]; ++c)
      if (c != index) nearest = fminf(nearest, x_squared - 2.0f * line[c] + norms[c]);
    row[g] = lower_of(nearest, slack);
  }
  if (lane == 0) {
    upper[point] = upper_of(value, slack);
    labels[point] = index;
  }
}

// After kmbench-gpu's tensor-core assignment of every point (labels exact; `floor` a lower
// bound on the exact score |c|^2 / 2 - x.c of every centroid but the winner): warp per point,
// the upper bound from the exact distance to the winner, and every group's lower bound from
// the floor, as squared = |x|^2 + 2 floor. One bound for all groups is looser than the GEMM
// rows' per-group ones; the group filter tightens each group the first time it is examined.
extern "C" __global__ void tensor_bounds(const float* __restrict__ x, const float* __restrict__ centroids,
                                         const int* __restrict__ winners, const float* __restrict__ floor_score,
                                         long long n, int groups, const float* __restrict__ point_norms,
                                         const float* __restrict__ cmax, float* __restrict__ upper,
                                         float* __restrict__ lower, int* __restrict__ labels) {
  const long long point = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / LANES;
  const int lane = threadIdx.x % LANES;
  if (point >= n) return;
  float mine[PER_LANE];
  float own = 0.0f;
#pragma unroll
  for (int j = 0; j < PER_LANE; ++j) {
    const int dim = lane + j * LANES;
    mine[j] = dim < DIM ? x[point * DIM + dim] : 0.0f;
    own = fmaf(mine[j], mine[j], own);
  }
  own = warp_sum(own);
  const int winner = winners[point];
  const float reach = point_norms[point] + *cmax;
  const float slack = SLACK * reach * reach;
  const float best_squared = squared_distance(mine, centroids + (long long)winner * DIM, lane);
  const float others = lower_of(fmaf(2.0f, floor_score[point], own), slack);
  float* row = lower + point * groups;
  for (int g = lane; g < groups; g += LANES) row[g] = others;
  if (lane == 0) {
    upper[point] = upper_of(best_squared, slack);
    labels[point] = winner;
  }
}

// For each listed point whose label changed: its coordinates (float32, exact in float64)
// leave the old cluster's float64 sums and join the new one's; counts likewise; `changed`
// counts the moves for the tolerance rule. rows == nullptr: the points first .. first + count.
extern "C" __global__ void move(const float* __restrict__ x, const int* __restrict__ rows, long long count,
                                const int* __restrict__ labels, int* __restrict__ previous,
                                double* __restrict__ sums, long long* __restrict__ counts,
                                unsigned long long* __restrict__ changed) {
  const long long r = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / LANES;
  const int lane = threadIdx.x % LANES;
  if (r >= count) return;
  const long long point = rows ? (long long)rows[r] : r;
  const int now = labels[point], before = previous[point];
  if (now == before) return;
  for (int dim = lane; dim < DIM; dim += LANES) {
    const double value = (double)x[point * DIM + dim];
    atomicAdd(sums + (long long)now * DIM + dim, value);
    if (before >= 0) atomicAdd(sums + (long long)before * DIM + dim, -value);
  }
  if (lane == 0) {
    atomicAdd((unsigned long long*)(counts + now), 1ull);
    if (before >= 0) atomicAdd((unsigned long long*)(counts + before), (unsigned long long)-1ll);
    previous[point] = now;
    atomicAdd(changed, 1ull);
  }
}
