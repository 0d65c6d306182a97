// Device code shared by the CUDA versions: 2-D points as a struct of arrays (x[], y[]),
// float32 as in document 000. Compiled by NVRTC through CuPy (no standard headers).
#pragma once

#define KMBENCH_FLT_MAX 3.402823466e+38f

__device__ __forceinline__ float kmbench_largest(float) { return KMBENCH_FLT_MAX; }
__device__ __forceinline__ double kmbench_largest(double) { return 1.7976931348623157e308; }

// Index of the centroid nearest to (px, py); ties go to the lower index, as in the oracle.
// T is float for document 000's versions, double for document 002's.
template <typename T>
__device__ __forceinline__ int nearest_centroid(T px, T py, const T* means_x, const T* means_y, int k) {
  T best_distance = kmbench_largest(T(0));
  int best_cluster = 0;
  for (int cluster = 0; cluster < k; ++cluster) {
    const T dx = px - means_x[cluster];
    const T dy = py - means_y[cluster];
    const T distance = dx * dx + dy * dy;
    if (distance < best_distance) {
      best_distance = distance;
      best_cluster = cluster;
    }
  }
  return best_cluster;
}

// One thread per cluster (any k, any grid): the mean of its points, or the previous
// centroid when it got none; then the accumulators are cleared for the next iteration,
// which saves three memsets per iteration.
extern "C" __global__ void update_means(float* __restrict__ means_x, float* __restrict__ means_y,
                                        float* __restrict__ sums_x, float* __restrict__ sums_y,
                                        int* __restrict__ counts, int k) {
  const int cluster = blockIdx.x * blockDim.x + threadIdx.x;
  if (cluster >= k) return;  // no barrier in this kernel, so an early exit is safe
  const int count = counts[cluster];
  if (count > 0) {
    means_x[cluster] = sums_x[cluster] / count;
    means_y[cluster] = sums_y[cluster] / count;
  }
  sums_x[cluster] = 0.0f;
  sums_y[cluster] = 0.0f;
  counts[cluster] = 0;
}

// v1 and v2's update: the point joins its cluster's sums and count with atomics.
__device__ __forceinline__ void add_to_cluster(int cluster, float px, float py, float* sums_x,
                                               float* sums_y, int* counts) {
  atomicAdd(&sums_x[cluster], px);
  atomicAdd(&sums_y[cluster], py);
  atomicAdd(&counts[cluster], 1);
}

// Copy the k means into shared memory with a block-strided loop, so any k works whatever
// the block size (the published code let only the first blockDim.x threads load).
// Every thread of the block must call this: it ends with a barrier.
__device__ __forceinline__ void stage_means(float* shared_x, float* shared_y, const float* means_x,
                                            const float* means_y, int k) {
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    shared_x[j] = means_x[j];
    shared_y[j] = means_y[j];
  }
  __syncthreads();
}
