"""CUDA versions 1-3 of document 000 as CuPy RawModules, data resident on the GPU.

Timing: the data are uploaded once in `prepare`, and the whole loop of iterations is
captured once into a CUDA graph there (set KMBENCH_CUDA_GRAPH=0 for plain launches).
Each `run` copies the initial centroids (tiny), records a CUDA event, launches the graph
(or queues every iteration's kernels) with no host synchronisation, records a second
event, and only then waits; the download of the centroids is its own phase. Compilation,
upload and capture are the setup phase, outside the timed region.

Limits, checked before any launch: d = 2 (document 000's struct-of-arrays layout),
1 <= k <= MAX_K (the means staged in shared memory), n <= INT_POINTS_LIMIT, block sizes 1..1024.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from kmbench.errors import ImplementationError
from kmbench.protocol import Implementation, Problem, Result
from kmbench.protocol.device import cuda_status
from kmbench.protocol.timing import CudaEventRegion, host_region

from .sources import with_local_includes

HERE = Path(__file__).resolve().parent
MAX_K = 4096  # 2 * 4096 floats = 32 KiB of staged means, under the 48 KiB default
DEFAULT_BLOCK = 256
INT_POINTS_LIMIT = 2**31 - 1 - 1024 * 8  # the last block's indices must not overflow int


class GpuImplementation(Implementation):
    """What every CuPy-backed row shares: it runs where CuPy sees a GPU, and reports the build
    info and setup phases its `prepare` recorded (in `_info` and `_setup`)."""

    _info: dict = {}
    on_gpus = "one"

    def available(self):
        return cuda_status()

    def build_info(self) -> dict:
        return dict(self._info)

    def setup_phases(self) -> dict[str, float]:
        return dict(getattr(self, "_setup", {}))


class CudaLloyd(GpuImplementation):
    """Shared adapter: checks, compilation, upload, the event-timed loop, download."""

    source_file = ""
    kernels: tuple[str, ...] = ()
    dtype = "float32"
    defines: tuple[str, ...] = ()  # extra -D options for this version's source

    default_block = DEFAULT_BLOCK

    def __init__(self, block_size: int | None = None, source_dir: Path | None = None):
        self.block_size = int(block_size or os.environ.get("KMBENCH_CUDA_BLOCK", self.default_block))
        self.source_dir = Path(source_dir) if source_dir else HERE
        self.use_graph = os.environ.get("KMBENCH_CUDA_GRAPH", "1") != "0"
        self._module = None
        self._info: dict = {}

    def check(self, problem: Problem) -> None:
        """A clear error before any launch for what the kernels do not handle."""
        if problem.d != 2:
            raise ImplementationError(f"{self.name} handles d = 2 only (document 000's layout); got d = {problem.d}")
        if not 1 <= problem.k <= MAX_K:
            raise ImplementationError(f"{self.name} handles 1 <= k <= {MAX_K}; got k = {problem.k}")
        if problem.n > INT_POINTS_LIMIT:
            raise ImplementationError(f"{self.name} indexes points with int: n must be <= {INT_POINTS_LIMIT}")
        if not 1 <= self.block_size <= 1024:
            raise ImplementationError(f"block size must be 1..1024; got {self.block_size}")

    def prepare(self, problem: Problem) -> None:
        import cupy

        self.check(problem)
        phases: dict[str, float] = {}
        with host_region(phases, "compile"):
            source = with_local_includes(self.source_dir / self.source_file)
            options = ("-std=c++17", *self.defines)
            self._module = cupy.RawModule(code=source, options=options)
            self._functions = {name: self._module.get_function(name) for name in self.kernels}
        self._stream = cupy.cuda.Stream(non_blocking=True)
        with self._stream, host_region(phases, "upload"):
            data = np.asarray(problem.data, dtype=np.float32)
            self._x = cupy.asarray(np.ascontiguousarray(data[:, 0]))
            self._y = cupy.asarray(np.ascontiguousarray(data[:, 1]))
            self._allocate(problem)
            self._stream.synchronize()
        self._blocks = self.grid_blocks(problem.n)
        self._graph, self._graph_iterations = None, problem.iterations
        if self.use_graph:
            with host_region(phases, "capture"):
                self._graph = self._capture(problem)
        self._setup = phases
        self._info = {"block_size": self.block_size, "blocks": self._blocks, "defines": list(self.defines),
                      "launch": "cuda graph" if self.use_graph else "stream", "cupy": cupy.__version__}

    def grid_blocks(self, n: int) -> int:
        return (n + self.block_size - 1) // self.block_size

    def _capture(self, problem: Problem):
        """Record the whole loop once as a graph; replays launch it in one call."""
        n, k = np.int32(problem.n), np.int32(problem.k)
        with self._stream:
            self._stream.begin_capture()
            try:
                for _ in range(problem.iterations):
                    self.iterate(n, k)
            finally:
                graph = self._stream.end_capture()
        return graph

    def _allocate(self, problem: Problem) -> None:
        """The means; versions add the buffers their kernels need."""
        import cupy

        self._means_x = cupy.empty(problem.k, dtype=cupy.float32)
        self._means_y = cupy.empty(problem.k, dtype=cupy.float32)

    def iterate(self, n: int, k: int) -> None:
        """Queue one Lloyd iteration's kernels."""
        raise NotImplementedError

    def run(self, problem: Problem) -> Result:
        import cupy

        phases: dict[str, float] = {}
        start = np.asarray(problem.initial_centroids, dtype=np.float32)
        n, k = np.int32(problem.n), np.int32(problem.k)
        with self._stream:
            self._means_x.set(np.ascontiguousarray(start[:, 0]))
            self._means_y.set(np.ascontiguousarray(start[:, 1]))
            self._reset()
            region = CudaEventRegion()
            with region:
                if self._graph is not None and problem.iterations == self._graph_iterations:
                    # (a graph holds the iterations it was captured with; the judge's one-step runs launch plainly)
                    self._graph.launch(self._stream)
                else:
                    for _ in range(problem.iterations):
                        self.iterate(n, k)
            phases["iterate"] = region.seconds()
            with host_region(phases, "download"):
                centroids = np.stack([cupy.asnumpy(self._means_x), cupy.asnumpy(self._means_y)], axis=1)
        return Result(centroids=centroids.astype(np.float64), iterations=problem.iterations, phases=phases)

    def _reset(self) -> None:
        """Clear what a run must start from zero (before the timed region)."""

    def release(self) -> None:
        for name in ("_graph", "_x", "_y", "_means_x", "_means_y", "_sums_x", "_sums_y", "_counts",
                     "_partial_x", "_partial_y", "_partial_count"):
            self.__dict__.pop(name, None)

    def bytes_per_iteration(self, problem: Problem) -> int:
        return problem.n * 2 * 4  # x and y, float32, each read once; means and sums are tiny

    def fp32_per_distance(self, problem: Problem) -> float:
        # Direct 2-D distance: two subtractions, a multiply, an FMA, and the compare (FSETP).
        return 5.0


