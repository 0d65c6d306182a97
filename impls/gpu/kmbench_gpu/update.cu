// kmbench-gpu's tensor-core path: the update step from labels, without serialising on hot
// clusters. The points are ordered by cluster (a counting sort: histogram, scan, scatter), then
// each block sums a run of CHUNK consecutive sorted points in float64, one dimension per
// thread, and adds a cluster's partial once per run with a float64 atomic: about
// (n / CHUNK + k) * d atomics per iteration instead of n * d, however the points are spread.
// finish turns the sums into centroids and leaves what the next assignment reads: float32
// centroids, their half norms, and the two maxima of the TF32 error bound (bound.py).
//
// Launch order per iteration: histogram, scan, scatter (block_scatter where k fits in shared
// memory), segment_sums, finish. scan also
// resets what the next assignment counts (flagged points) and what finish maximises. A streamed
// iteration runs histogram, chunk_scan, scatter, segment_sums per chunk, then finish once.
//
// Where an iteration's sums may come from the rows that changed cluster instead (moved_sums.cu),
// the sort's kernels read a flag the GPU sets for that iteration, `from_moved`, and return at once
// where it is 1 (scan still clears its counters): the choice is made on the device, inside the
// run's CUDA graph. Elsewhere they are given a flag that stays 0.

#define CHUNK 256          // sorted points per block of segment_sums
#define SCAN_THREADS 1024  // scan is one block

// Points per cluster, from shared-memory histograms where k fits (hot clusters meet in
// shared memory, not in global atomics); with track, counts labels that differ from the
// previous iteration's and keeps these as the previous.
extern "C" __global__ void histogram(const int* __restrict__ labels, long long n, int k, int* __restrict__ counts,
                                     int shared_k, int* __restrict__ previous, unsigned long long* __restrict__ changed,
                                     int track, const int* __restrict__ from_moved) {
  if (*from_moved) return;
  extern __shared__ int local[];
  const bool in_shared = shared_k > 0;
  if (in_shared)
    for (int j = threadIdx.x; j < k; j += blockDim.x) local[j] = 0;
  __syncthreads();
  unsigned long long moved = 0;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const int label = labels[i];
    if (in_shared) atomicAdd(&local[label], 1);
    else atomicAdd(&counts[label], 1);
    if (track) {
      moved += previous[i] != label;
      previous[i] = label;
    }
  }
  if (track) {
    for (int offset = 16; offset > 0; offset >>= 1) moved += __shfl_down_sync(0xffffffffu, moved, offset);
    if ((threadIdx.x & 31) == 0 && moved) atomicAdd(changed, moved);
  }
  __syncthreads();
  if (in_shared)
    for (int j = threadIdx.x; j < k; j += blockDim.x)
      if (local[j]) atomicAdd(&counts[j], local[j]);
}

// One block (SCAN_THREADS threads): exclusive prefix sums of counts[0..k) into starts and
// cursor (scatter consumes the cursor).
__device__ void exclusive_scan(const int* __restrict__ counts, int k, int* __restrict__ starts,
                               int* __restrict__ cursor) {
  __shared__ int partial[SCAN_THREADS];
  const int per = (k + SCAN_THREADS - 1) / SCAN_THREADS;
  const int first = threadIdx.x * per;
  const int last = min(first + per, k);
  int own = 0;
  for (int j = first; j < last; ++j) own += counts[j];
  partial[threadIdx.x] = own;
  __syncthreads();
  for (int offset = 1; offset < SCAN_THREADS; offset <<= 1) {  // Hillis-Steele, inclusive
    const int add = threadIdx.x >= offset ? partial[threadIdx.x - offset] : 0;
    __syncthreads();
    partial[threadIdx.x] += add;
    __syncthreads();
  }
  int running = partial[threadIdx.x] - own;
  for (int j = first; j < last; ++j) {
    starts[j] = running;
    cursor[j] = running;
    running += counts[j];
  }
}

// Adds the re-checked points of this pass to the run's total and clears the counters: two, side
// by side (tensor_path.listed_counts), the points scanned tile by tile and those listed with
// their candidates.
__device__ void count_flagged(unsigned int* __restrict__ listed_counts, unsigned long long* __restrict__ flagged_total) {
  if (threadIdx.x == 0) {
    *flagged_total += (unsigned long long)listed_counts[0] + listed_counts[1];
    listed_counts[0] = 0u;
    listed_counts[1] = 0u;
  }
}

