"""yinyang-gpu: our own exact Yinyang k-means on the GPU (document 004's second algorithm).

Yinyang (Ding et al., 2015) keeps, per point, an upper bound on the distance to its centroid
and a lower bound per group of centroids; after each update the bounds move by how far the
centroids moved (triangle inequality). A point whose upper bound is below every group's lower
bound keeps its label without a single distance (global filter); otherwise only the groups
whose bound is below the point's best distance are searched (group filter). The assignments
are Lloyd's, every iteration: every bound carries a margin for float32 rounding (yinyang.cu).

- Groups (groups.py): t = ceil(k / 10) (kmcuda's default ratio), found by five float64 Lloyd
  iterations on the initial centroids, inside the timed region (the grouping is part of
  Yinyang's cost). Centroids are renumbered so that each group is a contiguous range; the
  answer is renumbered back.
- The first iteration, and any iteration in which more than `gemm_fraction` of the points
  pass the global filter, assigns every point densely; otherwise a warp per active point
  computes exact distances to the groups it must. Dense assignment is kmbench-gpu's exact
  tensor-core pass where it runs (d > 32, Triton present; `dense="tensor"`): labels certified
  by its bound or re-checked in FP32, the upper bound from the exact distance to the winner,
  and one lower bound for every group from the runner-up's score less the bound. Elsewhere
  (`dense="gemm"`) cuBLAS SGEMM (FP32) scores the active rows and every group's bound is
  computed from them.
- Sums are float64 and move with the points that change cluster (the data shifted by their
  mean, as in kmbench-gpu), so an iteration reads only the points that need a distance.

Memory: the data, n x t float32 lower bounds (600 MB at 300,000 x 500 groups), one GEMM
chunk of scores (65,536 x k floats) and the float64 sums.
"""

from __future__ import annotations

import os

import numpy as np

from impls.gpu.kmbench_gpu import GEMM_ROWS, TILED_MAX_DIM, KmbenchGpu, _matmul_precision
from impls.gpu.kmbench_gpu.tensor_path import TensorPath
from impls.gpu.kmbench_gpu.tensor_settings import MAX_POINTS, device_bytes, tensor_status
from impls.gpu.yinyang.groups import group_count, group_layout
from kmbench.errors import ImplementationError
from kmbench.protocol import Problem, Result, stop_done
from kmbench.protocol.timing import CudaEventRegion, host_region

HERE = os.path.dirname(os.path.abspath(__file__))
WARPS_PER_BLOCK = 8
GEMM_FRACTION = 0.3  # above this share of active points, GEMM rows beat the group filter
MODES = ("auto", "gemm", "filter")
DENSE = ("auto", "tensor", "gemm")


def slack_factor(d: int) -> float:
    """The margin on a squared distance, per unit of (|x| + max |c|)^2: a float32 dot product
    of d terms is within d * 2^-24 of exact relative to the sum of |x_i c_i| (any summation
    order), and the norms and the subtraction add a few units more."""
    return (d + 8) * 2.0 ** -23


