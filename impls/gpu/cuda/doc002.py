"""cuda-002: document 002's CUDA k-means (double precision, convergence flag) as a CuPy
RawModule. The kernels and where they differ from the document are described in doc002.cu.

Each iteration is four launches: assign_reduce, two reduce_partials passes, update. With the
tolerance rule the host reads the changed counter after every iteration and stops, as the
document's loop read its managed flag after a device synchronisation: that wait is part of
the algorithm and stays inside the timed region. With the iterations rule nothing is read
back until the end. Times are CUDA events around the loop; compile and upload are setup.
"""

from __future__ import annotations

import numpy as np

from kmbench.errors import ImplementationError
from kmbench.protocol import Problem, Result, stop_done
from kmbench.protocol.timing import CudaEventRegion, host_region

from . import HERE, GpuImplementation
from .sources import with_local_includes

SHARED_MAX_K = 1024  # as in doc002.cu
GROUP = 32  # partial rows each first-pass block reduces
BLOCK = 256


class Cuda002(GpuImplementation):
    name = "cuda-002"
    row_order = 90
    ranked_in_reports = True
    label = "CUDA (document 002)"
    description = ("double precision, struct of arrays, one point per thread, per-block partial "
                   "sums, two reduction passes, changed counter read each iteration")
    source = "002 (CUDA k-means report), the parallel algorithm"
    dtype = "float64"

    def __init__(self, block_size: int = BLOCK, blocks_per_sm: int = 8):
        self.block_size = block_size
        self.blocks_per_sm = blocks_per_sm
        self._info: dict = {}

    def follows_tolerance(self, tol: float) -> bool:
        return True

    def check(self, problem: Problem) -> None:
        if problem.d != 2:
            raise ImplementationError(f"{self.name} handles d = 2 only (document 002's layout); got d = {problem.d}")
        if self.block_size % 32 or not 32 <= self.block_size <= 1024:
            raise ImplementationError(f"block size must be a multiple of 32 from 32 to 1024; got {self.block_size}")
        if problem.k > 2**31 - 1:
            raise ImplementationError(f"{self.name} indexes clusters with int; k = {problem.k} is too many")

    def prepare(self, problem: Problem) -> None:
        import cupy

        self.check(problem)
        phases: dict[str, float] = {}
        with host_region(phases, "compile"):
            module = cupy.RawModule(code=with_local_includes(HERE / "doc002.cu"), options=("-std=c++17",))
            self._assign = module.get_function("assign_reduce")
            self._reduce = module.get_function("reduce_partials")
            self._update = module.get_function("update_centroids")
        sms = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["multiProcessorCount"]
        n, k = problem.n, problem.k
        self._blocks = int(max(1, min((n + self.block_size - 1) // self.block_size, sms * self.blocks_per_sm)))
        self._middle = (self._blocks + GROUP - 1) // GROUP
        with host_region(phases, "upload"):
            data = np.asarray(problem.data, dtype=np.float64)
            self._x = cupy.asarray(np.ascontiguousarray(data[:, 0]))
            self._y = cupy.asarray(np.ascontiguousarray(data[:, 1]))
            self._membership = cupy.empty(n, dtype=cupy.int32)
            self._cx = cupy.empty(k, dtype=cupy.float64)
            self._cy = cupy.empty(k, dtype=cupy.float64)
            rows = self._blocks + self._middle + 1
            self._px = cupy.zeros(rows * k, dtype=cupy.float64)
            self._py = cupy.zeros(rows * k, dtype=cupy.float64)
            self._pc = cupy.zeros(rows * k, dtype=cupy.uint64)
            self._changed = cupy.zeros(1, dtype=cupy.uint64)
            self._changed_host = cupy.cuda.alloc_pinned_memory(8)
            cupy.cuda.Device().synchronize()
        self._setup = phases
        self._info = {"block_size": self.block_size, "blocks": self._blocks, "middle_rows": self._middle,
                      "accumulate": "shared" if k <= SHARED_MAX_K else "global", "cupy": cupy.__version__}

    def _rows(self, first: int, count: int, k: int):
        return (self._px[first * k:(first + count) * k], self._py[first * k:(first + count) * k],
                self._pc[first * k:(first + count) * k])

    def _iterate(self, n, k) -> None:
        blocks, middle = self._blocks, self._middle
        level1, level2, level3 = (self._rows(0, blocks, k), self._rows(blocks, middle, k),
                                  self._rows(blocks + middle, 1, k))
        if k > SHARED_MAX_K:  # partials accumulated in global memory start from zero
            for part in level1:
                part.fill(0)
        shared = 3 * k * 8 if k <= SHARED_MAX_K else 0
        self._assign((blocks,), (self.block_size,),
                     (self._x, self._y, np.int64(n), self._cx, self._cy, np.int32(k), self._membership,
                      *level1, self._changed), shared_mem=shared)
        self._reduce((middle,), (self.block_size,), (*level1, np.int32(blocks), np.int32(GROUP), np.int32(k), *level2))
        self._reduce((1,), (self.block_size,), (*level2, np.int32(middle), np.int32(middle), np.int32(k), *level3))
        self._update(((k + 255) // 256,), (256,), (self._cx, self._cy, *level3, np.int32(k)))

    def run(self, problem: Problem) -> Result:
        import cupy

        n, k = problem.n, problem.k
        start = np.asarray(problem.initial_centroids, dtype=np.float64)
        self._cx.set(np.ascontiguousarray(start[:, 0]))
        self._cy.set(np.ascontiguousarray(start[:, 1]))
        self._membership.fill(-1)  # no cluster yet: every point changes in the first iteration
        changed_view = np.frombuffer(self._changed_host, dtype=np.uint64, count=1)
        phases: dict[str, float] = {}
        done = 0
        region = CudaEventRegion()
        with region:
            for done in range(1, problem.iterations + 1):
                if problem.tol is not None:
                    self._changed.fill(0)
                self._iterate(n, k)
                if problem.tol is not None:
                    self._changed.data.copy_to_host_async(changed_view.ctypes.data, 8)
                    cupy.cuda.get_current_stream().synchronize()
                    if stop_done(int(changed_view[0]), n, problem.tol):
                        break
        phases["iterate"] = region.seconds()
        with host_region(phases, "download"):
            centroids = np.stack([cupy.asnumpy(self._cx), cupy.asnumpy(self._cy)], axis=1)
        return Result(centroids=centroids, iterations=done, phases=phases)

    def release(self) -> None:
        for name in ("_x", "_y", "_membership", "_cx", "_cy", "_px", "_py", "_pc", "_changed", "_changed_host"):
            self.__dict__.pop(name, None)

    def bytes_per_iteration(self, problem: Problem) -> int:
        # x and y read (double), membership read and written (int32).
        return problem.n * (2 * 8 + 2 * 4)

    def fp32_per_distance(self, problem: Problem) -> float | None:
        return None  # double precision: the FP32 issue rate is not its ceiling
