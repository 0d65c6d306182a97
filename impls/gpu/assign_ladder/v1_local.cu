// V1: one thread per point; the point is copied into a per-thread array whose length is
// the runtime d, so the compiler puts it in local memory (not registers); the previous
// label is loaded only after the search, so its latency is exposed; every changed point
// adds to a shared counter with an atomic, and each block adds that to `changed`.
#include "common.cuh"

#define V1_MAX_DIM 16

extern "C" __global__ void assign_v1(ASSIGN_ARGS) {
  extern __shared__ float staged[];
  __shared__ int block_changed;
  if (threadIdx.x == 0) block_changed = 0;
  stage_centroids(staged, centroids, k * d);
  int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p < n) {
    float point[V1_MAX_DIM];
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
    if (previous[p] != label) atomicAdd(&block_changed, 1);
    labels[p] = label;
  }
  __syncthreads();
  if (threadIdx.x == 0) atomicAdd(changed, block_changed);
}
