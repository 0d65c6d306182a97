// kmbench-gpu's tensor-core path: the centroids renumbered by neighbourhood before the first
// iteration (renumber.py's order_by_neighbourhood), in three launches and one sort. Done with
// CuPy array expressions it was about 25 launches, 1.3 to 2.3 ms of the host's time inside the
// run's timed region, where the GPU's share was about 0.1 ms (NOTES.md, "The renumbering").

#define FULL_MASK 0xffffffffu

// One warp per centroid i: its nearest pivot (every group-th centroid) by h_p - c_i . c_p, the
// first of equal scores, and its squared distance to that pivot, |c_i|^2 + 2 (h_p - c_i . c_p)
// (at least 0). The sort key puts the pivot above the distance's bits (a float >= 0 orders as its
// bits), so the centroids come grouped by pivot, each group by distance to its pivot.
extern "C" __global__ void neighbourhood_keys(const float* __restrict__ centroids, const float* __restrict__ half_norms,
                                              int k, int d, int group, unsigned long long* __restrict__ keys) {
  const int lane = threadIdx.x & 31;
  const int i = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  if (i >= k) return;
  const float* own = centroids + (long long)i * d;
  float best = __int_as_float(0x7f800000);
  int nearest = 0;
  for (int p = 0; p < k; p += group) {
    const float* pivot = centroids + (long long)p * d;
    float dot = 0.0f;
    for (int dim = lane; dim < d; dim += 32) dot = fmaf(own[dim], pivot[dim], dot);
    for (int offset = 16; offset > 0; offset >>= 1) dot += __shfl_xor_sync(FULL_MASK, dot, offset);
    const float score = half_norms[p] - dot;  // the same in every lane
    if (score < best) best = score, nearest = p / group;
  }
  if (lane == 0) {
    const float squared = fmaxf(2.0f * (half_norms[i] + best), 0.0f);
    keys[i] = ((unsigned long long)nearest << 32) | __float_as_uint(squared);
  }
}

// Row i of each `to` buffer from row order[i] of its `from` buffer (order null: row i): the
// float64 and float32 centroids (k x d), the TF32 copy, the half norms and the harness's index
// of each slot. Called twice, into scratch and back, as the iterations' buffers must stay where
// the CUDA graph has them.
extern "C" __global__ void gather_centroids(const long long* __restrict__ order, int k, int d,
                                            const double* __restrict__ from64, const float* __restrict__ from32,
                                            const float* __restrict__ from_tf32, const float* __restrict__ from_half,
                                            const int* __restrict__ from_index, double* __restrict__ to64,
                                            float* __restrict__ to32, float* __restrict__ to_tf32,
                                            float* __restrict__ to_half, int* __restrict__ to_index) {
  const long long total = (long long)k * d;
  for (long long at = (long long)blockIdx.x * blockDim.x + threadIdx.x; at < total;
       at += (long long)gridDim.x * blockDim.x) {
    const int i = int(at / d), dim = int(at % d);
    const long long source = (order ? order[i] : i) * d + dim;
    to64[at] = from64[source];
    to32[at] = from32[source];
    to_tf32[at] = from_tf32[source];
    if (dim == 0) {
      const long long j = order ? order[i] : i;
      to_half[i] = from_half[j];
      to_index[i] = from_index[j];
    }
  }
}
