// Not a step of the ladder: the floor under it. This kernel moves exactly the bytes of an
// assignment pass, in the fastest pass's layout (4 consecutive points per thread, 16-byte
// loads and stores), and does no search: each label is the previous one plus whether the
// point's first coordinate is positive, so nothing can be optimised away. Timed the way
// the steps are, it shows what a pass costs before any distance is computed.
#include "common.cuh"

template <int DIM>
__global__ void __launch_bounds__(256) stream_floor(ASSIGN_ARGS) {
  const long long quad = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long p0 = quad * 4;
  if (p0 + 4 <= n) {
    const float4 *source = reinterpret_cast<const float4 *>(data) + quad * DIM;
    float first[4];
#pragma unroll
    for (int j = 0; j < DIM; ++j) {
      const float4 v = source[j];
      const float lane[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if ((4 * j + e) % DIM == 0) first[(4 * j + e) / DIM] = lane[e];
    }
    const int4 old = reinterpret_cast<const int4 *>(previous)[quad];
    reinterpret_cast<int4 *>(labels)[quad] =
        make_int4(old.x + (first[0] > 0.0f), old.y + (first[1] > 0.0f), old.z + (first[2] > 0.0f),
                  old.w + (first[3] > 0.0f));
  } else {
    for (long long p = p0; p < n; ++p) labels[p] = previous[p] + (data[p * DIM] > 0.0f);
  }
}

template __global__ void stream_floor<1>(ASSIGN_ARGS);
template __global__ void stream_floor<2>(ASSIGN_ARGS);
template __global__ void stream_floor<8>(ASSIGN_ARGS);
