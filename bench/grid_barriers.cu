// Three grid barriers, `iterations` of them in one cooperative launch and nothing else, for
// `python3 bench/kmbench_gpu_experiments.py barriers` (impls/gpu/kmbench_gpu/NOTES.md):
// MODE 0, a counter and a generation (resident.cu before issue 32's low-d round): read the
// generation, arrive with an acquire-release atomic, the last to arrive resets the counter and
// moves the generation; MODE 1, cooperative groups' grid.sync(); MODE 2, resident.cu's own
// grid_barrier (included, so this times the kernel's code, not a copy of it): a counter that
// only grows. Compile with -I impls/gpu/kmbench_gpu.
#include <cooperative_groups.h>

#include "resident.cu"

__device__ __forceinline__ unsigned long long load_acquire(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

extern "C" __global__ void barriers(unsigned long long* counter, int iterations) {
  for (int it = 0; it < iterations; ++it) {
#if MODE == 0
    __syncthreads();
    if (threadIdx.x == 0) {
      const unsigned long long generation = load_acquire(counter + 1);
      unsigned long long arrived;
      asm volatile("atom.add.acq_rel.gpu.global.u64 %0, [%1], 1;" : "=l"(arrived) : "l"(counter) : "memory");
      if (arrived == gridDim.x - 1ull) {
        asm volatile("st.relaxed.gpu.global.u64 [%0], 0;" : : "l"(counter) : "memory");
        asm volatile("red.release.gpu.global.add.u64 [%0], 1;" : : "l"(counter + 1) : "memory");
      } else {
        while (load_acquire(counter + 1) == generation) {
        }
      }
    }
    __syncthreads();
#elif MODE == 1
    cooperative_groups::this_grid().sync();
#else
    grid_barrier(counter, (it + 1ull) * gridDim.x);
#endif
  }
}
