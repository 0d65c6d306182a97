"""triton-fused: our own Lloyd in Triton, one fused kernel per iteration (kernels.py) that
assigns every point and adds it to its cluster's float64 sum, then a few PyTorch operations
on the k x d sums for the new centroids.

Exact in the same sense as kmbench-gpu: FP32 scores on data shifted by their mean (the same
`upload_centred`), float64 sums across blocks, float64 centroids. Under the iterations rule
the whole run is one CUDA graph captured in prepare (Triton compiles there too, outside the
timed region); under the tolerance rule the host reads the changed-label count after each
iteration. Timed with CUDA events around the loop, as every GPU row.
"""

from __future__ import annotations

import os

import numpy as np

from kmbench.errors import ImplementationError
from kmbench.protocol import Implementation, Problem, Result, stop_done
from kmbench.protocol.timing import host_region

LOW_D_MAX = 8  # above this, distances by tl.dot over chunks of BLOCK_D dimensions
BROADCAST_ELEMENTS = 4096  # BLOCK_N x BLOCK_K x DIM_PAD float64 slot sums: 32 per thread of 4 warps
PROGRAMS_PER_SM = 4  # 4, 16 and 64 ran within 6% of each other at n = 1e7 (H100)
NUM_WARPS = 4
MAX_POINTS = 2**31 - 1  # labels and counts are int32


def _pow2(value: int) -> int:
    return 1 << max(0, int(value) - 1).bit_length()


