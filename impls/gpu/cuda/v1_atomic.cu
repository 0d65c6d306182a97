// cuda-v1 (document 000, "Our CUDA"): one thread per point, means read from global memory,
// sums and counts accumulated with atomicAdd; then update_means (common.cuh), one thread
// per cluster.
#include "common.cuh"

extern "C" __global__ void assign_atomic(const float* __restrict__ x, const float* __restrict__ y, int n,
                                         const float* __restrict__ means_x,
                                         const float* __restrict__ means_y, int k,
                                         float* __restrict__ sums_x, float* __restrict__ sums_y,
                                         int* __restrict__ counts) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= n) return;  // no barrier in this kernel
  const float px = x[index];
  const float py = y[index];
  const int cluster = nearest_centroid(px, py, means_x, means_y, k);
  add_to_cluster(cluster, px, py, sums_x, sums_y, counts);
}
