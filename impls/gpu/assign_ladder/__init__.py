"""Document 001's assignment-kernel ladder, one CUDA source per step (V1-V6), and kmbench's
own fastest assignment pass; CuPy RawModules, data resident on the GPU.

Each step changes one thing (the comment at the top of each source says what):

    V1 local-memory point, late previous label, atomics   v1_local.cu
    V2 previous label loaded before the search           v2_prefetch.cu
    V3 dimension as a template parameter                  v3_template.cu
    V4 four points per thread                             v4_four_points.cu
    V5 clusters unrolled (k as a template parameter)      v5_unroll_clusters.cu
    V6 no atomic on the changed flag                      v6_no_atomic.cu
    kmbench: vector loads, one flag store per block       fastest.cu
    (the floor: the same bytes, no search)                floor.cu

Timing: one pass is a few microseconds, less than a Python launch costs, so `prepare`
captures LAUNCHES back-to-back launches of the pass into one CUDA graph, and `run` times
the graph between CUDA events and divides by LAUNCHES. Every launch reads the same inputs
and writes the same labels (the previous labels are a separate array), so the last
launch's labels are the answer. The per-pass time so includes the gap between two kernels
of a graph (well under a microsecond); document 001 quotes Nsight Compute's kernel duration.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from impls.gpu.cuda import GpuImplementation
from impls.gpu.cuda.sources import with_local_includes
from kmbench.tasks.assign import AssignProblem, AssignResult
from kmbench.errors import ImplementationError
from kmbench.protocol.timing import CudaEventRegion, host_region

HERE = Path(__file__).resolve().parent
BLOCK = 256
LAUNCHES = 100
MAX_DIM = 16  # V1 and V2 hold the point in an array of this length
UNROLL = 4  # points per thread from V4 on
TEMPLATE_K = 16  # V5, V6 and the fastest pass unroll over exactly this many clusters


class AssignCuda(GpuImplementation):
    """Shared adapter: compile one step's kernel, upload, capture, time, download."""

    tasks = ("assign",)
    dtype = "float32"
    source_file = ""
    step = ""  # the ladder's step, for tables
    points_per_thread = 1
    templated_dim = False
    templated_k = False
    kernel = ""  # the kernel's name; {d}, {k} and {unroll} are filled in for templates

    def kernel_name(self, d: int, k: int) -> str:
        return self.kernel.format(d=d, k=k, unroll=UNROLL)

    def check(self, problem: AssignProblem) -> None:
        if problem.n >= 2**31 - UNROLL * BLOCK:
            raise ImplementationError(f"{self.name} indexes points with int: n must be below 2^31")
        if not self.templated_dim and problem.data.shape[1] > MAX_DIM:
            raise ImplementationError(f"{self.name} handles d <= {MAX_DIM}; got d = {problem.data.shape[1]}")
        if self.templated_k and problem.k != TEMPLATE_K:
            raise ImplementationError(f"{self.name} is compiled for k = {TEMPLATE_K} (document 001's); got k = {problem.k}")

    def prepare(self, problem: AssignProblem) -> None:
        import cupy

        self.check(problem)
        n, d, k = problem.n, problem.data.shape[1], problem.k
        phases: dict[str, float] = {}
        name = self.kernel_name(d, k)
        with host_region(phases, "compile"):
            module = cupy.RawModule(code=with_local_includes(HERE / self.source_file), options=("-std=c++17",),
                                    name_expressions=[name] if "<" in name else None)
            self._kernel = module.get_function(name)
        with host_region(phases, "upload"):
            self._data = cupy.asarray(np.ascontiguousarray(problem.data, dtype=np.float32))
            self._centroids = cupy.asarray(np.ascontiguousarray(problem.centroids, dtype=np.float32))
            self._previous = cupy.asarray(np.asarray(problem.previous, dtype=np.int32))
            self._labels = cupy.full(n, -1, dtype=cupy.int32)
            self._changed = cupy.zeros(1, dtype=cupy.int32)
            cupy.cuda.Device().synchronize()
        per_block = BLOCK * self.points_per_thread
        self._blocks = (n + per_block - 1) // per_block
        self._shared = 0 if self.source_file in ("fastest.cu", "floor.cu") else k * d * 4
        self._args = (self._data, self._centroids, self._previous, self._labels, self._changed,
                      np.int32(n), np.int32(d), np.int32(k))
        self._stream = cupy.cuda.Stream(non_blocking=True)
        with host_region(phases, "capture"), self._stream:
            self._stream.begin_capture()
            try:
                for _ in range(LAUNCHES):
                    self.launch_once()
            finally:
                self._graph = self._stream.end_capture()
        self._setup = phases
        self._info = {"kernel": name, "source": self.source_file, "block_size": BLOCK, "blocks": self._blocks,
                      "points_per_thread": self.points_per_thread, "launches_per_timing": LAUNCHES,
                      "cupy": cupy.__version__}

    def launch_once(self) -> None:
        """One pass on the current stream (the graph's node; alone, for a profiler)."""
        self._kernel((self._blocks,), (BLOCK,), self._args, shared_mem=self._shared)

    def run(self, problem: AssignProblem) -> AssignResult:
        import cupy

        phases: dict[str, float] = {}
        with self._stream:
            self._changed.fill(0)
            region = CudaEventRegion()
            with region:
                self._graph.launch(self._stream)
            phases["iterate"] = region.seconds() / LAUNCHES
            with host_region(phases, "download"):
                labels = cupy.asnumpy(self._labels).astype(np.int64)
                changed = bool(int(self._changed.get()[0]))
        self.phases = phases
        return AssignResult(labels, changed)

    def release(self) -> None:
        for name in ("_graph", "_args", "_data", "_centroids", "_previous", "_labels", "_changed"):
            self.__dict__.pop(name, None)

    def reference_floor(self, problem: AssignProblem) -> float:
        """The floor under every step: see `floor_seconds` (kmbench.tasks.tasks shows it)."""
        return floor_seconds(problem)

    def bytes_per_pass(self, problem: AssignProblem) -> int:
        """Points read, previous labels read, labels written (int32), each once."""
        return problem.n * (problem.data.shape[1] * 4 + 4 + 4)