// The counts' prefix sums; also resets the flagged-point counter after adding it to the run's
// total, and the bound's maxima that finish will fill.
extern "C" __global__ void scan(const int* __restrict__ counts, int k, int* __restrict__ starts, int* __restrict__ cursor,
                                unsigned int* __restrict__ listed_counts, unsigned long long* __restrict__ flagged_total,
                                float* __restrict__ bound_max, const int* __restrict__ from_moved) {
  if (!*from_moved) exclusive_scan(counts, k, starts, cursor);  // one flag for the whole block
  count_flagged(listed_counts, flagged_total);
  if (threadIdx.x == 0) {
    bound_max[0] = 0.0f;
    bound_max[1] = 0.0f;
  }
}

// scan for one chunk of a streamed iteration (stream.py): the chunk's counts are added to the
// iteration's totals, which finish reads, and cleared for the next chunk. The bound's maxima
// stay: the next chunk's assignment reads them; the iteration resets them once, before finish.
extern "C" __global__ void chunk_scan(int* __restrict__ counts, int k, int* __restrict__ starts, int* __restrict__ cursor,
                                      int* __restrict__ totals, unsigned int* __restrict__ listed_counts,
                                      unsigned long long* __restrict__ flagged_total) {
  exclusive_scan(counts, k, starts, cursor);
  // Each thread clears only the counts it read itself, so no barrier is needed.
  const int per = (k + SCAN_THREADS - 1) / SCAN_THREADS;
  for (int j = threadIdx.x * per; j < min((int)threadIdx.x * per + per, k); ++j) {
    totals[j] += counts[j];
    counts[j] = 0;
  }
  count_flagged(listed_counts, flagged_total);
}

// order[] lists the points cluster by cluster. Lanes of a warp with the same label take
// their places with one atomic (the leader's), so a hot cluster costs an atomic per warp.
extern "C" __global__ void scatter(const int* __restrict__ labels, long long n, int* __restrict__ cursor,
                                   int* __restrict__ order, const int* __restrict__ from_moved) {
  if (*from_moved) return;
  for (long long base = (long long)blockIdx.x * blockDim.x; base < n; base += (long long)gridDim.x * blockDim.x) {
    const long long i = base + threadIdx.x;
    const bool live = i < n;
    const unsigned int active = __ballot_sync(0xffffffffu, live);
    if (!live) continue;
    const int label = labels[i];
    const unsigned int same = __match_any_sync(active, label);
    const int leader = __ffs(same) - 1;
    const int lane = threadIdx.x & 31;
    int slot = 0;
    if (lane == leader) slot = atomicAdd(&cursor[label], __popc(same));
    slot = __shfl_sync(same, slot, leader);
    order[slot + __popc(same & ((1u << lane) - 1u))] = (int)i;
  }
}

// The same order where k counters fit in shared memory: each block takes a contiguous range of
// points, counts its labels in shared memory, reserves each label's places with one global
// atomic, then places its points from shared cursors. One global atomic per (block, label)
// instead of one per (warp, label): random labels at k = 1,024 left scatter with about one per
// point, serialised on k cursors.
extern "C" __global__ void block_scatter(const int* __restrict__ labels, long long n, int k, long long per_block,
                                         int* __restrict__ cursor, int* __restrict__ order,
                                         const int* __restrict__ from_moved) {
  if (*from_moved) return;
  extern __shared__ int local[];
  const long long first = (long long)blockIdx.x * per_block;
  const long long last = first + per_block < n ? first + per_block : n;
  for (int j = threadIdx.x; j < k; j += blockDim.x) local[j] = 0;
  __syncthreads();
  for (long long i = first + threadIdx.x; i < last; i += blockDim.x) atomicAdd(&local[labels[i]], 1);
  __syncthreads();
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    const int mine = local[j];
    if (mine) local[j] = atomicAdd(&cursor[j], mine);
  }
  __syncthreads();
  for (long long i = first + threadIdx.x; i < last; i += blockDim.x) order[atomicAdd(&local[labels[i]], 1)] = (int)i;
}

