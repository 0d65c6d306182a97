// V2: V1 with the previous label loaded first, before the search, so the load's latency
// hides behind the distance arithmetic instead of stalling the compare at the end.
#include "common.cuh"

#define V2_MAX_DIM 16

extern "C" __global__ void assign_v2(ASSIGN_ARGS) {
  extern __shared__ float staged[];
  __shared__ int block_changed;
  if (threadIdx.x == 0) block_changed = 0;
  int p = blockIdx.x * blockDim.x + threadIdx.x;
  int before = p < n ? previous[p] : 0;
  stage_centroids(staged, centroids, k * d);
  if (p < n) {
    float point[V2_MAX_DIM];
    for (int j = 0; j < d; ++j) point[j] = data[(size_t)p * d + j];
    float best = __int_as_float(0x7f800000);
    int label = 0;
    for (int c = 0; c < k; ++c) {
      float distance = 0.0f;
      for (int j = 0; j < d; ++j) {
        float t = point[j] - staged[c * d + j];
        distance += t * t;
      }
      if (distance < best) { best = distance; label = c; }
    }
    if (before != label) atomicAdd(&block_changed, 1);
    labels[p] = label;
  }
  __syncthreads();
  if (threadIdx.x == 0) atomicAdd(changed, block_changed);
}
