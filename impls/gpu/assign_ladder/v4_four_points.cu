// V4: V3 with UNROLL (4) points per thread, a grid-stride apart so that each of the four
// loads is coalesced across the warp; four independent searches give the scheduler
// independent instructions to interleave. The grid is a quarter of V3's.
#include "common.cuh"

template <int DIM, int UNROLL>
__global__ void assign_v4(ASSIGN_ARGS) {
  extern __shared__ float staged[];
  __shared__ int block_changed;
  if (threadIdx.x == 0) block_changed = 0;
  const int stride = gridDim.x * blockDim.x;
  const int first = blockIdx.x * blockDim.x + threadIdx.x;
  int before[UNROLL];
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) before[u] = first + u * stride < n ? previous[first + u * stride] : 0;
  stage_centroids(staged, centroids, k * DIM);
  float point[UNROLL][DIM];
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    const int p = first + u * stride;
#pragma unroll
    for (int j = 0; j < DIM; ++j) point[u][j] = p < n ? data[(size_t)p * DIM + j] : 0.0f;
  }
  float best[UNROLL];
  int label[UNROLL];
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) { best[u] = __int_as_float(0x7f800000); label[u] = 0; }
  for (int c = 0; c < k; ++c) {
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      float distance = 0.0f;
#pragma unroll
      for (int j = 0; j < DIM; ++j) {
        float t = point[u][j] - staged[c * DIM + j];
        distance += t * t;
      }
      if (distance < best[u]) { best[u] = distance; label[u] = c; }
    }
  }
  int moved = 0;
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    const int p = first + u * stride;
    if (p < n) {
      moved += before[u] != label[u];
      labels[p] = label[u];
    }
  }
  if (moved) atomicAdd(&block_changed, moved);
  __syncthreads();
  if (threadIdx.x == 0) atomicAdd(changed, block_changed);
}

template __global__ void assign_v4<1, 4>(ASSIGN_ARGS);
template __global__ void assign_v4<2, 4>(ASSIGN_ARGS);
template __global__ void assign_v4<8, 4>(ASSIGN_ARGS);