class YinyangGpu(KmbenchGpu):
    name = "yinyang-gpu"
    row_order = 130
    label = "kmbench Yinyang (GPU)"
    description = ("our own exact Yinyang k-means: t = k/10 centroid groups, global and group filters on "
                   "drift-shifted bounds, FP32 distances with rounding margins, float64 sums")
    source = "kmbench's own, after document 004 (kmcuda's Yinyang) and Ding et al. 2015"

    def __init__(self, mode: str | None = None, gemm_fraction: float | None = None, dense: str | None = None):
        super().__init__(force_strategy="gemm")
        self.mode = mode or os.environ.get("KMBENCH_YINYANG_MODE", "auto")
        if self.mode not in MODES:
            raise ImplementationError(f"yinyang mode must be one of {', '.join(MODES)}; got {self.mode!r}")
        self.dense = dense or os.environ.get("KMBENCH_YINYANG_DENSE", "auto")
        if self.dense not in DENSE:
            raise ImplementationError(f"yinyang dense assignment must be one of {', '.join(DENSE)}; "
                                      f"got {self.dense!r}")
        self.gemm_fraction = float(gemm_fraction if gemm_fraction is not None
                                   else os.environ.get("KMBENCH_YINYANG_GEMM_FRACTION", GEMM_FRACTION))

    def strategy_for(self, problem: Problem) -> str:
        return "gemm"

    def dense_for(self, problem: Problem) -> str:
        """How dense iterations assign: the tensor path where it can run, else SGEMM rows."""
        if self.dense != "auto":
            return self.dense
        if problem.d <= TILED_MAX_DIM or problem.n > MAX_POINTS:
            return "gemm"
        return "tensor" if tensor_status()[0] else "gemm"

    def check(self, problem: Problem) -> None:
        super().check(problem)
        import cupy

        free, _ = cupy.cuda.runtime.memGetInfo()
        needed = problem.n * (problem.d * 4 + group_count(problem.k) * 4 + 24)
        if self.dense_for(problem) == "tensor":
            ready, why = tensor_status()
            if not ready:
                raise ImplementationError(f"{self.name}'s tensor-core assignment cannot run here: {why}")
            needed += device_bytes(problem.n, problem.d, problem.k) - problem.n * problem.d * 4 + problem.n * 4
        else:
            needed += GEMM_ROWS * problem.k * 8
        if needed > free:
            raise ImplementationError(f"{self.name} needs {needed / 2**30:.1f} GiB of GPU memory for the data, "
                                      f"bounds and scores; {free / 2**30:.1f} GiB is free")

    def prepare(self, problem: Problem) -> None:
        import cupy

        self.check(problem)
        n, d, k = problem.n, problem.d, problem.k
        self._groups = group_count(k)
        phases: dict[str, float] = {}
        with host_region(phases, "compile"):
            source = open(os.path.join(HERE, "yinyang.cu")).read()
            module = cupy.RawModule(code=source, options=("-std=c++17", f"-DDIM={d}",
                                                          f"-DSLACK={slack_factor(d):.9e}f"))
            self._kernels = {name: module.get_function(name)
                             for name in ("filter", "examine", "rows_bounds", "tensor_bounds", "move")}
            for kernel in self._kernels.values():
                kernel.compile()
        with host_region(phases, "upload"):
            self._upload_points(problem)  # kmbench-gpu's centred points, shift and changed counter
            self._labels = cupy.full(n, -1, dtype=cupy.int32)
            self._centroids = cupy.empty((k, d), dtype=cupy.float32)
            self._centroids64 = cupy.empty((k, d), dtype=cupy.float64)
            self._point_norms = self._norms_chunked(problem)
            self._upper = cupy.empty(n, dtype=cupy.float32)
            self._lower = cupy.empty((n, self._groups), dtype=cupy.float32)
            self._previous = cupy.empty(n, dtype=cupy.int32)
            self._counts = cupy.zeros(k, dtype=cupy.int64)
            self._sums2d = cupy.zeros((k, d), dtype=cupy.float64)
            self._active = cupy.empty(n, dtype=cupy.int32)
            self._active_count = cupy.zeros(1, dtype=cupy.uint32)
            self._dense = self.dense_for(problem)
            self._tensor = None
            if self._dense == "tensor":
                self._tensor = TensorPath(self._x, k, self._changed, keep_floor=True)
            cupy.cuda.Device().synchronize()
        if self._tensor is not None:  # NVRTC and Triton compile on first use: once, untimed
            with host_region(phases, "compile"):
                start = np.asarray(problem.initial_centroids, np.float64) - self._shift
                self._tensor.load_centroids(cupy.asarray(start.astype(np.float32)))
                self._tensor.assign_alone()
                cupy.cuda.Device().synchronize()
        self._setup = phases
        self._info = {"strategy": f"yinyang ({self.mode})", "groups": self._groups, "dense": self._dense,
                      "gemm_fraction": self.gemm_fraction, "slack": slack_factor(d), "cupy": cupy.__version__,
                      "precision": "fp32 bounds with a rounding margin, float64 sums"}

    def _norms_chunked(self, problem: Problem):
        """|x| of the shifted points, rounded up a little (the scale of each point's margin),
        a chunk at a time so no float64 copy of the data exists."""
        import cupy

        norms = cupy.empty(problem.n, dtype=cupy.float32)
        for start in range(0, problem.n, GEMM_ROWS):
            part = self._x[start:start + GEMM_ROWS].astype(cupy.float64)
            norms[start:start + GEMM_ROWS] = (cupy.sqrt((part * part).sum(axis=1)) * (1 + 1e-6)).astype(cupy.float32)
        return norms

    # ------------------------------------------------------------------ steps of one iteration

    def _launch(self, name: str, rows: int, args) -> None:
        threads = 32 * WARPS_PER_BLOCK
        self._kernels[name](((rows + WARPS_PER_BLOCK - 1) // WARPS_PER_BLOCK,), (threads,), args)

    def _dense_all(self, problem: Problem) -> None:
        if self._tensor is not None:
            self._by_tensor(problem)
        else:
            self._by_gemm(problem)

    def _by_tensor(self, problem: Problem) -> None:
        """Every point's label by kmbench-gpu's exact tensor-core pass, then its bounds."""
        self._tensor.load_centroids(self._centroids)
        self._tensor.assign_alone()
        self._launch("tensor_bounds", problem.n,
                     (self._x, self._centroids, self._tensor.labels, self._tensor.floor, np.int64(problem.n),
                      np.int32(self._groups), self._point_norms, self._cmax, self._upper, self._lower,
                      self._labels))

    def _by_gemm(self, problem: Problem, indices=None) -> None:
        """Assign the listed points (all when None) from GEMM scores, with every bound anew."""
        import cupy

        count = problem.n if indices is None else int(indices.size)
        for start in range(0, count, GEMM_ROWS):
            stop = min(count, start + GEMM_ROWS)
            chunk = None if indices is None else indices[start:stop]
            rows = self._x[start:stop] if chunk is None else cupy.take(self._x, chunk, axis=0)
            scores = rows @ self._centroids.T
            self._launch("rows_bounds", stop - start,
                         (scores, self._norms, self._point_norms, chunk if chunk is not None else np.uint64(0),
                          np.int64(start), np.int64(stop - start), np.int32(problem.k), self._group_start,
                          np.int32(self._groups), self._cmax, self._upper, self._lower, self._labels))

    def _by_filters(self, problem: Problem, indices) -> None:
        self._launch("examine", int(indices.size),
                     (self._x, self._centroids, self._group_start, np.int32(self._groups), indices,
                      np.uint32(indices.size), self._group_of, self._point_norms, self._cmax, self._upper,
                      self._lower, self._labels))

    def _move(self, indices, count: int) -> None:
        self._launch("move", count, (self._x, indices if indices is not None else np.uint64(0), np.int64(count),
                                     self._labels, self._previous, self._sums2d, self._counts, self._changed))

    def _update(self) -> None:
        """New centroids from the sums; how far each moved (float64, rounded up to float32);
        each group's largest move; the norms the kernels need."""
        import cupy

        filled = self._counts > 0
        self._centroids64[...] = cupy.where(filled[:, None], self._sums2d / cupy.maximum(self._counts, 1)[:, None],
                                            self._centroids64)
        fresh = self._centroids64.astype(cupy.float32)
        moved = cupy.sqrt(((fresh.astype(cupy.float64) - self._centroids.astype(cupy.float64)) ** 2).sum(axis=1))
        self._drift = cupy.nextafter(moved.astype(cupy.float32), cupy.float32(np.inf))
        self._group_drift = cupy.where(self._group_member >= 0, self._drift[cupy.maximum(self._group_member, 0)],
                                       cupy.float32(0)).max(axis=1)
        self._centroids[...] = fresh
        self._set_norms()

    def _set_norms(self) -> None:
        import cupy

        self._norms = (self._centroids * self._centroids).sum(axis=1)
        self._cmax = (cupy.sqrt((self._centroids.astype(cupy.float64) ** 2).sum(axis=1).max()) * (1 + 1e-6)) \
            .astype(cupy.float32).reshape(1)

    def _set_groups(self, start64) -> np.ndarray:
        """Group the initial centroids and renumber them group by group (groups.group_layout);
        returns the order (internal index -> the harness's index)."""
        order, self._group_start, self._group_of, self._group_member = group_layout(start64, self._groups)
        return order

    # ------------------------------------------------------------------ the timed run

    def run(self, problem: Problem) -> Result:
        import cupy

        n = problem.n
        start = np.asarray(problem.initial_centroids, dtype=np.float64) - self._shift.astype(np.float64)
        changed = np.frombuffer(self._changed_host, dtype=np.uint64, count=1)
        cupy.cuda.Device().synchronize()
        phases: dict[str, float] = {}
        by_gemm = by_filters = 0
        active_total = 0
        done = 0
        with _matmul_precision(False):
            region = CudaEventRegion()
            with region:
                grouping = CudaEventRegion()
                with grouping:
                    order = self._set_groups(cupy.asarray(start))
                    self._centroids64[...] = cupy.asarray(start)[order]
                    self._centroids[...] = self._centroids64.astype(cupy.float32)
                    self._set_norms()
                    self._previous.fill(-1)
                    self._sums2d.fill(0)
                    self._counts.fill(0)
                    if self._tensor is not None:
                        self._tensor.flagged_total.fill(0)
                for done in range(1, problem.iterations + 1):
                    self._changed.fill(0)
                    if done == 1:
                        self._dense_all(problem)
                        self._move(None, n)
                        by_gemm += 1
                        active_total += n
                    else:
                        self._active_count.fill(0)
                        self._launch("filter", n, (self._upper, self._lower, self._labels, self._drift,
                                                   self._group_drift, np.int64(n), np.int32(self._groups),
                                                   self._active, self._active_count))
                        count = int(self._active_count.get()[0])
                        active_total += count
                        indices = self._active[:count]
                        if count and (self.mode == "gemm" or (self.mode == "auto" and count > self.gemm_fraction * n)):
                            if self._tensor is not None:
                                self._dense_all(problem)  # every point: as cheap, and all bounds renewed
                                indices, count = None, n
                            else:
                                self._by_gemm(problem, indices)
                            by_gemm += 1
                        elif count:
                            self._by_filters(problem, indices)
                            by_filters += 1
                        if count:
                            self._move(indices, count)
                    self._update()
                    self._changed.data.copy_to_host_async(changed.ctypes.data, 8)
                    cupy.cuda.get_current_stream().synchronize()
                    if stop_done(int(changed[0]), n, problem.tol):
                        break
            phases["iterate"] = region.seconds()
            phases["grouping"] = grouping.seconds()
        with host_region(phases, "download"):
            back = cupy.empty_like(self._centroids64)
            back[order] = self._centroids64
            centroids = cupy.asnumpy(back) + self._shift.astype(np.float64)
            labels = cupy.asnumpy(order[self._labels])
        self._info.update(iterations_by_gemm=by_gemm, iterations_by_filter=by_filters,
                          active_fraction=active_total / (n * done))
        dense = "the tensor-core pass" if self._tensor is not None else "GEMM rows"
        notes = [f"assignment by {dense} in {by_gemm} iterations, by the group filter in {by_filters}; "
                 f"points past the global filter: {active_total / (n * done):.1%} on average "
                 f"({self._groups} groups)"]
        if self._tensor is not None:
            rechecked = self._tensor.rechecked()
            self._info.update(rechecked_points=rechecked)
            notes.append(f"points re-checked in FP32 by the tensor-core pass: {rechecked} of "
                         f"{n * by_gemm} dense assignments")
        return Result(centroids=centroids, iterations=done, phases=phases, labels=labels, notes=notes)

    def release(self) -> None:
        super().release()
        for name in ("_labels", "_centroids", "_centroids64", "_tensor", "_point_norms", "_upper", "_lower",
                     "_previous", "_counts", "_sums2d", "_active", "_active_count", "_norms", "_cmax", "_drift",
                     "_group_drift", "_group_start", "_group_of", "_group_member"):
            self.__dict__.pop(name, None)

    def bytes_per_iteration(self, problem: Problem):
        return None  # the work per iteration depends on the filters: no roofline claim

    def fp32_per_distance(self, problem: Problem):
        return None