def tiling(d: int, k: int) -> dict:
    """The kernel's compile-time shape for (d, k): see kernels.py for what each one selects."""
    if d <= LOW_D_MAX:
        pad = _pow2(d)
        block_k = min(_pow2(k), 32)
        block_n = max(16, min(256, BROADCAST_ELEMENTS // (block_k * pad)))
        return {"DIM_PAD": pad, "BLOCK_N": block_n, "BLOCK_K": block_k, "BLOCK_D": pad, "LOW_D": True,
                "SUMS_IN_PROGRAM": k <= block_k}
    return {"DIM_PAD": 16, "BLOCK_N": 64, "BLOCK_K": 64, "BLOCK_D": min(32, max(16, _pow2(d))),
            "LOW_D": False, "SUMS_IN_PROGRAM": False}


class TritonFused(Implementation):
    name = "triton-fused"
    row_order = 140
    label = "triton-fused"
    description = ("our own Triton kernel: assignment and float64 sums fused in one pass, FP32 "
                   "scores on mean-shifted data (tl.dot in IEEE FP32 above d = 8)")
    source = "kmbench's own (the Yinyang issue: a Triton fused kernel)"
    dtype = "float32"
    on_gpus = "one"

    def __init__(self):
        self.use_graph = os.environ.get("KMBENCH_CUDA_GRAPH", "1") != "0"
        self._info: dict = {}

    def available(self):
        from impls.peers.torch_lloyd import torch_gpu_status

        return torch_gpu_status("triton", "Triton is not installed: pip install triton "
                                          "(it comes with PyTorch on Linux)")

    def follows_tolerance(self, tol: float) -> bool:
        return True

    def prepare(self, problem: Problem) -> None:
        import torch
        import triton

        from impls.gpu.kmbench_gpu import upload_centred

        if problem.n > MAX_POINTS:
            raise ImplementationError(f"{self.name} counts points in int32: n must be <= {MAX_POINTS}")
        n, d, k = problem.n, problem.d, problem.k
        phases: dict[str, float] = {}
        with host_region(phases, "upload"):
            x, shift = upload_centred(problem.data)
            self._x = torch.from_dlpack(x)  # the same memory, seen by PyTorch
            self._shift = shift.astype(np.float64)
            self._centroids64 = torch.zeros((k, d), dtype=torch.float64, device="cuda")
            self._centroids = torch.zeros((k, d), dtype=torch.float32, device="cuda")
            self._half_norms = torch.zeros(k, dtype=torch.float32, device="cuda")
            self._sums = torch.zeros((k, d), dtype=torch.float64, device="cuda")
            self._counts = torch.zeros(k, dtype=torch.int32, device="cuda")
            self._labels = torch.full((n,), -1, dtype=torch.int32, device="cuda")
            self._changed = torch.zeros(1, dtype=torch.int32, device="cuda")
            torch.cuda.synchronize()
        self._tiling = tiling(d, k)
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        self._programs = max(1, min(triton.cdiv(n, self._tiling["BLOCK_N"]), sms * PROGRAMS_PER_SM))
        with host_region(phases, "compile"):  # Triton compiles on the first launch (or reads its cache)
            from impls.gpu.triton_fused.kernels import assign_and_sum

            self._kernel = assign_and_sum
            for track in (False, True):
                self._launch(problem, track)
            torch.cuda.synchronize()
        self._graph, self._graph_iterations = None, problem.iterations
        if self.use_graph and problem.tol is None:
            with host_region(phases, "capture"):
                self._graph = self._capture(problem)
        self._setup = phases
        self._info = {"library": f"triton {triton.__version__}", "torch": torch.__version__,
                      "precision": "fp32 (ieee), float64 sums", "programs": self._programs,
                      "launch": "cuda graph" if self._graph is not None else "stream",
                      **{name.lower(): value for name, value in self._tiling.items()}}

    def _launch(self, problem: Problem, track: bool) -> None:
        self._kernel[(self._programs,)](
            self._x, self._centroids, self._half_norms, self._labels, self._sums, self._counts,
            self._changed, problem.n, problem.k, DIM=problem.d, TRACK=track, num_warps=NUM_WARPS,
            **self._tiling)

    def _iterate(self, problem: Problem, track: bool) -> None:
        """One Lloyd iteration: the fused pass, then the new centroids (an empty cluster keeps its own)."""
        import torch

        self._sums.zero_()
        self._counts.zero_()
        self._launch(problem, track)
        filled = (self._counts > 0)[:, None]
        counts = self._counts.clamp(min=1).to(torch.float64)[:, None]
        self._centroids64.copy_(torch.where(filled, self._sums / counts, self._centroids64))
        self._follow_centroids64()

    def _follow_centroids64(self) -> None:
        """The kernel's inputs from the float64 centroids: their float32 copy and |c|^2 / 2."""
        self._centroids.copy_(self._centroids64)
        self._half_norms.copy_(0.5 * (self._centroids * self._centroids).sum(dim=1))

    def _capture(self, problem: Problem):
        import torch

        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(problem.iterations):
                self._iterate(problem, track=False)
        return graph

    def run(self, problem: Problem) -> Result:
        import torch

        start = np.asarray(problem.initial_centroids, dtype=np.float64) - self._shift
        self._centroids64.copy_(torch.from_numpy(start))
        self._follow_centroids64()
        track = problem.tol is not None
        self._labels.fill_(-1)
        torch.cuda.synchronize()
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        done = problem.iterations
        begin.record()
        if self._graph is not None and not track and problem.iterations == self._graph_iterations:
            # (a graph holds the iterations it was captured with; the judge's one-step runs launch plainly)
            self._graph.replay()
        else:
            for done in range(1, problem.iterations + 1):
                if track:
                    self._changed.zero_()
                self._iterate(problem, track)
                if track and stop_done(int(self._changed.item()), problem.n, problem.tol):
                    break
        end.record()
        end.synchronize()
        phases = {"iterate": begin.elapsed_time(end) / 1000.0}
        with host_region(phases, "download"):
            centroids = self._centroids64.cpu().numpy() + self._shift
        return Result(centroids=centroids, iterations=done, phases=phases)

    def release(self) -> None:
        for name in ("_graph", "_x", "_centroids64", "_centroids", "_half_norms", "_sums", "_counts",
                     "_labels", "_changed"):
            self.__dict__.pop(name, None)

    def build_info(self) -> dict:
        return dict(self._info)

    def setup_phases(self) -> dict[str, float]:
        return dict(getattr(self, "_setup", {}))

    def bytes_per_iteration(self, problem: Problem) -> int:
        return problem.n * problem.d * 4 + (problem.n * 8 if problem.tol is not None else 0)

    def fp32_per_distance(self, problem: Problem) -> float:
        return problem.d + 1  # d multiply-adds and the compare
