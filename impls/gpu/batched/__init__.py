"""Batched k-means (document 003) on the GPU: the document's design in CUDA C
(block_per_row.cu) and in Numba CUDA (numba_kernel.py), and kmbench's own
(warp_per_row.cu). The data and every row's seeds are uploaded in `prepare`; `run` times
the one kernel launch that computes every row with CUDA events; the download of the best
centroids, inertia, seed and iterations is its own phase.

Limits, checked before launch: K * D <= 64 (each thread holds its centroids in registers),
K <= 255 (labels are bytes in the document's design), seeds <= 1024 (one block), <= 32 for
kmbench's warp per row, and the row (and the document's labels) in shared memory.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from impls.gpu.cuda import GpuImplementation, cuda_status
from kmbench.tasks.batched import BatchedProblem, BatchedResult
from kmbench.errors import ImplementationError
from kmbench.protocol.timing import host_region

HERE = Path(__file__).resolve().parent
MAX_KD = 64
DEFAULT_SHARED = 48 * 1024
ROWS_PER_BLOCK = 4  # warp_per_row: 4 rows (128 threads) per block


def _document_design_shared_bytes(problem: BatchedProblem) -> int:
    """Document 003's block per row: the row, each seed's inertia and final centroids (floats),
    and each seed's byte labels for every point."""
    _, points, d = problem.data.shape
    seeds = problem.seeds
    return 4 * (points * d + seeds + seeds * problem.k * d) + seeds * points


def _epsilon(problem: BatchedProblem) -> np.float32:
    return np.float32(-1.0 if problem.epsilon is None else problem.epsilon)


class BatchedGpu(GpuImplementation):
    """Shared checks, upload, download; subclasses compile and launch."""

    tasks = ("batched",)
    dtype = "float32"
    max_seeds = 1024

    def shared_bytes(self, problem: BatchedProblem) -> int:
        raise NotImplementedError

    def check(self, problem: BatchedProblem) -> None:
        rows, points, d = problem.data.shape
        k, seeds = problem.k, problem.seeds
        if k * d > MAX_KD or k > 255:
            raise ImplementationError(f"{self.name} holds k x d <= {MAX_KD} values per seed (k <= 255); got {k} x {d}")
        if not 1 <= seeds <= self.max_seeds:
            raise ImplementationError(f"{self.name} runs 1 to {self.max_seeds} seeds per row; got {seeds}")
        import cupy

        limit = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["sharedMemPerBlockOptin"]
        if self.shared_bytes(problem) > limit:
            raise ImplementationError(f"{self.name} needs {self.shared_bytes(problem)} bytes of shared memory per "
                                      f"block for rows of {points} points; this GPU has {limit}")

    def _upload(self, problem: BatchedProblem, phases: dict) -> None:
        import cupy

        rows, _, d = problem.data.shape
        with host_region(phases, "upload"):
            self._data = cupy.asarray(np.ascontiguousarray(problem.data, dtype=np.float32))
            self._starts = cupy.asarray(np.ascontiguousarray(problem.initial_centroids, dtype=np.float32))
            self._centroids = cupy.empty((rows, problem.k, d), dtype=cupy.float32)
            self._inertia = cupy.empty(rows, dtype=cupy.float32)
            self._best = cupy.empty(rows, dtype=cupy.int32)
            self._iterations = cupy.empty((rows, problem.seeds), dtype=cupy.int32)
            cupy.cuda.Device().synchronize()

    def _download(self, phases: dict) -> BatchedResult:
        import cupy

        with host_region(phases, "download"):
            return BatchedResult(cupy.asnumpy(self._centroids).astype(np.float64),
                                 cupy.asnumpy(self._inertia).astype(np.float64),
                                 cupy.asnumpy(self._best).astype(np.int64),
                                 cupy.asnumpy(self._iterations).astype(np.int64))

    def release(self) -> None:
        for name in ("_views", "_data", "_starts", "_centroids", "_inertia", "_best", "_iterations"):
            self.__dict__.pop(name, None)


class BatchedRawKernel(BatchedGpu):
    """A CuPy RawModule kernel templated on (K, D[, ROWS])."""

    source_file = ""

    def kernel_name(self, problem: BatchedProblem) -> str:
        raise NotImplementedError

    def grid(self, problem: BatchedProblem) -> tuple[int, int]:
        raise NotImplementedError

    def arguments(self, problem: BatchedProblem) -> tuple:
        raise NotImplementedError

    def prepare(self, problem: BatchedProblem) -> None:
        import cupy

        self.check(problem)
        phases: dict[str, float] = {}
        name = self.kernel_name(problem)
        with host_region(phases, "compile"):
            module = cupy.RawModule(code=(HERE / self.source_file).read_text(), options=("-std=c++17",),
                                    name_expressions=[name])
            self._kernel = module.get_function(name)
            shared = self.shared_bytes(problem)
            if shared > DEFAULT_SHARED:
                self._kernel.max_dynamic_shared_size_bytes = shared
        self._upload(problem, phases)
        self._setup = phases
        blocks, threads = self.grid(problem)
        self._info = {"kernel": name, "blocks": blocks, "threads_per_block": threads,
                      "shared_bytes": self.shared_bytes(problem), "cupy": cupy.__version__}

    def run(self, problem: BatchedProblem) -> BatchedResult:
        from kmbench.protocol.timing import CudaEventRegion

        phases: dict[str, float] = {}
        blocks, threads = self.grid(problem)
        region = CudaEventRegion()
        with region:
            self._kernel((blocks,), (threads,), self.arguments(problem), shared_mem=self.shared_bytes(problem))
        phases["iterate"] = region.seconds()
        result = self._download(phases)
        self.phases = phases
        return result


