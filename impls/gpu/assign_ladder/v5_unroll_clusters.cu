// V5: V4 with the number of clusters a template parameter as well: the loop over the
// clusters unrolls completely, every centroid coordinate is a shared-memory load at a
// constant offset, and the argmin becomes a chain of compare-and-selects.
#include "common.cuh"

template <int DIM, int UNROLL, int K>
__global__ void assign_v5(ASSIGN_ARGS) {
  extern __shared__ float staged[];
  __shared__ int block_changed;
  if (threadIdx.x == 0) block_changed = 0;
  const int stride = gridDim.x * blockDim.x;
  const int first = blockIdx.x * blockDim.x + threadIdx.x;
  int before[UNROLL];
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) before[u] = first + u * stride < n ? previous[first + u * stride] : 0;
  stage_centroids(staged, centroids, K * DIM);
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
#pragma unroll
  for (int c = 0; c < K; ++c) {
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

template __global__ void assign_v5<1, 4, 16>(ASSIGN_ARGS);
template __global__ void assign_v5<2, 4, 16>(ASSIGN_ARGS);
template __global__ void assign_v5<8, 4, 16>(ASSIGN_ARGS);
