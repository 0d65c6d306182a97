// kmbench-gpu, high dimensions: the argmin over one chunk of GEMM scores. scores[r][c] = x_r . c
// (cuBLAS), so the nearest centroid minimises |c|^2 / 2 - scores[r][c]. One warp per row: each
// lane scans every 32nd centroid, then the warp keeps the smallest value, and of equal values
// the lower index, as the oracle does. track != 0 records labels and counts changes.

__device__ __forceinline__ void better(float& value, int& index, float other_value, int other_index) {
  if (other_value < value || (other_value == value && other_index < index)) {
    value = other_value;
    index = other_index;
  }
}

extern "C" __global__ void argmin_rows(const float* __restrict__ scores, const float* __restrict__ half_norms,
                                       long long rows, int k, int* __restrict__ labels,
                                       unsigned long long* __restrict__ changed, int track) {
  const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;  // whole warps leave together: no shuffle below misses a lane
  const float* line = scores + row * k;
  float value = 3.402823466e+38f;
  int index = k;
  for (int c = lane; c < k; c += 32) better(value, index, half_norms[c] - line[c], c);
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float other_value = __shfl_xor_sync(0xffffffffu, value, offset);
    const int other_index = __shfl_xor_sync(0xffffffffu, index, offset);
    better(value, index, other_value, other_index);
  }
  if (lane == 0) {
    if (track && labels[row] != index) atomicAdd(changed, 1ull);
    labels[row] = index;
  }
}