class AssignV1(AssignCuda):
    name, step, source_file = "assign-v1", "V1", "v1_local.cu"
    row_order = 360
    label = "V1 local memory"
    description = "one thread per point; point in a local-memory array; previous label loaded late; atomics"
    source = "001, V1 (LocalMemory)"
    kernel = "assign_v1"


class AssignV2(AssignV1):
    name, step, source_file = "assign-v2", "V2", "v2_prefetch.cu"
    row_order = 370
    label = "V2 previous label early"
    description = "V1 with the previous label loaded before the search"
    source = "001, V2 (prefetched membership)"
    kernel = "assign_v2"


class AssignV3(AssignCuda):
    name, step, source_file = "assign-v3", "V3", "v3_template.cu"
    row_order = 380
    label = "V3 dimension templated"
    description = "V2 with d a template parameter: the point in registers"
    source = "001, V3 (template and unrolling)"
    templated_dim = True
    kernel = "assign_v3<{d}>"


class AssignV4(AssignCuda):
    name, step, source_file = "assign-v4", "V4", "v4_four_points.cu"
    row_order = 390
    label = "V4 four points per thread"
    description = "V3 with four points per thread, a grid stride apart"
    source = "001, V4 (2^n unroll, 4 best)"
    templated_dim = True
    points_per_thread = UNROLL
    kernel = "assign_v4<{d}, {unroll}>"


class AssignV5(AssignV4):
    name, step, source_file = "assign-v5", "V5", "v5_unroll_clusters.cu"
    row_order = 400
    label = "V5 clusters unrolled"
    description = "V4 with k a template parameter: the cluster loop unrolled"
    source = "001, V5 (further unrolling)"
    templated_k = True
    kernel = "assign_v5<{d}, {unroll}, {k}>"


class AssignV6(AssignV5):
    name, step, source_file = "assign-v6", "V6", "v6_no_atomic.cu"
    row_order = 410
    label = "V6 no atomics"
    description = "V5 with the changed flag stored, not added atomically"
    source = "001, V6 (atomic removed)"
    kernel = "assign_v6<{d}, {unroll}, {k}>"


class AssignFastest(AssignCuda):
    name, step, source_file = "assign-kmbench", "kmbench", "fastest.cu"
    row_order = 420
    label = "kmbench assign"
    description = "4 consecutive points per thread by 16-byte loads, labels by int4, one flag store per block"
    source = "kmbench's own (issue: the assignment-kernel ladder)"
    templated_dim = True
    points_per_thread = 4
    max_k = 256  # the unrolled argmin's code grows with k

    def check(self, problem):
        super().check(problem)
        if not 1 <= problem.k <= self.max_k:
            raise ImplementationError(f"{self.name} unrolls over k: 1 <= k <= {self.max_k}; got k = {problem.k}")

    kernel = "assign_fast<{d}, {k}>"


class StreamFloor(AssignCuda):
    """Not an implementation: the same bytes as a pass and no search (floor.cu); its labels
    are not nearest centroids. `floor_seconds` times it as the steps are timed."""

    name, source_file = "assign-floor", "floor.cu"
    templated_dim = True
    points_per_thread = 4
    kernel = "stream_floor<{d}>"


def floor_seconds(problem: AssignProblem, repeats: int = 5) -> float:
    """Per-pass seconds of the floor kernel on this problem: the best of `repeats` graphs."""
    floor = StreamFloor()
    floor.prepare(problem)
    try:
        floor.run(problem)  # warm-up
        times = []
        for _ in range(repeats):
            floor.run(problem)
            times.append(floor.phases["iterate"])
        return min(times)
    finally:
        floor.release()


LADDER = (AssignV1, AssignV2, AssignV3, AssignV4, AssignV5, AssignV6, AssignFastest)
