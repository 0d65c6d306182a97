// V3: V2 with the dimension a template parameter: the loops over DIM unroll, the point
// lives in registers, and the inner loop's counter and branch are gone.
#include "common.cuh"

template <int DIM>
__global__ void assign_v3(ASSIGN_ARGS) {
  extern __shared__ float staged[];
  __shared__ int block_changed;
  if (threadIdx.x == 0) block_changed = 0;
  int p = blockIdx.x * blockDim.x + threadIdx.x;
  int before = p < n ? previous[p] : 0;
  stage_centroids(staged, centroids, k * DIM);
  if (p < n) {
    float point[DIM];
#pragma unroll
    for (int j = 0; j < DIM; ++j) point[j] = data[(size_t)p * DIM + j];
    float best = __int_as_float(0x7f800000);
    int label = 0;
    for (int c = 0; c < k; ++c) {
      float distance = 0.0f;
#pragma unroll
      for (int j = 0; j < DIM; ++j) {
        float t = point[j] - staged[c * DIM + j];
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

template __global__ void assign_v3<1>(ASSIGN_ARGS);
template __global__ void assign_v3<2>(ASSIGN_ARGS);
template __global__ void assign_v3<8>(ASSIGN_ARGS);
