// lowd.cu's pruning (PRUNE): the centroids that can be nearest to some point of a block's group
// of points, found from the group's bounding box, so the tiled kernel scans only those. Included
// by lowd.cu, whose constants (DIM, POINTS, BLOCK, WARPS, LIST, GAMMA) it uses.
#pragma once

// The centroids that may be nearest to some point of this block's group, listed in index
// order into list (so a scan of the list keeps the ties to the lower index); returns how many,
// or -1 where more than LIST. The group's points lie in the box [lo, hi]. Every centroid is
// within `far` of the whole box for the smallest such `far` over the centroids; a centroid
// whose nearest approach to the box exceeds it, past both roundings, is farther than that
// one from every point, in the kernel's float32 distances too, so it cannot win anywhere.
// Only block-uniform branches around the barriers (count and k are the same in every thread).
__device__ int list_candidates(const float (&p)[POINTS][DIM], long long base, long long n,
                               const float* __restrict__ centroids, int k, int* list,
                               float (*box)[2 * DIM], float* bound, int (*counts)[WARPS]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int j = 0; j < DIM; ++j) {  // one dimension at a time: two registers, not 2 x DIM
    float lo = 3.402823466e+38f, hi = -3.402823466e+38f;
#pragma unroll
    for (int q = 0; q < POINTS; ++q) {
      if (base + (long long)q * BLOCK + threadIdx.x >= n) continue;  // inactive: not in the box
      lo = fminf(lo, p[q][j]);
      hi = fmaxf(hi, p[q][j]);
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      lo = fminf(lo, __shfl_xor_sync(0xffffffffu, lo, offset));
      hi = fmaxf(hi, __shfl_xor_sync(0xffffffffu, hi, offset));
    }
    if (lane == 0) {
      box[warp][j] = lo;
      box[warp][DIM + j] = hi;
    }
  }
  __syncthreads();  // also: the previous group has read its labels from `list`
  if (threadIdx.x < 2 * DIM) {  // the block's box, in row WARPS (read from shared memory
    const int j = threadIdx.x;  // below: DIM = 32 would hold 64 more registers through the scan)
    float edge = box[0][j];
    for (int w = 1; w < WARPS; ++w) edge = j < DIM ? fminf(edge, box[w][j]) : fmaxf(edge, box[w][j]);
    box[WARPS][j] = edge;
  }
  __syncthreads();
  const float* lo_s = box[WARPS];
  const float* hi_s = box[WARPS] + DIM;
  float nearest_far = 3.402823466e+38f;  // if every far overflows, the threshold's fma does too: nothing pruned
  for (int c = threadIdx.x; c < k; c += BLOCK) {
    float far = 0.0f;
#pragma unroll 8  // unrolled whole, DIM = 32 held 126 registers here against the scan's 80
    for (int j = 0; j < DIM; ++j) {
      const float v = centroids[(long long)c * DIM + j];
      const float side = fmaxf(v - lo_s[j], hi_s[j] - v);  // >= 0: the box's farther face
      far = fmaf(side, side, far);
    }
    nearest_far = fminf(nearest_far, far);
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    nearest_far = fminf(nearest_far, __shfl_xor_sync(0xffffffffu, nearest_far, offset));
  if (lane == 0) bound[warp] = nearest_far;
  __syncthreads();
  for (int w = 0; w < WARPS; ++w) nearest_far = fminf(nearest_far, bound[w]);
  // Skip where near (1 - GAMMA) > far (1 + GAMMA) after both were rounded by (1 +- GAMMA):
  // near > far ((1 + GAMMA) / (1 - GAMMA))^2, with room for the product's own rounding; the
  // constant term covers distances in the subnormal range, where rounding is absolute.
  const float threshold = fmaf(nearest_far, 1.0f + 8.0f * GAMMA, 1e-37f);
  int count = 0;
  const unsigned below = (1u << lane) - 1u;
  for (int first = 0, turn = 0; first < k && count <= LIST; first += BLOCK, turn ^= 1) {
    const int c = first + threadIdx.x;
    bool keep = false;
    if (c < k) {
      float near = 0.0f;
#pragma unroll 8  // unrolled whole, DIM = 32 held 126 registers here against the scan's 80
      for (int j = 0; j < DIM; ++j) {
        const float v = centroids[(long long)c * DIM + j];
        const float gap = fmaxf(fmaxf(lo_s[j] - v, v - hi_s[j]), 0.0f);  // 0 inside the box
        near = fmaf(gap, gap, near);
      }
      keep = !(near > threshold);
    }
    const unsigned kept = __ballot_sync(0xffffffffu, keep);
    if (lane == 0) counts[turn][warp] = __popc(kept);
    __syncthreads();  // one barrier per chunk: the counts alternate between two rows
    int offset = count, total = 0;
    for (int w = 0; w < WARPS; ++w) {
      const int v = counts[turn][w];
      offset += w < warp ? v : 0;
      total += v;
    }
    offset += __popc(kept & below);
    if (keep && offset < LIST) list[offset] = c;
    count += total;
  }
  __syncthreads();  // the list is whole before anyone reads it
  return count <= LIST ? count : -1;
}