class BatchedCudaC(BatchedRawKernel):
    name = "batched-cuda-c"
    row_order = 330
    label = "CUDA C, block per row (003's design)"
    description = "one block per row, one thread per seed, row and byte labels in shared memory, two passes per iteration"
    source = "003 (batched k-means), its CUDA C design"
    source_file = "block_per_row.cu"

    def shared_bytes(self, problem):
        return _document_design_shared_bytes(problem)

    def kernel_name(self, problem):
        return f"batched_block_per_row<{problem.k}, {problem.data.shape[2]}>"

    def grid(self, problem):
        return problem.rows, problem.seeds

    def arguments(self, problem):
        _, points, _ = problem.data.shape
        return (self._data, self._starts, np.int32(points), np.int32(problem.seeds), np.int32(problem.iterations),
                _epsilon(problem), self._centroids, self._inertia, self._best, self._iterations)


class BatchedKmbench(BatchedRawKernel):
    name = "batched-kmbench"
    row_order = 340
    label = "kmbench batched (warp per row)"
    description = "one warp per row, a lane per seed, 4 rows per block; one fused pass per iteration, sums in registers"
    source = "kmbench's own (issue: batched k-means)"
    source_file = "warp_per_row.cu"
    max_seeds = 32

    def shared_bytes(self, problem):
        _, points, d = problem.data.shape
        return 4 * ROWS_PER_BLOCK * points * d

    def kernel_name(self, problem):
        return f"batched_warp_per_row<{problem.k}, {problem.data.shape[2]}, {ROWS_PER_BLOCK}>"

    def grid(self, problem):
        return (problem.rows + ROWS_PER_BLOCK - 1) // ROWS_PER_BLOCK, 32 * ROWS_PER_BLOCK

    def arguments(self, problem):
        rows, points, _ = problem.data.shape
        return (self._data, self._starts, np.int32(rows), np.int32(points), np.int32(problem.seeds),
                np.int32(problem.iterations), _epsilon(problem), self._centroids, self._inertia, self._best,
                self._iterations)


def _numpy_aliases_for_numba() -> None:
    """numba-cuda releases that still register np.row_stack fail on NumPy 2.3+, where it was
    removed (it was always an alias of np.vstack). Restore the alias, only where missing."""
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack


class BatchedNumba(BatchedGpu):
    name = "batched-numba"
    row_order = 320
    label = "Numba CUDA, block per row (003's design)"
    description = "document 003's design written with numba.cuda: block per row, thread per seed, shared memory"
    source = "003 (batched k-means), its Numba design"

    def available(self):
        ready, why = cuda_status()
        if not ready:
            return ready, why
        _numpy_aliases_for_numba()
        try:
            from numba import cuda
        except ImportError:
            return False, "Numba is not installed (pip install numba numba-cuda)"
        try:
            if not cuda.is_available():
                return False, "Numba sees no CUDA GPU (numba-cuda missing, or the driver too old for it)"
        except Exception as exc:
            return False, f"Numba's CUDA target failed: {exc}"
        return True, ""

    def shared_bytes(self, problem):
        return _document_design_shared_bytes(problem)

    def check(self, problem):
        super().check(problem)
        if self.shared_bytes(problem) > DEFAULT_SHARED:
            raise ImplementationError(f"{self.name}: Numba's static shared arrays stop at 48 KiB per block; "
                                      f"rows of {problem.data.shape[1]} points with {problem.seeds} seeds need "
                                      f"{self.shared_bytes(problem)} bytes")

    def prepare(self, problem: BatchedProblem) -> None:
        _numpy_aliases_for_numba()
        import numba
        from numba import cuda

        from impls.gpu.batched.numba_kernel import build

        self.check(problem)
        phases: dict[str, float] = {}
        self._upload(problem, phases)
        # Numba views of the CuPy buffers, made once: wrapping them at every launch costs
        # host time that the events would count.
        self._views = [cuda.as_cuda_array(array) for array in (self._data, self._starts, self._centroids,
                                                               self._inertia, self._best, self._iterations)]
        with host_region(phases, "compile"):
            self._kernel = build(problem.k, problem.data.shape[2], problem.data.shape[1], problem.seeds)
            self._launch(problem)  # Numba compiles at the first launch
            cuda.synchronize()
        self._setup = phases
        self._info = {"blocks": problem.rows, "threads_per_block": problem.seeds, "numba": numba.__version__}

    def _launch(self, problem: BatchedProblem) -> None:
        data, starts, centroids, inertia, best, iterations = self._views
        self._kernel[problem.rows, problem.seeds](data, starts, np.int32(problem.iterations), _epsilon(problem),
                                                  centroids, inertia, best, iterations)

    def run(self, problem: BatchedProblem) -> BatchedResult:
        from numba import cuda

        phases: dict[str, float] = {}
        start, end = cuda.event(timing=True), cuda.event(timing=True)
        start.record()
        self._launch(problem)
        end.record()
        end.synchronize()
        phases["iterate"] = cuda.event_elapsed_time(start, end) / 1000.0
        result = self._download(phases)
        self.phases = phases
        return result
