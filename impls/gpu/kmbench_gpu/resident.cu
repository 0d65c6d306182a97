// kmbench-gpu, "resident": a whole Lloyd run in one cooperative launch, for small k x d.
//
// Why: at n = 1e5 an iteration is well under a microsecond of work, so a run of two launches
// per iteration (even inside one CUDA graph) is bound by launches and by their tails. Here
// the grid stays resident for every iteration and meets at a grid barrier once per
// iteration; the centroid update is done redundantly by every block from the same float64
// totals, so no second barrier and no host round trip is needed, and the tolerance rule is
// decided on the GPU too. At large n the same kernel is one pass over the data per iteration.
//
// DIM and KC (= k) are fixed when the adapter compiles the module, so the argmin loop is
// unrolled. Each thread owns one float64 column of SLOTS = KC * (DIM + 1) shared-memory
// accumulators (its members' coordinate sums and its count), so the per-point update is a
// few conflict-free shared-memory adds, and no sum is ever held in float32. The coordinates
// are shifted by the data's float32 mean in the adapter, so the float64 sums stay exact in
// practice wherever the data sit. Ties go to the lower index (strict <), as in the oracle;
// an empty cluster keeps its centroid.
//
// Partial totals cross blocks through float64 atomics into one of three buffers (iteration
// it uses buffer it % 3; block 0 clears buffer (it + 2) % 3, which nobody reads or writes
// until after the next barrier). The host zeroes all three buffers before the launch. Each
// slot has COPIES copies, block b adding into copy b % COPIES, so no address takes more
// than gridDim / COPIES atomics in a row; after the barrier one warp load and one warp sum
// per slot give every block the same total (same lanes, same order).
//
// An iteration at n = 1e5 is a chain of latencies, not work (clock64 probes, NOTES.md), so
// the code keeps the chain short: a thread's points stay in registers where one step of the
// grid covers them; every warp issues all its loads before its first sum (block sums and
// totals); and the barrier counts arrivals without ever resetting, so arriving is one
// release reduction.

#ifndef DIM
#define DIM 2
#endif
#ifndef KC
#define KC 5
#endif
#define RBLOCK 128
#define RWARPS (RBLOCK / 32)
#define POINTS 8  // points per thread per step, loaded before any is used (bytes in flight)
#define SLOTS (KC * (DIM + 1))
#define COPIES 32  // one per lane of the warp that sums them
#define MINE ((SLOTS + RWARPS - 1) / RWARPS)  // slots a warp sums: warp, warp + RWARPS, ...

static_assert(SLOTS * (RBLOCK + 1) * 8 + KC * DIM * 12 <= 48 * 1024, "the accumulator columns and centroids must fit in 48 KB");

__device__ __forceinline__ double warp_sum_f64(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// A grid barrier. The launch is cooperative, so every block is resident and the spin cannot
// wait on a block that never started. *arrivals only ever grows: in iteration it, once it
// holds (it + 1) x gridDim every block has arrived. So arriving is one reduction with release
// semantics (after __syncthreads, thread 0 publishes its whole block's atomics: PTX fences are
// cumulative) and waiting is an acquire load, with no generation to read first and no reset.
// A counter and generation, the older form, measured 1.6 us a barrier against 1.0 us for this.
__device__ __forceinline__ void grid_barrier(unsigned long long* arrivals, unsigned long long target) {
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("red.release.gpu.global.add.u64 [%0], 1;" : : "l"(arrivals) : "memory");
    unsigned long long seen;
    do {
      asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(seen) : "l"(arrivals) : "memory");
    } while (seen < target);
  }
  __syncthreads();
}

__device__ __forceinline__ void load_point(const float* __restrict__ x, long long i, float (&p)[DIM]) {
#if DIM == 2
  const float2 v = reinterpret_cast<const float2*>(x)[i];
  p[0] = v.x;
  p[1] = v.y;
#elif DIM == 4
  const float4 v = reinterpret_cast<const float4*>(x)[i];
  p[0] = v.x;
  p[1] = v.y;
  p[2] = v.z;
  p[3] = v.w;
#else
#pragma unroll
  for (int j = 0; j < DIM; ++j) p[j] = x[i * DIM + j];
#endif
}

__device__ __forceinline__ void load_points(const float* __restrict__ x, long long n, long long base,
                                            float (&p)[POINTS][DIM]) {
#pragma unroll
  for (int q = 0; q < POINTS; ++q) {
    const long long i = base + (long long)q * RBLOCK + threadIdx.x;
    load_point(x, i < n ? i : n - 1, p[q]);  // clamped: the extra point is skipped by its user
  }
}