// Each block sums CHUNK consecutive points of order[], one dimension per thread, in float64,
// flushing to sums[cluster] whenever the cluster changes along the run. The loads of IN_FLIGHT
// points are issued before any is added: with one at a time, a thread waited a whole memory
// latency per point and the kernel read the points at a fraction of the copy bandwidth.
#define IN_FLIGHT 8
extern "C" __global__ void segment_sums(const float* __restrict__ x, int d, const int* __restrict__ order,
                                        const int* __restrict__ labels, long long n, double* __restrict__ sums,
                                        const int* __restrict__ from_moved) {
  if (*from_moved) return;
  __shared__ int rows[CHUNK];
  __shared__ int owner[CHUNK];
  const long long first = (long long)blockIdx.x * CHUNK;
  const int count = (int)min((long long)CHUNK, n - first);
  for (int p = threadIdx.x; p < count; p += blockDim.x) {
    rows[p] = order[first + p];
    owner[p] = labels[rows[p]];
  }
  __syncthreads();
  for (int dim = threadIdx.x; dim < d; dim += blockDim.x) {
    int cluster = owner[0];
    double total = 0.0;
    for (int base = 0; base < count; base += IN_FLIGHT) {
      float values[IN_FLIGHT];
#pragma unroll
      for (int q = 0; q < IN_FLIGHT; ++q)
        values[q] = base + q < count ? x[(long long)rows[base + q] * d + dim] : 0.0f;
#pragma unroll
      for (int q = 0; q < IN_FLIGHT; ++q) {
        if (base + q >= count) break;
        if (owner[base + q] != cluster) {
          atomicAdd(&sums[(long long)cluster * d + dim], total);
          cluster = owner[base + q];
          total = 0.0;
        }
        total += (double)values[q];
      }
    }
    atomicAdd(&sums[(long long)cluster * d + dim], total);
  }
}

// A float32 value rounded to the nearest TF32 value, ties away from zero (bound.to_tf32).
__device__ __forceinline__ float round_to_tf32(float value) {
  return __uint_as_float((__float_as_uint(value) + 0x1000u) & 0xFFFFE000u);
}

// One block per cluster: the new float64 centroid (an empty cluster keeps its own), its
// float32 copy, that copy rounded to TF32 (what the tensor cores read), its half norm (float64
// sum, rounded once), and the bound's maxima: the largest centroid norm rounded up and the
// largest half norm. Clears the sums and the count it read, unless `keep`: where the next
// iteration's sums start from these (moved_sums.cu).
extern "C" __global__ void finish(double* __restrict__ sums, int* __restrict__ counts, int k, int d,
                                  double* __restrict__ centroids64, float* __restrict__ centroids,
                                  float* __restrict__ centroids_tf32, float* __restrict__ half_norms,
                                  float* __restrict__ bound_max, int keep) {
  __shared__ double partial[32];
  const int j = blockIdx.x;
  const int members = counts[j];
  double square = 0.0;
  for (int dim = threadIdx.x; dim < d; dim += blockDim.x) {
    const long long at = (long long)j * d + dim;
    double value = centroids64[at];
    if (members > 0) value = sums[at] / (double)members;
    if (!keep) sums[at] = 0.0;
    centroids64[at] = value;
    const float single = (float)value;
    centroids[at] = single;
    centroids_tf32[at] = round_to_tf32(single);
    square += (double)single * (double)single;
  }
  for (int offset = 16; offset > 0; offset >>= 1) square += __shfl_down_sync(0xffffffffu, square, offset);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = square;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) total += partial[w];
    const float half = __double2float_rn(0.5 * total);
    half_norms[j] = half;
    if (!keep) counts[j] = 0;
    // Non-negative floats order like their bit patterns, so an integer max is a float max.
    atomicMax((int*)&bound_max[0], __float_as_int(__double2float_ru(sqrt(total))));
    atomicMax((int*)&bound_max[1], __float_as_int(half));
  }
}

// ---------------------------------------------------------------- the re-check's list
// The points the TF32 pass could not certify, ordered by their TF32 winner before the re-check:
// points with one winner have nearly the same candidates, so a block of the re-check meets few
// centroid tiles that hold one (recheck_kernels.py). The list's length is read on the device
// (the launches sit in the run's CUDA graph). Launch order: flagged_histogram, flagged_scan,
// flagged_scatter; flagged_scan leaves the counts at zero for the next iteration.

extern "C" __global__ void flagged_histogram(const int* __restrict__ labels, const int* __restrict__ flagged,
                                             const unsigned int* __restrict__ flagged_count, int* __restrict__ counts) {
  const unsigned int count = *flagged_count;
  for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x)
    atomicAdd(&counts[labels[flagged[i]]], 1);
}

extern "C" __global__ void flagged_scan(int* __restrict__ counts, int k, int* __restrict__ starts,
                                        int* __restrict__ cursor) {
  exclusive_scan(counts, k, starts, cursor);
  __syncthreads();
  for (int j = threadIdx.x; j < k; j += blockDim.x) counts[j] = 0;
}

extern "C" __global__ void flagged_scatter(const int* __restrict__ labels, const int* __restrict__ flagged,
                                           const float* __restrict__ limits,
                                           const unsigned int* __restrict__ flagged_count, int* __restrict__ cursor,
                                           int* __restrict__ sorted, float* __restrict__ sorted_limits) {
  const unsigned int count = *flagged_count;
  for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
    const int point = flagged[i];
    const int slot = atomicAdd(&cursor[labels[point]], 1);
    sorted[slot] = point;
    sorted_limits[slot] = limits[i];
  }
}
