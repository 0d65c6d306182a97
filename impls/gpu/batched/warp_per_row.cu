// kmbench's batched k-means: one warp per row, one lane per seed (seeds <= 32), ROWS rows
// per block so that a block has enough warps to hide latency (document 003's one block of
// 32 threads per row caps an SM at 32 blocks, a quarter of its warps... and pays a block
// barrier per row).
// - The row is staged in shared memory by its warp (coalesced); every lane then reads the
//   same point at the same time, a broadcast.
// - One pass per iteration: each point's nearest centroid and the sums are fused, the sums
//   kept in registers by compare-and-select over the K clusters (no local memory, no label
//   array). The sums are of x - c (the offset from the point's old centroid), so they stay
//   small wherever the row lies; the new centroid is c + mean offset.
// - Stop rule as in block_per_row.cu, compared squared (no square root). Lanes that stopped
//   idle until the warp's last seed stops.
// - The best seed by a shuffle reduction (ties to the lower lane); its lane writes the row.

#define BATCHED_ARGS                                                                          \
  const float *__restrict__ data, const float *__restrict__ starts, int rows, int points,     \
      int seeds, int max_iter, float epsilon, float *__restrict__ best_centroids,              \
      float *__restrict__ best_inertia, int *__restrict__ best_seed, int *__restrict__ iterations

template <int K, int D, int ROWS>
__global__ void __launch_bounds__(32 * ROWS) batched_warp_per_row(BATCHED_ARGS) {
  extern __shared__ float shared[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const long long r = (long long)blockIdx.x * ROWS + warp;
  if (r >= rows) return;  // a whole warp; there is no block barrier below
  float *row = shared + warp * points * D;
  const float *source = data + r * points * D;
  for (int i = lane; i < points * D; i += 32) row[i] = source[i];
  __syncwarp();

  const bool seeded = lane < seeds;
  float c[K * D];
  const float *start = starts + (r * seeds + (seeded ? lane : 0)) * K * D;
#pragma unroll
  for (int i = 0; i < K * D; ++i) c[i] = start[i];
  float limit2 = -1.0f;
  if (epsilon >= 0.0f && K > 1) {
    float yard2 = __int_as_float(0x7f800000);
#pragma unroll
    for (int a = 0; a < K; ++a)
#pragma unroll
      for (int b = a + 1; b < K; ++b) {
        float gap = 0.0f;
#pragma unroll
        for (int j = 0; j < D; ++j) gap = fmaf(c[a * D + j] - c[b * D + j], c[a * D + j] - c[b * D + j], gap);
        yard2 = fminf(yard2, gap);
      }
    limit2 = epsilon * epsilon * yard2;
  }

  bool running = seeded;
  int done = 0;
  while (__any_sync(0xffffffffu, running && done < max_iter)) {
    if (running && done < max_iter) {
      float offset[K * D];
      int count[K];
#pragma unroll
      for (int i = 0; i < K * D; ++i) offset[i] = 0.0f;
#pragma unroll
      for (int cl = 0; cl < K; ++cl) count[cl] = 0;
      for (int p = 0; p < points; ++p) {
        float t[K * D];
        float best = __int_as_float(0x7f800000);
        int label = 0;
#pragma unroll
        for (int cl = 0; cl < K; ++cl) {
          float distance = 0.0f;
#pragma unroll
          for (int j = 0; j < D; ++j) {
            t[cl * D + j] = row[p * D + j] - c[cl * D + j];
            distance = fmaf(t[cl * D + j], t[cl * D + j], distance);
          }
          const bool nearer = distance < best;
          best = nearer ? distance : best;
          label = nearer ? cl : label;
        }
#pragma unroll
        for (int cl = 0; cl < K; ++cl) {
          const bool member = label == cl;
          count[cl] += member;
#pragma unroll
          for (int j = 0; j < D; ++j) offset[cl * D + j] += member ? t[cl * D + j] : 0.0f;
        }
      }
      float moved2 = 0.0f;
#pragma unroll
      for (int cl = 0; cl < K; ++cl) {
        if (count[cl] == 0) continue;
        const float inverse = 1.0f / count[cl];
        float shift = 0.0f;
#pragma unroll
        for (int j = 0; j < D; ++j) {
          const float step = offset[cl * D + j] * inverse;
          c[cl * D + j] += step;
          shift = fmaf(step, step, shift);
        }
        moved2 = fmaxf(moved2, shift);
      }
      ++done;
      if (moved2 <= limit2) running = false;
    }
  }

  float total = 0.0f;
  for (int p = 0; p < points; ++p) {
    float best = __int_as_float(0x7f800000);
#pragma unroll
    for (int cl = 0; cl < K; ++cl) {
      float distance = 0.0f;
#pragma unroll
      for (int j = 0; j < D; ++j) {
        const float t = row[p * D + j] - c[cl * D + j];
        distance = fmaf(t, t, distance);
      }
      best = fminf(best, distance);
    }
    total += best;
  }
  if (seeded) iterations[r * seeds + lane] = done;
  float value = seeded ? total : __int_as_float(0x7f800000);
  int winner = lane;
#pragma unroll
  for (int width = 16; width > 0; width >>= 1) {
    const float other = __shfl_down_sync(0xffffffffu, value, width);
    const int who = __shfl_down_sync(0xffffffffu, winner, width);
    if (other < value || (other == value && who < winner)) { value = other; winner = who; }
  }
  winner = __shfl_sync(0xffffffffu, winner, 0);
  if (lane == winner) {
    best_inertia[r] = total;
    best_seed[r] = lane;
#pragma unroll
    for (int i = 0; i < K * D; ++i) best_centroids[r * K * D + i] = c[i];
  }
}

template __global__ void batched_warp_per_row<3, 1, 4>(BATCHED_ARGS);
template __global__ void batched_warp_per_row<3, 2, 4>(BATCHED_ARGS);