__device__ __forceinline__ int nearest(const float (&p)[DIM], const float* c32) {
  int best = 0;
  float best_distance = 3.402823466e+38f;
#pragma unroll
  for (int c = 0; c < KC; ++c) {
    float distance = 0.0f;
#pragma unroll
    for (int j = 0; j < DIM; ++j) {
      const float diff = p[j] - c32[c * DIM + j];
      distance = fmaf(diff, diff, distance);
    }
    if (distance < best_distance) {
      best_distance = distance;
      best = c;
    }
  }
  return best;
}

// One step of the grid: each of this thread's POINTS points (in p, from base) added to its own
// column of its nearest centroid's slots; under the tolerance rule (labels) its label kept.
// Returns how many of its points changed cluster. WHOLE: the caller knows every point of the
// step lies below n. Without that promise the compiler may sink each point's load past the
// check before its use, which leaves one load in flight where there were eight: the columns
// kernel ran at a third of the resident kernel's speed so (0.65 against 0.22 ms, 1e8 x 2, k = 3).
template <bool WHOLE>
__device__ __forceinline__ unsigned add_points(const float (&p)[POINTS][DIM], long long n, long long base,
                                               const float* c32, double* column, int* __restrict__ labels) {
  const int tid = threadIdx.x;
  unsigned changes = 0;
#pragma unroll
  for (int q = 0; q < POINTS; ++q) {
    const long long i = base + (long long)q * RBLOCK + tid;
    if (!WHOLE && i >= n) break;  // no warp-wide operation here: lanes may leave
    const int best = nearest(p[q], c32);
    double* slot = &column[best * (DIM + 1) * RBLOCK + tid];
#pragma unroll
    for (int j = 0; j < DIM; ++j) slot[j * RBLOCK] += (double)p[q][j];
    slot[DIM * RBLOCK] += 1.0;
    if (labels != nullptr) {
      const int old = labels[i];
      if (old != best) {
        labels[i] = best;
        ++changes;
      }
    }
  }
  return changes;
}

// The block's totals, after a __syncthreads: warp w sums the columns of slots w, w + RWARPS,
// ... (all its loads issued before its first sum; a fixed order); lane 0 holds them in mine.
__device__ __forceinline__ void block_totals(const double* column, double (&mine)[MINE]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int j = 0; j < MINE; ++j) {
    const int s = warp + j * RWARPS;
    mine[j] = 0.0;
    if (s < SLOTS) {
#pragma unroll
      for (int t = 0; t < RBLOCK; t += 32) mine[j] += column[s * RBLOCK + t + lane];
    }
  }
#pragma unroll
  for (int j = 0; j < MINE; ++j) mine[j] = warp_sum_f64(mine[j]);
}