class CudaV1(CudaLloyd):
    name = "cuda-v1"
    row_order = 60
    ranked_in_reports = True
    label = "Our CUDA"
    description = "one thread per point, means from global memory, atomicAdd sums and counts"
    source = "000, section CUDA (first version)"
    source_file = "v1_atomic.cu"
    kernels = ("assign_atomic", "update_means")
    assign_kernel = "assign_atomic"
    shared_means = False

    def _allocate(self, problem: Problem) -> None:
        import cupy

        super()._allocate(problem)
        self._sums_x = cupy.zeros(problem.k, dtype=cupy.float32)
        self._sums_y = cupy.zeros(problem.k, dtype=cupy.float32)
        self._counts = cupy.zeros(problem.k, dtype=cupy.int32)

    def _reset(self) -> None:
        """update_means clears the accumulators after each iteration; this clears them
        before the first."""
        self._sums_x.fill(0)
        self._sums_y.fill(0)
        self._counts.fill(0)

    def iterate(self, n, k):
        shared = 2 * int(k) * 4 if self.shared_means else 0
        self._functions[self.assign_kernel](
            (self._blocks,), (self.block_size,),
            (self._x, self._y, n, self._means_x, self._means_y, k, self._sums_x, self._sums_y, self._counts),
            shared_mem=shared)
        self._functions["update_means"](((int(k) + 255) // 256,), (256,),
                                        (self._means_x, self._means_y, self._sums_x, self._sums_y, self._counts, k))


class CudaV2(CudaV1):
    name = "cuda-v2"
    row_order = 70
    ranked_in_reports = True
    label = "Our CUDA (2)"
    description = "v1 with the means staged in shared memory"
    source = "000, section CUDA (second version, shared memory)"
    source_file = "v2_shared.cu"
    kernels = ("assign_shared", "update_means")
    assign_kernel = "assign_shared"
    shared_means = True


class CudaV3(CudaLloyd):
    name = "cuda-v3"
    row_order = 80
    ranked_in_reports = True
    label = "Our CUDA (3)"
    description = "assignment fused with per-block per-cluster tree reduction, then a coarse reduction; no atomics"
    source = "000, section CUDA (third version, fine + coarse reduction)"
    source_file = "v3_reduce.cu"
    kernels = ("fine_reduce", "coarse_reduce")
    coarse_threads = 1024  # COARSE_THREADS in v3_reduce.cu
    default_block = 128  # NOTES.md, change 3: the sweep's best at n = 1e7 for k = 5 and 100

    def __init__(self, block_size: int | None = None, source_dir: Path | None = None,
                 points_per_thread: int | None = None):
        super().__init__(block_size, source_dir)
        # 16 points per thread measured fastest; their 104 registers fit blocks of up to
        # 512 threads, so a 1024-thread block takes 8 points (64 registers, no spills).
        self.points_per_thread = int(points_per_thread or (16 if self.block_size <= 512 else 8))
        self.max_threads = 1024 if self.points_per_thread <= 8 else 512
        self.defines = (f"-DPOINTS_PER_THREAD={self.points_per_thread}",
                        f"-DFINE_MAX_THREADS={self.max_threads}")

    def check(self, problem: Problem) -> None:
        super().check(problem)
        if self.block_size > self.max_threads:
            raise ImplementationError(
                f"{self.name} with {self.points_per_thread} points per thread takes blocks of at most "
                f"{self.max_threads} threads; got {self.block_size}")

    def grid_blocks(self, n: int) -> int:
        per_block = self.block_size * self.points_per_thread
        return (n + per_block - 1) // per_block

    def _allocate(self, problem: Problem) -> None:
        import cupy

        super()._allocate(problem)
        blocks = self.grid_blocks(problem.n)
        self._partial_x = cupy.empty(problem.k * blocks, dtype=cupy.float32)
        self._partial_y = cupy.empty(problem.k * blocks, dtype=cupy.float32)
        self._partial_count = cupy.empty(problem.k * blocks, dtype=cupy.int32)

    def iterate(self, n, k):
        # Nothing to clear between runs: every iteration overwrites every partial.
        self._functions["fine_reduce"](
            (self._blocks,), (self.block_size,),
            (self._x, self._y, n, self._means_x, self._means_y, k,
             self._partial_x, self._partial_y, self._partial_count),
            shared_mem=2 * int(k) * 4)
        self._functions["coarse_reduce"](
            (int(k),), (self.coarse_threads,),
            (self._partial_x, self._partial_y, self._partial_count, np.int32(self._blocks),
             self._means_x, self._means_y))
