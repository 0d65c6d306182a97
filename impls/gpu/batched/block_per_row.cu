// Document 003's design, in our own code: one block per row, one thread per seed, the row
// staged in shared memory. Each iteration is two passes over the row, as the document
// writes it: the labels of every point into shared memory, then the centroids from the
// labels (sums and counts indexed by the label, which the compiler keeps in local memory).
// After the last iteration each thread computes its seed's inertia, and thread 0 keeps the
// seed with the smallest one (ties to the lower seed).
//
// Stop rule: a seed stops after the first iteration in which no centroid moved more than
// epsilon times its yard stick (the smallest distance between two of its initial
// centroids); epsilon < 0 runs exactly max_iter iterations. Empty clusters keep their
// centroid. Labels are bytes (K <= 255).
//
// Shared memory: points*D floats (the row), seeds floats (inertia), seeds*K*D floats (each
// seed's final centroids), seeds*points bytes (labels).

#define BATCHED_ARGS                                                                          \
  const float *__restrict__ data, const float *__restrict__ starts, int points, int seeds,    \
      int max_iter, float epsilon, float *__restrict__ best_centroids,                         \
      float *__restrict__ best_inertia, int *__restrict__ best_seed, int *__restrict__ iterations

template <int K, int D>
__global__ void batched_block_per_row(BATCHED_ARGS) {
  extern __shared__ float shared[];
  float *row = shared;
  float *inertia = row + points * D;
  float *finals = inertia + seeds;
  unsigned char *labels = reinterpret_cast<unsigned char *>(finals + seeds * K * D);
  const int r = blockIdx.x, s = threadIdx.x;
  const float *source = data + (size_t)r * points * D;
  for (int i = threadIdx.x; i < points * D; i += blockDim.x) row[i] = source[i];
  __syncthreads();

  float c[K * D];
  const float *start = starts + ((size_t)r * seeds + s) * K * D;
  for (int i = 0; i < K * D; ++i) c[i] = start[i];
  float limit = -1.0f;
  if (epsilon >= 0.0f && K > 1) {
    float yard = __int_as_float(0x7f800000);
    for (int a = 0; a < K; ++a)
      for (int b = a + 1; b < K; ++b) {
        float gap = 0.0f;
        for (int j = 0; j < D; ++j) gap += (c[a * D + j] - c[b * D + j]) * (c[a * D + j] - c[b * D + j]);
        yard = fminf(yard, sqrtf(gap));
      }
    limit = epsilon * yard;
  }
  unsigned char *mine = labels + s * points;
  int done = 0;
  while (done < max_iter) {
    for (int p = 0; p < points; ++p) {
      float best = __int_as_float(0x7f800000);
      int label = 0;
      for (int cl = 0; cl < K; ++cl) {
        float distance = 0.0f;
        for (int j = 0; j < D; ++j) {
          const float t = row[p * D + j] - c[cl * D + j];
          distance += t * t;
        }
        if (distance < best) { best = distance; label = cl; }
      }
      mine[p] = (unsigned char)label;
    }
    float sums[K * D];
    int counts[K];
    for (int i = 0; i < K * D; ++i) sums[i] = 0.0f;
    for (int cl = 0; cl < K; ++cl) counts[cl] = 0;
    for (int p = 0; p < points; ++p) {
      const int label = mine[p];
      counts[label] += 1;
      for (int j = 0; j < D; ++j) sums[label * D + j] += row[p * D + j];
    }
    float moved = 0.0f;
    for (int cl = 0; cl < K; ++cl) {
      if (counts[cl] == 0) continue;
      float shift = 0.0f;
      for (int j = 0; j < D; ++j) {
        const float next = sums[cl * D + j] / counts[cl];
        shift += (next - c[cl * D + j]) * (next - c[cl * D + j]);
        c[cl * D + j] = next;
      }
      moved = fmaxf(moved, sqrtf(shift));
    }
    ++done;
    if (moved <= limit) break;
  }

  float total = 0.0f;
  for (int p = 0; p < points; ++p) {
    float best = __int_as_float(0x7f800000);
    for (int cl = 0; cl < K; ++cl) {
      float distance = 0.0f;
      for (int j = 0; j < D; ++j) {
        const float t = row[p * D + j] - c[cl * D + j];
        distance += t * t;
      }
      best = fminf(best, distance);
    }
    total += best;
  }
  inertia[s] = total;
  for (int i = 0; i < K * D; ++i) finals[s * K * D + i] = c[i];
  iterations[(size_t)r * seeds + s] = done;
  __syncthreads();
  if (s == 0) {
    int winner = 0;
    for (int t = 1; t < seeds; ++t)
      if (inertia[t] < inertia[winner]) winner = t;
    best_inertia[r] = inertia[winner];
    best_seed[r] = winner;
    for (int i = 0; i < K * D; ++i) best_centroids[(size_t)r * K * D + i] = finals[winner * K * D + i];
  }
}

template __global__ void batched_block_per_row<3, 1>(BATCHED_ARGS);
template __global__ void batched_block_per_row<3, 2>(BATCHED_ARGS);
