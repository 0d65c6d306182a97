"""kmbench-gpu: our own exact FP32 Lloyd on the GPU, any n, d and k; the strategy is chosen
from (n, d, k). NOTES.md beside this file has the byte and instruction counts.

- The data are shifted once, in prepare, by their float32 mean (computed in float64): every
  coordinate the kernels see is of the order of the spread, so neither the distances nor the
  sums lose precision when the data sit far from the origin. Centroids are kept in float64
  for the answer and in float32 for the kernels; sums that cross blocks are float64.
- Strategies, one module each under strategies/ (resident.cu and lowd.cu for d <= 32; above,
  tensor cores through Triton where it is installed, else cuBLAS through CuPy): resident,
  small-k, tiled, tensor and gemm. strategies/__init__.py picks one, in one place; this adapter
  does what every strategy shares (checks, the upload, the graph, the timed loop and its stop
  rule, the download) and asks the chosen one for the rest.
- resident decides both stop rules on the GPU. Otherwise, with the iterations rule the whole
  run is one CUDA graph (captured in prepare) where the strategy allows it; with the tolerance
  rule the host reads the changed counter after each iteration.
"""

from __future__ import annotations

import os

import numpy as np

from impls.gpu.cuda import GpuImplementation
# Besides what the adapter uses, the names that tests, stream.py, kmbench_gpu_dask.py, yinyang,
# triton_fused and bench/ import from impls.gpu.kmbench_gpu; each has its home in a strategy module.
from impls.gpu.kmbench_gpu.strategies import (KINDS, STRATEGIES, Strategy, choose, kind_of, make, pass_strategy,  # noqa: F401
                                   strategy)
from impls.gpu.kmbench_gpu.strategies.base import BLOCK, BLOCKS_PER_SM  # noqa: F401
from impls.gpu.kmbench_gpu.strategies.base import SOURCES as HERE  # noqa: F401
from impls.gpu.kmbench_gpu.strategies.gemm import GEMM_ROWS  # noqa: F401
from impls.gpu.kmbench_gpu.strategies.lowd import (DIRECT_MAX_DIM, PRUNE_MAX_DIM, SMALL_DIM, TILED_MAX_DIM,  # noqa: F401
                                        points_per_thread, tiled_distance, tiled_pruning)
from impls.gpu.kmbench_gpu.strategies.resident import (RESIDENT_BLOCK, RESIDENT_BLOCKS_PER_SM, RESIDENT_COPIES,  # noqa: F401
                                            RESIDENT_POINTS, RESIDENT_SLOTS)
from impls.gpu.kmbench_gpu.strategies.small_k import SMALL_K  # noqa: F401
from kmbench.errors import ImplementationError
from kmbench.protocol import Problem, Result, stop_done
from kmbench.protocol.ceilings import matmul_precision as _matmul_precision
from kmbench.protocol.timing import CudaEventRegion, host_region

MAX_K = 1 << 20


def column_sums(x, blocks: int = 4096):
    """float64 sums of a CuPy array's columns, in `blocks` slabs of rows and then across them:
    CuPy's sum down axis 0 of a tall array took 0.24 s at 1e7 x 128 on an H200, this 2.5 ms."""
    import cupy

    n, d = x.shape
    whole = n - n % blocks
    slabs = x[:whole].reshape(blocks, -1, d).sum(axis=1, dtype=cupy.float64).sum(axis=0) if whole else 0.0
    return slabs + x[whole:].sum(axis=0, dtype=cupy.float64)


