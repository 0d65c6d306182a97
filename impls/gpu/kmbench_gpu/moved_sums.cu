// kmbench-gpu's tensor path: an iteration's float64 sums from the rows whose label changed, where
// few did (issue 50, item 2; NOTES.md). The next sums are the last ones, plus each row that came
// into a cluster, minus each row that left it. A row that kept its label costs its 8 bytes of
// labels; one that moved, its 4 d bytes and 2 d float64 atomics. The sort and the sums over every
// row (update.cu) read all n x d floats again: at 1e6 x 128, k = 1,024 on an H200, 186-198 us a
// step against 13-17 us once under 0.5% of the rows move (f08c955:bench/moved_rows.py).
//
// Launch order, inside an iteration's update (update.py), all on the device so that the run's
// CUDA graph holds them: `moved` cleared, count_moved, choose_sums, update.cu's sort kernels (which
// return where from_moved is 1), moved_sums, then finish with keep = 1: the sums and counts then
// always hold the last labels' totals. In the first iteration every row moved (its `previous`
// label is -1), so it sorts, unless MOVED_MOST is 1: then every row is added to the sums that
// start() zeroed, which is the same total.

// Rows whose label differs from the last iteration's, added to *moved (and to *changed, the
// tolerance rule's counter, where track).
extern "C" __global__ void count_moved(const int* __restrict__ labels, const int* __restrict__ previous, long long n,
                                       unsigned long long* __restrict__ moved, unsigned long long* __restrict__ changed,
                                       int track) {
  unsigned long long mine = 0;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    mine += labels[i] != previous[i];
  for (int offset = 16; offset > 0; offset >>= 1) mine += __shfl_down_sync(0xffffffffu, mine, offset);
  if ((threadIdx.x & 31) == 0 && mine) {
    atomicAdd(moved, mine);
    if (track) atomicAdd(changed, mine);
  }
}

// The iteration's choice, made alike by every block from *moved: from the moved rows where at most
// `most` moved (from_moved = 1, and one more step counted in *moved_steps), else by the sort, whose
// sums start from zero, so the blocks clear sums and counts.
extern "C" __global__ void choose_sums(const unsigned long long* __restrict__ moved, long long most,
                                       int* __restrict__ from_moved, unsigned long long* __restrict__ moved_steps,
                                       double* __restrict__ sums, int* __restrict__ counts, int k, int d) {
  const bool incremental = *moved <= (unsigned long long)most;
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    *from_moved = incremental;
    if (incremental) *moved_steps += 1;
  }
  if (incremental) return;
  const long long cells = (long long)k * d;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < cells; i += (long long)gridDim.x * blockDim.x)
    sums[i] = 0.0;
  for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < k; j += (long long)gridDim.x * blockDim.x)
    counts[j] = 0;
}

// Each warp takes 32 consecutive rows: their new and old labels read coalesced, a ballot of those
// that moved, then moved row by moved row the lanes stride over its d coordinates, adding each to
// its new cluster's sums and taking it from its old one's, in float64. Counts move by one each way.
// previous[] takes the new labels in either mode (after a sort too, the next step compares with
// them); a row with no old label (-1) is only added.
extern "C" __global__ void moved_sums(const float* __restrict__ x, int d, const int* __restrict__ labels,
                                      int* __restrict__ previous, long long n, double* __restrict__ sums,
                                      int* __restrict__ counts, const int* __restrict__ from_moved) {
  const bool incremental = *from_moved;
  const int lane = threadIdx.x & 31;
  const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
  for (long long base = warp * 32; base < n; base += warps * 32) {
    const long long i = base + lane;
    const int now = i < n ? labels[i] : -1;
    const int was = i < n ? previous[i] : -1;
    const bool changed = i < n && now != was;
    unsigned int mask = __ballot_sync(0xffffffffu, changed);
    if (changed) previous[i] = now;
    if (!incremental) continue;
    if (changed) {
      atomicAdd(&counts[now], 1);
      if (was >= 0) atomicSub(&counts[was], 1);
    }
    while (mask) {
      const int source = __ffs(mask) - 1;
      mask &= mask - 1;
      const int to = __shfl_sync(0xffffffffu, now, source);
      const int from = __shfl_sync(0xffffffffu, was, source);
      const float* row = x + (base + source) * d;
      for (int a = lane; a < d; a += 32) {
        const double value = (double)row[a];
        atomicAdd(&sums[(long long)to * d + a], value);
        if (from >= 0) atomicAdd(&sums[(long long)from * d + a], -value);
      }
    }
  }
}
