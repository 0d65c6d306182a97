// Shared by the assignment-ladder kernels (document 001's six steps and ours).
// Every kernel has the same arguments: points (n x d, row-major as kmbench stores them),
// centroids (k x d), the previous labels (read), the new labels (written; a separate array
// so that repeated launches of one pass are identical), and `changed`, which ends non-zero
// when any label differs from the previous one. Ties go to the lower centroid index
// (strict <), as in the float64 oracle.
#pragma once

#define ASSIGN_ARGS                                                                       \
  const float *__restrict__ data, const float *__restrict__ centroids,                    \
      const int *__restrict__ previous, int *__restrict__ labels, int *changed, int n, int d, int k

// Copy the centroids into shared memory (every step of the ladder keeps them there: all
// threads of a block read the same centroid at the same time, a broadcast).
__device__ __forceinline__ void stage_centroids(float *staged, const float *centroids, int count) {
  for (int i = threadIdx.x; i < count; i += blockDim.x) staged[i] = centroids[i];
  __syncthreads();
}
