"""kmbench-gpu: our own exact FP32 Lloyd on the GPU, any n, d and k; the strategy is chosen
from (n, d, k). NOTES.md beside this file has the byte and instruction counts.

- The data are shifted once, in prepare, by their float32 mean (computed in float64): every
  coordinate the kernels see is of the order of the spread, so neither the distances nor the
  sums lose precision when the data sit far from the origin. Centroids are kept in float64
  for the answer and in float32 for the kernels; sums that cross blocks are float64.
- Strategies (resident.cu and lowd.cu for d <= 32; above, tensor cores through Triton where
  it is installed, else cuBLAS through CuPy):
    resident  d <= 8 and k * (d + 1) <= 48: the whole run in one cooperative launch, one
              grid barrier per iteration, per-thread float64 accumulators in shared memory;
    small-k   d <= 8 and k <= 32 otherwise: one fused pass per iteration, warp shuffle sums,
              per-warp float64 accumulators in shared memory;
    tiled     d <= 32, any k: centroids in shared tiles, |x - c|^2 computed directly (the
              expanded |c|^2/2 - x.c, half the arithmetic, lost the radial tree's inertia:
              NOTES.md), several points per thread; warp-uniform labels add one sum, others
              float64 atomics;
    tensor    d > 32: TF32 tensor-core scores fused with a best/second-best argmin, exact by
              a certified margin (bound.py) and an FP32 re-check of the uncertain points
              (centroids renumbered by neighbourhood at the start of each run, so a point's
              candidates share tiles), float64 sums over points sorted by cluster
              (tensor_path.py);
    gemm      d > 32 without Triton: scores X C^T by cuBLAS SGEMM (FP32: TF32 only in the
              -tf32 variant), argmin per row, sums by a one-hot sparse product per chunk.
- resident decides both stop rules on the GPU. Otherwise, with the iterations rule the whole
  run is one CUDA graph (captured in prepare); with the tolerance rule the host reads the
  changed counter after each iteration.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from impls.cuda import GpuImplementation
from kmbench.protocol.ceilings import matmul_precision as _matmul_precision
from kmbench.errors import ImplementationError
from kmbench.protocol import Problem, Result, stop_done
from kmbench.protocol.timing import CudaEventRegion, host_region

HERE = Path(__file__).resolve().parent
BLOCK = 256  # as in lowd.cu
SMALL_K, SMALL_DIM, TILED_MAX_DIM = 32, 8, 32
RESIDENT_SLOTS = 40  # k * (d + 1) float64 columns of 128 threads: 40 of the 48 KB of static shared memory
RESIDENT_BLOCK, RESIDENT_POINTS, RESIDENT_BLOCKS_PER_SM, RESIDENT_COPIES = 128, 8, 4, 32  # as in resident.cu
BLOCKS_PER_SM = 8
GEMM_ROWS = 1 << 16  # rows of X per GEMM chunk: bounds the scores buffer to 65536 x k floats
MAX_K = 1 << 20
DIRECT_MAX_DIM = 32  # the tiled kernel computes |x - c|^2 directly up to here (tiled_distance)
STRATEGIES = ("resident", "small-k", "tiled", "tensor", "gemm")


def strategy(n: int, d: int, k: int, tensor_cores: bool = False) -> str:
    """The strategy for (n, d, k); tensor_cores: whether the tensor path can run here."""
    if d > TILED_MAX_DIM:
        return "tensor" if tensor_cores else "gemm"
    if d <= SMALL_DIM and k * (d + 1) <= RESIDENT_SLOTS:
        return "resident"
    if d <= SMALL_DIM and k <= SMALL_K:
        return "small-k"
    return "tiled"


def pass_strategy(d: int, k: int) -> str:
    """The strategy where each pass's sums must be seen before the centroids are made (a pass
    over one chunk of streamed data, or one shard of several): the tensor path above d = 32,
    else small-k or tiled, never the one-launch resident kernel."""
    if d > TILED_MAX_DIM:
        return "tensor"
    return "small-k" if d <= SMALL_DIM and k <= SMALL_K else "tiled"


def tiled_distance(d: int) -> str:
    """How the tiled kernel compares centroids: "direct" (|x - c|^2) up to DIRECT_MAX_DIM,
    else "expanded" (|c|^2/2 - x.c, half the arithmetic, rounded at the size of |x||c|);
    $KMBENCH_TILED_DISTANCE forces one (for measuring the other)."""
    forced = os.environ.get("KMBENCH_TILED_DISTANCE")
    if forced:
        if forced not in ("direct", "expanded"):
            raise ImplementationError("KMBENCH_TILED_DISTANCE must be direct or expanded")
        return forced
    return "direct" if d <= DIRECT_MAX_DIM else "expanded"


def points_per_thread(d: int) -> int:
    """Points each thread of the tiled kernel holds: more share each shared-memory load of a
    centroid, fewer keep the registers (POINTS x d floats) from spilling."""
    return 4 if d <= 4 else 2 if d <= 16 else 1


def upload_centred(data: np.ndarray, shift: np.ndarray | None = None):
    """The points on the GPU as float32, shifted by their float32 mean (summed in float64), or
    by `shift` where given (the shards of one problem share one): (the CuPy array, the shift).
    Coordinates of the order of the spread keep the expanded distances and the sums exact
    enough wherever the data sit."""
    import cupy

    n, d = data.shape
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
    label = "kmbench-gpu"
    description = ("our own exact FP32 Lloyd: data shifted by their mean, float64 sums across "
                   "blocks, strategy from (n, d, k): fused small-k, shared-memory tiles, or GEMM")
    source = "kmbench's own (issue: the fastest exact Lloyd on the GPU)"
    dtype = "float32"
    tf32 = False
    # Where the rows are one shard of a problem (dask_nccl.py): the shift every shard uses, and
    # a step between this shard's sums and the new centroids that combines every shard's.
    common_shift: np.ndarray | None = None
    combine = None  # combine(*GPU buffers), summed in place across shards

    def __init__(self, force_strategy: str | None = None):
        self.force_strategy = force_strategy or os.environ.get("KMBENCH_FAST_STRATEGY") or None
        self.use_graph = os.environ.get("KMBENCH_CUDA_GRAPH", "1") != "0"
        # The tensor path renumbers the centroids by neighbourhood (tensor_path.py); 0 keeps the given order.
        self._tensor_order = os.environ.get("KMBENCH_TENSOR_ORDER", "1") != "0"
        self._info: dict = {}

    def follows_tolerance(self, tol: float) -> bool:
        return True

    def check(self, problem: Problem) -> None:
        """Limits, before anything is allocated or launched."""
        if not 1 <= problem.k <= MAX_K:
            raise ImplementationError(f"{self.name} handles 1 <= k <= {MAX_K}; got k = {problem.k}")
        chosen = self.strategy_for(problem)
        if chosen not in STRATEGIES:
            raise ImplementationError(f"unknown strategy {chosen!r}; known: {', '.join(STRATEGIES)}")
        if chosen not in ("gemm", "tensor") and problem.d > TILED_MAX_DIM:
            raise ImplementationError(f"strategy {chosen} handles d <= {TILED_MAX_DIM}; got d = {problem.d}")
        if chosen == "small-k" and (problem.k > SMALL_K or problem.d > SMALL_DIM):
            raise ImplementationError(f"strategy small-k handles k <= {SMALL_K} and d <= {SMALL_DIM}")
        if chosen == "resident" and (problem.k * (problem.d + 1) > RESIDENT_SLOTS or problem.d > SMALL_DIM):
            raise ImplementationError(f"strategy resident handles d <= {SMALL_DIM} and k * (d + 1) <= "
                                      f"{RESIDENT_SLOTS}")
        import cupy

        free, _ = cupy.cuda.runtime.memGetInfo()
        needed = problem.n * problem.d * 4 + problem.n * 4 + problem.k * problem.d * 24
        if chosen == "gemm":
            needed += min(problem.n, GEMM_ROWS) * problem.k * 4 * 2
        if chosen == "tensor":
            from impls.fast.tensor_path import MAX_POINTS, device_bytes, tensor_status

            ready, why = tensor_status()
            if not ready:
                raise ImplementationError(f"strategy tensor cannot run here: {why}")
            if problem.n > MAX_POINTS:
                raise ImplementationError(f"strategy tensor handles n <= {MAX_POINTS}; got n = {problem.n}")
            needed = device_bytes(problem.n, problem.d, problem.k)
        if needed > free:
            raise ImplementationError(f"{self.name} needs {needed / 2**30:.1f} GiB of GPU memory; "
                                      f"{free / 2**30:.1f} GiB is free (kmbench-gpu-stream streams data "
                                      f"larger than the GPU from host memory)")

    def strategy_for(self, problem: Problem) -> str:
        if self.tf32:
            return "gemm"  # the TF32 variant exists for the GEMM path only
        if self.force_strategy:
            return self.force_strategy
        if problem.d > TILED_MAX_DIM:
            from impls.fast.tensor_path import tensor_status

            return strategy(problem.n, problem.d, problem.k, tensor_cores=tensor_status()[0])
        return strategy(problem.n, problem.d, problem.k)

    # ------------------------------------------------------------------ setup

    def prepare(self, problem: Problem) -> None:
        import cupy

        self.check(problem)
        d = problem.d
        self._strategy = self.strategy_for(problem)
        phases: dict[str, float] = {}
        with host_region(phases, "compile"):
            if self._strategy == "resident":
                module = cupy.RawModule(code=(HERE / "resident.cu").read_text(),
                                        options=("-std=c++17", f"-DDIM={d}", f"-DKC={problem.k}"))
                self._kernel = module.get_function("resident")
                self._points = RESIDENT_POINTS
            elif self._strategy not in ("gemm", "tensor"):
                self._compile_lowd(d)
            elif self._strategy == "gemm":
                module = cupy.RawModule(code=(HERE / "highd.cu").read_text(), options=("-std=c++17",))
                self._argmin = module.get_function("argmin_rows")
            if self._strategy not in ("gemm", "tensor"):
                self._kernel.compile()  # here, not inside the timed region
        with host_region(phases, "upload"):
            self._upload(problem)
            cupy.cuda.Device().synchronize()
        if self._strategy == "tensor":  # NVRTC and Triton compile on first use: once, untimed
            with host_region(phases, "compile"):
                self._tensor.start(np.asarray(problem.initial_centroids, np.float64) - self._shift)
                for track in (False, True):
                    self._tensor.iterate(track)
                cupy.cuda.Device().synchronize()
        self._blocks = self._grid(problem)
        self._graph, self._graph_iterations = None, problem.iterations
        if self.use_graph and self._strategy not in ("gemm", "resident"):
            with host_region(phases, "capture"):
                self._graph = self._capture(problem)
        self._setup = phases
        launch = ("one cooperative launch per run" if self._strategy == "resident"
                  else "cuda graph" if self._graph is not None else "stream")
        self._info = {"strategy": self._strategy, "blocks": self._blocks,
                      "block_size": RESIDENT_BLOCK if self._strategy == "resident" else BLOCK,
                      "points_per_thread": getattr(self, "_points", None), "tf32": self.tf32,
                      **(self._tensor_info() if self._strategy == "tensor" else {}),
                      "launch": launch, "cupy": cupy.__version__, "distance": self._distance_form(),
                      "precision": ("tf32 products, float64 sums" if self.tf32 else
                                    "tf32 certified by a bound, fp32 re-check, float64 sums"
                                    if self._strategy == "tensor" else "fp32, float64 sums")}

    def _distance_form(self) -> str:
        """How this run's assignment compares a point with the centroids (the record says)."""
        if self._strategy in ("resident", "small-k"):
            return "direct"
        if self._strategy == "tiled":
            return self._distance
        return "expanded, certified by a bound" if self._strategy == "tensor" and not self.tf32 else "expanded"

    def _tensor_info(self) -> dict:
        import triton

        return {"triton": triton.__version__, "tiling": list(self._tensor.tiling), "recheck": self._tensor.recheck,
                "centroid_order": "by neighbourhood" if self._tensor_order else "as given",
                "exact_tiling": list(self._tensor.exact_tiling), "bound_eps": self._tensor.eps}

    def _compile_lowd(self, d: int) -> None:
        """lowd.cu for this d: the small-k or tiled kernel (per self._strategy) and finish."""
        import cupy

        points = points_per_thread(d)
        self._distance = tiled_distance(d)
        module = cupy.RawModule(code=(HERE / "lowd.cu").read_text(),
                                options=("-std=c++17", f"-DDIM={d}", f"-DPOINTS={points}",
                                         f"-DDIRECT={int(self._distance == 'direct')}"))
        self._kernel = module.get_function("small_k" if self._strategy == "small-k" else "tiled")
        self._finish = module.get_function("finish")
        self._points = points

    def _grid(self, problem: Problem) -> int:
        """Blocks for the low-d kernels: enough for every point once (resident: eight per
        thread, so a small problem meets at the barrier with few blocks), at most what the
        GPU holds at once (which the resident kernel's barrier requires)."""
        import cupy

        sms = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["multiProcessorCount"]
        if self._strategy == "resident":
            per_block, most = RESIDENT_BLOCK * RESIDENT_POINTS, sms * self._resident_blocks_per_sm()
        else:
            per_block = BLOCK * (self._points if self._strategy == "tiled" else 1)
            most = sms * BLOCKS_PER_SM
        return int(max(1, min((problem.n + per_block - 1) // per_block, most)))

    def _resident_blocks_per_sm(self) -> int:
        """Blocks of the resident kernel one SM holds (the occupancy the driver reports;
        __launch_bounds__ in resident.cu asks for RESIDENT_BLOCKS_PER_SM)."""
        from cupy.cuda import driver

        try:
            held = driver.occupancyMaxActiveBlocksPerMultiprocessor(self._kernel.kernel.ptr, RESIDENT_BLOCK, 0)
        except AttributeError:  # an older CuPy without the occupancy call
            held = RESIDENT_BLOCKS_PER_SM
        if held < 1:
            raise ImplementationError("the resident kernel does not fit on one SM of this GPU")
        return int(held)

    def _upload(self, problem: Problem) -> None:
        import cupy

        n, d, k = problem.n, problem.d, problem.k
        self._x, self._shift = upload_centred(problem.data, self.common_shift)
        self._changed = cupy.zeros(1, dtype=cupy.uint64)
        self._changed_host = cupy.cuda.alloc_pinned_memory(8)
        if self._strategy == "tensor":  # its own buffers; the run reads the float64 centroids
            from impls.fast.tensor_path import TensorPath

            self._tensor = TensorPath(self._x, k, self._changed)
            self._centroids64 = self._tensor.centroids64
            return
        self._labels = cupy.full(n, -1, dtype=cupy.int32)
        self._allocate_centroids(k, d)
        if self._strategy == "resident":  # resident.cu's three partial buffers, barrier, count
            self._partial = cupy.zeros(3 * k * (d + 1) * RESIDENT_COPIES, dtype=cupy.float64)
            self._changed3 = cupy.zeros(3, dtype=cupy.uint64)
            self._barrier = cupy.zeros(2, dtype=cupy.uint32)
            self._done = cupy.zeros(1, dtype=cupy.int32)

    def _allocate_centroids(self, k: int, d: int) -> None:
        """What the low-d kernels read and write besides the points: centroids (float32 and
        float64), half norms, and the k x (d + 1) float64 sums with the counts last."""
        import cupy

        self._centroids = cupy.empty((k, d), dtype=cupy.float32)
        self._centroids64 = cupy.empty((k, d), dtype=cupy.float64)
        self._half_norms = cupy.empty(k, dtype=cupy.float32)
        self._sums = cupy.zeros(k * (d + 1), dtype=cupy.float64)

    def _start_lowd(self, start: np.ndarray) -> None:
        """A run's first centroids (centred, float64) where the low-d kernels read them."""
        self._centroids64.set(start)
        self._centroids.set(start.astype(np.float32))
        self._half_norms.set(0.5 * (start.astype(np.float32) ** 2).sum(axis=1, dtype=np.float32))
        self._sums.fill(0)

    def _capture(self, problem: Problem):
        import cupy

        stream = cupy.cuda.Stream(non_blocking=True)
        self._stream = stream
        with stream:
            stream.begin_capture()
            try:
                iterate = self._iteration()
                for _ in range(problem.iterations):
                    iterate(problem, track=False)
            finally:
                graph = stream.end_capture()
        return graph

    # ------------------------------------------------------------------ one iteration

    def _iteration(self):
        """The one-iteration method of the chosen strategy (resident runs whole, apart)."""
        return {"gemm": self._iterate_gemm, "tensor": self._iterate_tensor}.get(self._strategy,
                                                                                self._iterate_lowd)

    def _iterate_tensor(self, problem: Problem, track: bool) -> None:
        combine = None if self.combine is None else (
            lambda: self.combine(self._tensor.sums, self._tensor.counts, self._changed))
        self._tensor.iterate(track, combine)

    def _iterate_lowd(self, problem: Problem, track: bool) -> None:
        self._assign_lowd(self._x, problem.n, problem.k, self._labels if track else None, self._blocks)
        if self.combine is not None:
            self.combine(self._sums, self._changed)  # counts ride in the sums' last column
        self._finish_lowd(problem.k)

    def _assign_lowd(self, x, n: int, k: int, labels, blocks: int) -> None:
        """The small-k or tiled kernel over n centred points `x`: labels (None: not kept) and
        their float64 sums added into self._sums."""
        labels = np.uint64(0) if labels is None else labels  # a null pointer: no labels kept
        if self._strategy == "small-k":
            args = (x, np.int64(n), self._centroids, np.int32(k), self._sums, labels, self._changed)
        else:
            args = (x, np.int64(n), self._centroids, self._half_norms, np.int32(k), self._sums, labels, self._changed)
        self._kernel((blocks,), (BLOCK,), args)

    def _finish_lowd(self, k: int) -> None:
        """New centroids from self._sums (cleared for the next iteration)."""
        self._finish(((k + 255) // 256,), (256,),
                     (self._sums, self._centroids, self._centroids64, self._half_norms, np.int32(k)))

    def _assign_chunks(self, problem: Problem, track: bool):
        """Assign GEMM_ROWS points at a time (scores by cuBLAS SGEMM, in TF32 only inside
        `_matmul_precision(True)`), writing self._labels; yield each chunk's rows and labels."""
        half = 0.5 * (self._centroids * self._centroids).sum(axis=1)
        for start in range(0, problem.n, GEMM_ROWS):
            rows = self._x[start:start + GEMM_ROWS]
            scores = rows @ self._centroids.T
            m = rows.shape[0]
            labels = self._labels[start:start + m]
            self._argmin(((m + 7) // 8,), (256,),
                         (scores, half, np.int64(m), np.int32(problem.k), labels, self._changed,
                          np.int32(track)))
            yield rows, labels

    def _labels_of(self, problem: Problem):
        """The assignment from the current centroids (a copy; tracks nothing)."""
        import cupy

        for _ in self._assign_chunks(problem, track=False):
            pass
        return cupy.array(self._labels)

    def _iterate_gemm(self, problem: Problem, track: bool) -> None:
        import cupy
        import cupyx.scipy.sparse as sparse

        d, k = problem.d, problem.k
        sums = cupy.zeros((k, d), dtype=cupy.float64)
        for rows, labels in self._assign_chunks(problem, track):
            m = rows.shape[0]
            onehot = sparse.csr_matrix((cupy.ones(m, dtype=cupy.float32), (labels, cupy.arange(m))),
                                       shape=(k, m))
            sums += (onehot @ rows).astype(cupy.float64)  # chunk sums in float32, chunks in float64
        counts = cupy.bincount(self._labels, minlength=k).astype(cupy.float64)
        filled = counts > 0
        self._centroids64[filled] = sums[filled] / counts[filled, None]
        self._centroids[...] = self._centroids64.astype(cupy.float32)

    # ------------------------------------------------------------------ the timed run

    def run(self, problem: Problem) -> Result:
        import cupy

        start = np.asarray(problem.initial_centroids, dtype=np.float64) - self._shift.astype(np.float64)
        self._centroids64.set(start)
        if self._strategy == "resident":  # reads only the float64 start; the rest is for the others
            return self._run_resident(problem)
        track = problem.tol is not None
        if self._strategy == "tensor":
            self._tensor.start(start)
        else:
            self._start_lowd(start)
            if track:
                self._labels.fill(-1)
        changed = np.frombuffer(self._changed_host, dtype=np.uint64, count=1)
        iterate = self._iteration()
        # A graph holds the iterations it was captured with: any other count (the judge's one-step
        # runs) launches plainly.
        graph = self._graph if problem.iterations == self._graph_iterations else None
        stream = self._stream if graph is not None and not track else cupy.cuda.get_current_stream()
        cupy.cuda.Device().synchronize()
        phases: dict[str, float] = {}
        done = problem.iterations
        notes: list[str] = []
        with stream, _matmul_precision(self.tf32):
            region = CudaEventRegion()
            with region:
                if self._strategy == "tensor" and self._tensor_order:
                    self._tensor.order_by_neighbourhood()
                if graph is not None and not track:
                    graph.launch(stream)
                else:
                    for done in range(1, problem.iterations + 1):
                        if track:
                            self._changed.fill(0)
                        iterate(problem, track)
                        if track:
                            self._changed.data.copy_to_host_async(changed.ctypes.data, 8)
                            stream.synchronize()
                            if stop_done(int(changed[0]), self.points_total(problem), problem.tol):
                                break
            phases["iterate"] = region.seconds()
        with host_region(phases, "download"):
            final = self._tensor.centroids_in_order() if self._strategy == "tensor" else self._centroids64
            centroids = cupy.asnumpy(final) + self._shift.astype(np.float64)
        if self.tf32 and self._strategy == "gemm":  # outside the timed region
            with _matmul_precision(True):
                fast = self._labels_of(problem)
            with _matmul_precision(False):
                exact = self._labels_of(problem)
            notes.append(f"TF32 labels that differ from FP32 on the final centroids: "
                         f"{int((fast != exact).sum())} of {problem.n}")
        if self._strategy == "tensor":
            rechecked = self._tensor.rechecked()
            self._info.update(rechecked_points=rechecked,
                              rechecked_fraction=rechecked / max(1, problem.n * done))
            notes.append(f"points re-checked in FP32 (TF32 margin inside the bound): {rechecked} of "
                         f"{problem.n * done} assignments ({rechecked / max(1, problem.n * done):.2%})")
        return Result(centroids=centroids, iterations=done, phases=phases, notes=notes)

    def _run_resident(self, problem: Problem) -> Result:
        """One launch for the whole run; the kernel counts its own iterations."""
        import cupy

        for buffer in (self._partial, self._changed3, self._barrier, self._done):
            buffer.fill(0)
        track = problem.tol is not None
        if track:
            self._labels.fill(-1)
        args = (self._x, np.int64(problem.n), self._centroids64, self._partial, self._changed3, self._barrier,
                self._labels if track else np.uint64(0), np.int32(problem.iterations),
                np.float64(problem.tol * problem.n if track else -1.0), self._done)
        cupy.cuda.Device().synchronize()
        phases: dict[str, float] = {}
        region = CudaEventRegion()
        with region:
            try:  # cooperative: the driver refuses a grid the GPU cannot hold at once
                self._kernel.kernel((self._blocks, 1, 1), (RESIDENT_BLOCK, 1, 1), args,
                                    enable_cooperative_groups=True)
            except TypeError:  # an older CuPy: the grid is sized to fit (_grid) all the same
                self._kernel((self._blocks,), (RESIDENT_BLOCK,), args)
        phases["iterate"] = region.seconds()
        with host_region(phases, "download"):
            centroids = cupy.asnumpy(self._centroids64) + self._shift.astype(np.float64)
            done = int(self._done.get()[0])
        return Result(centroids=centroids, iterations=done, phases=phases)

    def points_total(self, problem: Problem) -> int:
        """Points the tolerance rule counts against: the problem's (a shard counts all shards')."""
        return problem.n

    # ------------------------------------------------------------------ bookkeeping

    def release(self) -> None:
        for name in ("_graph", "_tensor", "_x", "_labels", "_changed", "_changed_host", "_centroids", "_centroids64",
                     "_half_norms", "_sums", "_stream", "_partial", "_changed3", "_barrier", "_done"):
            self.__dict__.pop(name, None)

    def bytes_per_iteration(self, problem: Problem) -> int:
        # The points, read once; labels read and written under the tolerance rule.
        return problem.n * problem.d * 4 + (problem.n * 8 if problem.tol is not None else 0)

    def distance_form(self, problem: Problem) -> str:
        chosen = self.strategy_for(problem)
        if chosen in ("resident", "small-k") or (chosen == "tiled" and tiled_distance(problem.d) == "direct"):
            return "direct"
        return "any"

    def fp32_per_distance(self, problem: Problem) -> float:
        chosen = self.strategy_for(problem)
        if chosen in ("resident", "small-k"):
            return 2 * problem.d + 1  # d subtractions, d FMAs, the compare
        return problem.d + 1  # tiled and GEMM: d FMAs, the compare


class KmbenchGpuTf32(KmbenchGpu):
    """The high-d path with TF32 matrix products: faster, not exact. Its notes say how many
    labels differ from FP32 in the last assignment."""

    name = "kmbench-gpu-tf32"
    label = "kmbench-gpu (TF32)"
    description = "kmbench-gpu's GEMM path with TF32 tensor-core products (not exact FP32)"
    dtype = "tf32"  # certified to TF32's bounds (kmbench.judge.precision), not FP32's
    tf32 = True
