"""resident (d <= 8 and k * (d + 1) <= 40): resident.cu runs the whole run in one cooperative
launch, one grid barrier per iteration, per-thread float64 accumulators in shared memory. The
kernel decides both stop rules itself and counts its own iterations, so the host waits once.
Distances are direct."""

from __future__ import annotations

import numpy as np

from impls.gpu.kmbench_gpu.strategies.base import Strategy, blocks, source
from impls.gpu.kmbench_gpu.strategies.lowd import SMALL_DIM, TILED_MAX_DIM
from kmbench.errors import ImplementationError
from kmbench.protocol import Problem, Result
from kmbench.protocol.timing import CudaEventRegion, host_region

RESIDENT_SLOTS = 40  # k * (d + 1) float64 columns of 128 threads: 40 of the 48 KB of static shared memory
RESIDENT_BLOCK, RESIDENT_POINTS, RESIDENT_BLOCKS_PER_SM, RESIDENT_COPIES = 128, 8, 4, 32  # as in resident.cu


def blocks_per_sm(kernel) -> int:
    """Blocks of a resident.cu kernel (compiled, 128 threads a block) one SM holds: the
    occupancy the driver reports, since __launch_bounds__ asks only for at least
    RESIDENT_BLOCKS_PER_SM. Each block keeps eight points a thread in flight, so the blocks an
    SM holds are the bytes in flight that a pass over the data needs."""
    from cupy.cuda import driver

    try:
        held = driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.kernel.ptr, RESIDENT_BLOCK, 0)
    except AttributeError:  # an older CuPy without the occupancy call
        held = RESIDENT_BLOCKS_PER_SM
    if held < 1:
        raise ImplementationError("the resident kernel does not fit on one SM of this GPU")
    return int(held)


class Resident(Strategy):
    name = "resident"
    max_dim = TILED_MAX_DIM
    whole_run = True
    graph = False  # one launch already
    launch = "one cooperative launch per run"
    block_size = RESIDENT_BLOCK
    points = RESIDENT_POINTS
    distance = "direct"

    @classmethod
    def limits(cls, problem: Problem) -> None:
        super().limits(problem)
        if problem.k * (problem.d + 1) > RESIDENT_SLOTS or problem.d > SMALL_DIM:
            raise ImplementationError(f"strategy resident handles d <= {SMALL_DIM} and k * (d + 1) <= "
                                      f"{RESIDENT_SLOTS}")

    def compile(self) -> None:
        import cupy

        module = cupy.RawModule(code=source("resident.cu"),
                                options=("-std=c++17", f"-DDIM={self.d}", f"-DKC={self.k}"))
        self.kernel = module.get_function("resident")
        self.kernel.compile()  # here, not inside the timed region

    def grid(self, n: int) -> int:
        """Eight points per thread, so a small problem meets at the barrier with few blocks; at
        most what the GPU holds at once, which the barrier requires."""
        return blocks(n, RESIDENT_BLOCK * RESIDENT_POINTS, self.sms * blocks_per_sm(self.kernel))

    def allocate(self, x, changed, labels: bool = True) -> None:
        """The float64 centroids the kernel reads and writes, its labels, and its three partial
        buffers, barrier counter and iteration count."""
        import cupy

        super().allocate(x, changed, labels)
        k, d = self.k, self.d
        self.labels = cupy.full(self.n, -1, dtype=cupy.int32)
        self.centroids64 = cupy.empty((k, d), dtype=cupy.float64)
        self.partial = cupy.zeros(3 * k * (d + 1) * RESIDENT_COPIES, dtype=cupy.float64)
        self.changed3 = cupy.zeros(3, dtype=cupy.uint64)
        self.arrivals = cupy.zeros(1, dtype=cupy.uint64)
        self.done = cupy.zeros(1, dtype=cupy.int32)

    def run(self, problem: Problem, start, shift) -> Result:
        """The whole run from the centred float64 start; the answer shifted back by `shift`."""
        import cupy

        self.centroids64.set(start)
        for buffer in (self.partial, self.changed3, self.arrivals, self.done):
            buffer.fill(0)
        track = problem.tol is not None
        if track:
            self.labels.fill(-1)
        args = (self.x, np.int64(problem.n), self.centroids64, self.partial, self.changed3, self.arrivals,
                self.labels if track else np.uint64(0), np.int32(problem.iterations),
                np.float64(problem.tol * problem.n if track else -1.0), self.done)
        cupy.cuda.Device().synchronize()
        phases: dict[str, float] = {}
        region = CudaEventRegion()
        with region:
            try:  # cooperative: the driver refuses a grid the GPU cannot hold at once
                self.kernel.kernel((self.blocks, 1, 1), (RESIDENT_BLOCK, 1, 1), args, enable_cooperative_groups=True)
            except TypeError:  # an older CuPy: the grid is sized to fit (grid) all the same
                self.kernel((self.blocks,), (RESIDENT_BLOCK,), args)
        phases["iterate"] = region.seconds()
        with host_region(phases, "download"):
            centroids = cupy.asnumpy(self.centroids64) + shift.astype(np.float64)
            done = int(self.done.get()[0])
        return Result(centroids=centroids, iterations=done, phases=phases)
