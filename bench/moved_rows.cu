// Issue 50, item 2, as a prototype (bench/moved_rows.py): the tensor path's float64 sums updated
// from only the rows whose label changed, instead of sorting every row by cluster and reading
// it again (update.cu's histogram, scan, block_scatter, segment_sums).
//
// Each warp takes 32 consecutive rows: a coalesced read of their new and old labels, a ballot of
// the rows that moved, and then, moved row by moved row, the warp's lanes stride over its d
// coordinates, adding each to the new cluster's sums and subtracting it from the old one's in
// float64. A row that kept its label costs its 8 bytes of labels; one that moved, its 4 d bytes
// and 2 d atomics. Counts move by one each way; previous[] takes the new labels (the tolerance
// rule keeps them anyway). A row with no old label (-1, the first iteration) is only added.
extern "C" __global__ void moved_sums(const float* __restrict__ x, int d, const int* __restrict__ labels,
                                      int* __restrict__ previous, long long n, double* __restrict__ sums,
                                      int* __restrict__ counts, unsigned long long* __restrict__ moved) {
  const int lane = threadIdx.x & 31;
  const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
  for (long long base = warp * 32; base < n; base += warps * 32) {
    const long long i = base + lane;
    const int now = i < n ? labels[i] : -1;
    const int was = i < n ? previous[i] : -1;
    const bool changed = i < n && now != was;
    unsigned int mask = __ballot_sync(0xffffffffu, changed);
    if (changed) {
      previous[i] = now;
      atomicAdd(&counts[now], 1);
      if (was >= 0) atomicSub(&counts[was], 1);
    }
    if (lane == 0 && mask) atomicAdd(moved, (unsigned long long)__popc(mask));
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