def upload_centred(data: np.ndarray, shift: np.ndarray | None = None):
    """The points on the GPU as float32, shifted by their float32 mean (summed in float64), or
    by `shift` where given (the shards of one problem share one): (the CuPy array, the shift).
    `data` is a host array, or a CuPy array on the current device (copied there, never moved).
    Coordinates of the order of the spread keep the expanded distances and the sums exact
    enough wherever the data sit."""
    import cupy

    n, d = data.shape
    if isinstance(data, cupy.ndarray):  # already on this GPU (kmbench.KMeans's CuPy or torch input)
        x = cupy.array(data, dtype=cupy.float32, order="C")  # a copy: the shift below leaves the caller's alone
        total = cupy.asnumpy(column_sums(x)) if shift is None else None
    else:
        x = cupy.empty((n, d), dtype=cupy.float32)
        total = np.zeros(d)
        step = max(1, (1 << 24) // d)
        for start in range(0, n, step):  # chunked: 1e8 points never exist twice on the host
            chunk = np.asarray(data[start:start + step], dtype=np.float32)
            x[start:start + step].set(chunk)
            if shift is None:
                total += chunk.sum(axis=0, dtype=np.float64)
    # The shift is a float32 number, so x - shift is exact for points near it (Sterbenz).
    shift = (total / n).astype(np.float32) if shift is None else np.asarray(shift, np.float32)
    x -= cupy.asarray(shift)
    return x, shift


class KmbenchGpu(GpuImplementation):
    name = "kmbench-gpu"
    row_order = 100
    ranked_in_reports = True
    label = "kmbench-gpu"
    description = ("our own exact FP32 Lloyd: data shifted by their mean, float64 sums across "
                   "blocks, strategy from (n, d, k): fused small-k, shared-memory tiles, or GEMM")
    source = "kmbench's own (issue: the fastest exact Lloyd on the GPU)"
    dtype = "float32"
    tf32 = False
    # Where the rows are one shard of a problem (impls/distributed/kmbench_gpu_dask.py): the shift every shard uses, and
    # a step between this shard's sums and the new centroids that combines every shard's.
    common_shift: np.ndarray | None = None
    combine = None  # combine(*GPU buffers), summed in place across shards

    def __init__(self, force_strategy: str | None = None):
        self.force_strategy = force_strategy or os.environ.get("KMBENCH_FAST_STRATEGY") or None
        self.use_graph = os.environ.get("KMBENCH_CUDA_GRAPH", "1") != "0"
        # The tensor path renumbers the centroids by neighbourhood (renumber.py); 0 keeps the given order.
        self._tensor_order = os.environ.get("KMBENCH_TENSOR_ORDER", "1") != "0"
        self._info: dict = {}

    def follows_tolerance(self, tol: float) -> bool:
        return True

    def strategy_for(self, problem: Problem) -> str:
        """The strategy's name (strategies.choose); the streamed and sharded rows override it."""
        return choose(problem, tf32=self.tf32, force=self.force_strategy)

    def check(self, problem: Problem) -> None:
        """Limits, before anything is allocated or launched."""
        if not 1 <= problem.k <= MAX_K:
            raise ImplementationError(f"{self.name} handles 1 <= k <= {MAX_K}; got k = {problem.k}")
        kind = kind_of(self.strategy_for(problem))
        kind.limits(problem)
        import cupy

        free, _ = cupy.cuda.runtime.memGetInfo()
        needed = kind.memory(problem)
        if needed > free:
            raise ImplementationError(f"{self.name} needs {needed / 2**30:.1f} GiB of GPU memory; "
                                      f"{free / 2**30:.1f} GiB is free (kmbench-gpu-stream streams data "
                                      f"larger than the GPU from host memory)")

    # ------------------------------------------------------------------ setup

    def prepare(self, problem: Problem) -> None:
        import cupy

        self._info = {}  # nothing of a previous prepare answers for this one (arithmetic reads it)
        self.check(problem)
        self._strategy = self.strategy_for(problem)
        chosen = self._chosen = make(self._strategy, problem.d, problem.k, tf32=self.tf32, order=self._tensor_order)
        phases: dict[str, float] = {}
        with host_region(phases, "compile"):
            chosen.compile()
        with host_region(phases, "upload"):
            self._upload_points(problem)
            chosen.allocate(self._x, self._changed)
            cupy.cuda.Device().synchronize()
        with host_region(phases, "compile"):  # what compiles on first use (NVRTC, Triton): once, untimed
            chosen.warm_up(np.asarray(problem.initial_centroids, np.float64) - self._shift)
        self._graph, self._graph_iterations = None, problem.iterations
        # The tolerance rule reads the changed counter after each step, so it never launches a graph:
        # none is captured, and the record says "stream".
        if self.use_graph and chosen.graph and problem.tol is None:
            with host_region(phases, "capture"):
                self._graph = self._capture(problem)
        self._setup = phases
        launch = chosen.launch or ("cuda graph" if self._graph is not None else "stream")
        self._info = {"strategy": self._strategy, "blocks": chosen.blocks, "block_size": chosen.block_size,
                      "points_per_thread": chosen.points, "tf32": self.tf32, **chosen.info(),
                      "launch": launch, "cupy": cupy.__version__, "distance": chosen.distance,
                      "precision": chosen.precision}

    def _upload_points(self, problem: Problem) -> None:
        """What every strategy reads: the centred points, the shift, the changed counter (and
        its pinned host copy, for the tolerance rule)."""
        import cupy

        self._x, self._shift = upload_centred(problem.data, self.common_shift)
        self._changed = cupy.zeros(1, dtype=cupy.uint64)
        self._changed_host = cupy.cuda.alloc_pinned_memory(8)

    def _capture(self, problem: Problem):
        import cupy

        stream = cupy.cuda.Stream(non_blocking=True)
        self._stream = stream
        with stream:
            stream.begin_capture()
            try:
                for _ in range(problem.iterations):
                    self._chosen.iterate(False, self.combine)
            finally:
                graph = stream.end_capture()
        return graph

    # ------------------------------------------------------------------ the timed run

    def run(self, problem: Problem) -> Result:
        import cupy

        chosen = self._chosen
        start = np.asarray(problem.initial_centroids, dtype=np.float64) - self._shift.astype(np.float64)
        if chosen.whole_run:  # resident: one launch runs every iteration and decides the stop
            return chosen.run(problem, start, self._shift)
        # halt_on_empty (kmbench.KMeans's, never a benchmark's): each iteration's labels counted, and
        # the run ends before one that left a cluster empty, its centroids those before it.
        halt = problem.halt_on_empty and self.combine is None and chosen.last_labels() is not None
        track = problem.tol is not None or halt  # the kernels keep each iteration's labels
        chosen.start(start, track)
        changed = np.frombuffer(self._changed_host, dtype=np.uint64, count=1)
        # A graph holds the iterations it was captured with: any other count (the judge's one-step
        # runs) launches plainly.
        graph = self._graph if problem.iterations == self._graph_iterations else None
        stream = self._stream if graph is not None and not track else cupy.cuda.get_current_stream()
        self.line_up()
        phases: dict[str, float] = {}
        done, emptied, before = problem.iterations, (False if halt else None), None
        with stream, _matmul_precision(self.tf32):
            region = CudaEventRegion()
            with region:
                chosen.before_iterations()
                if graph is not None and not track:
                    graph.launch(stream)
                else:
                    for done in range(1, problem.iterations + 1):
                        if track:
                            self._changed.fill(0)
                        if halt:
                            before = chosen.final_centroids().copy()
                        chosen.iterate(track, self.combine)
                        if halt and self._left_empty(chosen):
                            done, emptied = done - 1, True
                            break
                        if track:
                            self._changed.data.copy_to_host_async(changed.ctypes.data, 8)
                            stream.synchronize()
                            if stop_done(int(changed[0]), self.points_total(problem), problem.tol):
                                break
            phases["iterate"] = region.seconds()
        with host_region(phases, "download"):
            centred = before if emptied else chosen.final_centroids()
            centroids = cupy.asnumpy(centred) + self._shift.astype(np.float64)
        notes, fields = chosen.after_run(problem, done)  # outside the timed region
        self._info.update(fields)
        return Result(centroids=centroids, iterations=done, phases=phases, notes=notes, emptied=emptied)

    def _left_empty(self, chosen) -> bool:
        """Whether the iteration just run left a cluster with no point: its labels (those the
        strategy keeps, in its own numbering, which the count does not need) counted."""
        import cupy

        labels = chosen.last_labels()  # every point's, in [0, k): the kernels write each one
        return bool(cupy.count_nonzero(cupy.bincount(labels, minlength=chosen.k)) < chosen.k)

    def line_up(self) -> None:
        """Just before the timed region: the GPU idle (a shard's row also waits for every other rank)."""
        import cupy

        cupy.cuda.Device().synchronize()

    def points_total(self, problem: Problem) -> int:
        """Points the tolerance rule counts against: the problem's (a shard counts all shards')."""
        return problem.n

    # ------------------------------------------------------------------ bookkeeping

    def release(self) -> None:
        for name in ("_graph", "_chosen", "_x", "_changed", "_changed_host", "_stream"):
            self.__dict__.pop(name, None)

    def bytes_per_iteration(self, problem: Problem) -> int:
        # The points, read once; labels read and written under the tolerance rule.
        return problem.n * problem.d * 4 + (problem.n * 8 if problem.tol is not None else 0)

    def distance_form(self, problem: Problem) -> str:
        # A name no strategy has (a forced typo, refused by check) answers as any expanded form would.
        return KINDS.get(self.strategy_for(problem), Strategy).distance_form(problem)

    def fp32_per_distance(self, problem: Problem) -> float:
        return KINDS.get(self.strategy_for(problem), Strategy).fp32_per_distance(problem)

    def arithmetic(self, problem: Problem) -> tuple[str, float]:
        if self.tf32:
            return "tf32", 2.0 * problem.d  # the GEMM path's products on tensor cores
        declared = KINDS.get(self.strategy_for(problem), Strategy).arithmetic(problem)
        # The tensor pass's products read fp16 where its path chose them (hopper_pass.half_applies,
        # known once prepared): its floor is then 2 d FLOPs at the fp16 rate.
        if declared and declared[0] == "tf32" and self._info.get("pass_input") == "fp16":
            return "fp16", declared[1]
        return declared


# Below this d, kmbench-gpu runs its exact FP32 passes on CUDA cores (strategies: resident,
# small-k, tiled up to TILED_MAX_DIM) and the TF32 row is not offered.
TF32_FROM_DIM = TILED_MAX_DIM + 1
TF32_WHY = (f"TF32 tensor cores cannot help below d = {TF32_FROM_DIM}, where kmbench-gpu's exact pass is the "
            "one to use")
# Above it, where the tensor path runs here, kmbench-gpu's own pass already uses the tensor cores,
# certified exact, and the TF32 GEMM row trailed it everywhere it was measured (one H200: 3.9 ms
# against 0.20 ms an iteration at 1e5 x 64, k = 100; 31 against 0.78 ms at 1e6 x 128, k = 1,024).
TF32_BEHIND = ("kmbench-gpu's own tensor-core pass runs here, certified exact, and the TF32 GEMM path trailed "
               "it 20-40x wherever both ran; the TF32 row is offered where that pass cannot run (no Triton)")


class KmbenchGpuTf32(KmbenchGpu):
    """The high-d path with TF32 matrix products: faster, not exact. Its notes say how many
    labels differ from FP32 in the last assignment."""

    name = "kmbench-gpu-tf32"
    row_order = 110
    ranked_in_reports = True
    label = "kmbench-gpu (TF32)"
    description = ("kmbench-gpu's GEMM path with TF32 tensor-core products (not exact FP32); "
                   f"not offered where {TF32_WHY}, nor where {TF32_BEHIND.split('; ')[0]}")
    dtype = "tf32"  # certified to TF32's bounds (kmbench.judge.precision), not FP32's
    tf32 = True

    def unsuited(self, problem: Problem) -> str:
        # At d = 2 its GEMM path took 5.3 ms an iteration where kmbench-gpu's fused pass took
        # 2.6 us (1e5 points, k = 5, one H200): a product of depth d <= 32 keeps the tensor cores idle
        # while n x k scores go through memory, so nothing TF32 could win there is worth a row.
        if problem.d < TF32_FROM_DIM:
            return f"not offered at d = {problem.d}: {TF32_WHY}"
        if KmbenchGpu().strategy_for(problem) != "gemm":
            return f"not offered at d = {problem.d}: {TF32_BEHIND}"
        return ""
