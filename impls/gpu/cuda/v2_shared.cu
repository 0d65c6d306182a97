// cuda-v2 (document 000, "Our CUDA (2)"): v1 with the means staged in shared memory.
// Dynamic shared memory: 2 * k floats. Threads past the end of the data still take part
// in the barrier (the published kernel returned before it in the last block).
#include "common.cuh"

extern "C" __global__ void assign_shared(const float* __restrict__ x, const float* __restrict__ y, int n,
                                         const float* __restrict__ means_x,
                                         const float* __restrict__ means_y, int k,
                                         float* __restrict__ sums_x, float* __restrict__ sums_y,
                                         int* __restrict__ counts) {
  extern __shared__ float shared_means[];
  float* shared_x = shared_means;
  float* shared_y = shared_means + k;
  stage_means(shared_x, shared_y, means_x, means_y, k);
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= n) return;  // after the only barrier
  const float px = x[index];
  const float py = y[index];
  const int cluster = nearest_centroid(px, py, shared_x, shared_y, k);
  add_to_cluster(cluster, px, py, sums_x, sums_y, counts);
}