// centroids: in, the shifted float64 start; out, the shifted float64 result.
// labels == nullptr: the iterations rule (no labels kept); otherwise the tolerance rule stops
// after the first iteration in which at most stop_limit (= tol * n) points changed cluster.
extern "C" __global__ void __launch_bounds__(RBLOCK, 4) resident(
    const float* __restrict__ x, long long n, double* __restrict__ centroids, double* __restrict__ partial,
    unsigned long long* __restrict__ changed, unsigned long long* __restrict__ arrivals, int* __restrict__ labels,
    int iterations, double stop_limit, int* __restrict__ done) {
  __shared__ double column[SLOTS * RBLOCK];
  __shared__ double c64[KC * DIM];
  __shared__ float c32[KC * DIM];
  __shared__ double total[SLOTS];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  for (int t = tid; t < KC * DIM; t += RBLOCK) {
    c64[t] = centroids[t];
    c32[t] = (float)c64[t];
  }
  const long long first = (long long)blockIdx.x * RBLOCK * POINTS;
  const long long stride = (long long)gridDim.x * RBLOCK * POINTS;
  const bool held = n <= stride;  // one step of the grid covers every point: keep them
  float p[POINTS][DIM];
  if (held) load_points(x, n, first, p);
  __syncthreads();
  int it = 0;
  while (it < iterations) {
    const int buffer = it % 3;
#pragma unroll
    for (int s = 0; s < SLOTS; ++s) column[s * RBLOCK + tid] = 0.0;
    unsigned changes = 0;
    for (long long base = first; base < n; base += stride) {
      if (!held) load_points(x, n, base, p);
      changes += add_points<false>(p, n, base, c32, column, labels);
    }
    __syncthreads();
    double mine[MINE];
    block_totals(column, mine);
    if (lane == 0) {
#pragma unroll
      for (int j = 0; j < MINE; ++j) {
        const int s = warp + j * RWARPS;
        if (s < SLOTS && mine[j] != 0.0) atomicAdd(&partial[(buffer * SLOTS + s) * COPIES + blockIdx.x % COPIES], mine[j]);
      }
    }
    if (labels != nullptr) {
      const unsigned warp_changes = __reduce_add_sync(0xffffffffu, changes);
      if (lane == 0 && warp_changes) atomicAdd(&changed[buffer], (unsigned long long)warp_changes);
    }
    grid_barrier(arrivals, (unsigned long long)(it + 1) * gridDim.x);
    // Every block computes the same centroids from the same totals (read past L1: __ldcg), with
    // every load of a warp issued before its first sum.
#pragma unroll
    for (int j = 0; j < MINE; ++j) {
      const int s = warp + j * RWARPS;
      mine[j] = s < SLOTS ? __ldcg(&partial[(buffer * SLOTS + s) * COPIES + lane]) : 0.0;
    }
#pragma unroll
    for (int j = 0; j < MINE; ++j) mine[j] = warp_sum_f64(mine[j]);
    if (lane == 0) {
#pragma unroll
      for (int j = 0; j < MINE; ++j)
        if (warp + j * RWARPS < SLOTS) total[warp + j * RWARPS] = mine[j];
    }
    __syncthreads();
    for (int t = tid; t < KC * DIM; t += RBLOCK) {
      const int c = t / DIM, j = t % DIM;
      const double count = total[c * (DIM + 1) + DIM];
      if (count > 0.0) {
        c64[t] = total[c * (DIM + 1) + j] / count;
        c32[t] = (float)c64[t];
      }
    }
    if (blockIdx.x == 0) {
      const int spare = (it + 2) % 3;
      for (int s = tid; s < SLOTS * COPIES; s += RBLOCK) partial[spare * SLOTS * COPIES + s] = 0.0;
      if (tid == 0) changed[spare] = 0ull;
    }
    ++it;
    const bool stop = labels != nullptr && (double)__ldcg(&changed[buffer]) <= stop_limit;
    __syncthreads();
    if (stop) break;  // the same decision in every block: the same totals were read
  }
  if (blockIdx.x == 0) {
    for (int t = tid; t < KC * DIM; t += RBLOCK) centroids[t] = c64[t];
    if (tid == 0) *done = it;
  }
}

// One pass of the same accumulation, where each pass's sums must be seen before the centroids
// are made (a shard of several GPUs, whose sums are all-reduced first; a streamed chunk):
// no grid barrier and no update here. The block's totals are added into sums, k x (DIM + 1)
// float64 with the counts last (lowd.cu's layout, whose `finish` makes the centroids), and
// the changed count into *changed. centroids: the k x DIM float32 centroids of this pass.
// lowd.cu's small_k kernel, one warp shuffle sum per cluster and dimension for every 32
// points, was bound by those shuffles at 1e9 points (6.3 ms an iteration against 2.2 ms here).
extern "C" __global__ void __launch_bounds__(RBLOCK, 4) columns(
    const float* __restrict__ x, long long n, const float* __restrict__ centroids, double* __restrict__ sums,
    int* __restrict__ labels, unsigned long long* __restrict__ changed) {
  __shared__ double column[SLOTS * RBLOCK];
  __shared__ float c32[KC * DIM];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  for (int t = tid; t < KC * DIM; t += RBLOCK) c32[t] = centroids[t];
#pragma unroll
  for (int s = 0; s < SLOTS; ++s) column[s * RBLOCK + tid] = 0.0;
  __syncthreads();
  const long long step = (long long)RBLOCK * POINTS, stride = gridDim.x * step;
  unsigned changes = 0;
  float p[POINTS][DIM];
  long long base = blockIdx.x * step;
  for (; base + step <= n; base += stride) {  // whole steps: no bounds to check
    load_points(x, n, base, p);
    changes += add_points<true>(p, n, base, c32, column, labels);
  }
  if (base < n) {  // the one step of this block that n cuts short
    load_points(x, n, base, p);
    changes += add_points<false>(p, n, base, c32, column, labels);
  }
  __syncthreads();
  double mine[MINE];
  block_totals(column, mine);
  if (lane == 0) {
#pragma unroll
    for (int j = 0; j < MINE; ++j) {
      const int s = warp + j * RWARPS;
      if (s < SLOTS && mine[j] != 0.0) atomicAdd(&sums[s], mine[j]);
    }
  }
  if (labels != nullptr) {
    const unsigned warp_changes = __reduce_add_sync(0xffffffffu, changes);
    if (lane == 0 && warp_changes) atomicAdd(changed, (unsigned long long)warp_changes);
  }
}
