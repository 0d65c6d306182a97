"""A peer: Lloyd as PyTorch users write it (GEMM distances, argmin, index_add_), FP32 with
TF32 switched off, data resident on the GPU, timed with CUDA events around the loop.

The n x k score matrix is built a block of rows at a time once it would pass SCORE_BYTES, as
users do when the whole matrix does not fit (n = 4e5, k = 32,768 asked for 48.8 GiB): below
that it is one matmul, as before."""

from __future__ import annotations

import importlib

import numpy as np

from kmbench.protocol import Implementation, Problem, Result, stop_done
from kmbench.protocol.timing import host_region

# Bytes of one block's scores. The expression makes about three such temporaries, so 512 MiB
# keeps the assignment near 1.5 GiB, and a block of rows is still a large matmul (4,096 rows
# at k = 32,768).
SCORE_BYTES = 1 << 29


def rows_per_block(n: int, k: int, score_bytes: int = SCORE_BYTES) -> int:
    """Rows whose float32 scores against k centroids fit in score_bytes: at least one, at most n."""
    return int(max(1, min(n, score_bytes // (4 * k))))


def torch_gpu_status(library: str | None = None, install_hint: str = "") -> tuple[bool, str]:
    """Whether PyTorch sees a CUDA GPU here and, for a row built on another library over
    PyTorch, whether that library imports; if not, why (one sentence, with how to get it)."""
    try:
        import torch
    except ImportError:
        return False, "PyTorch is not installed: pip install torch"
    if not torch.cuda.is_available():
        return False, "PyTorch sees no CUDA GPU"
    if library:
        try:
            importlib.import_module(library)
        except ImportError:
            return False, install_hint
    return True, ""


class TorchLloyd(Implementation):
    name = "torch"
    row_order = 170
    ranked_in_reports = True
    label = "PyTorch (GEMM Lloyd)"
    description = "torch: ||c||^2 - 2 x c^T by matmul, argmin, index_add_ sums; FP32, TF32 off"
    source = "a peer: the way PyTorch users write k-means"
    dtype = "float32"
    library: str | None = None  # a peer built on PyTorch: the module it needs, and how to get it
    install_hint = ""
    score_bytes = SCORE_BYTES  # a test forces small blocks on an instance
    on_gpus = "one"

    def available(self):
        return torch_gpu_status(self.library, self.install_hint)

    def follows_tolerance(self, tol: float) -> bool:
        return True

    def prepare(self, problem: Problem) -> None:
        import torch

        phases: dict[str, float] = {}
        with host_region(phases, "upload"):
            self._x = torch.tensor(np.asarray(problem.data, dtype=np.float32), device="cuda")
            torch.cuda.synchronize()
        self._setup = phases
        self._version = torch.__version__

    def run(self, problem: Problem) -> Result:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        x, k = self._x, problem.k
        centroids = torch.as_tensor(np.asarray(problem.initial_centroids, dtype=np.float32), device="cuda")
        labels = torch.full((problem.n,), -1, dtype=torch.int64, device="cuda")
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        done = 0
        start.record()
        for done in range(1, problem.iterations + 1):
            new = self._nearest(centroids)
            sums = torch.zeros_like(centroids).index_add_(0, new, x)
            counts = torch.bincount(new, minlength=k).to(x.dtype)
            filled = counts > 0
            centroids = torch.where(filled[:, None], sums / counts.clamp(min=1)[:, None], centroids)
            if problem.tol is not None:
                changed = int((new != labels).sum())  # a host read, as users write it
                labels = new
                if stop_done(changed, problem.n, problem.tol):
                    break
        end.record()
        end.synchronize()
        phases = {"iterate": start.elapsed_time(end) / 1000.0}
        return Result(centroids=centroids.double().cpu().numpy(), iterations=done, phases=phases)

    def _nearest(self, centroids):
        """Each point's nearest centroid (a peer that assigns its own way overrides this)."""
        import torch

        norms = (centroids * centroids).sum(1)
        step = rows_per_block(len(self._x), len(centroids), self.score_bytes)
        if step >= len(self._x):
            return (norms - 2.0 * (self._x @ centroids.T)).argmin(1)
        return torch.cat([(norms - 2.0 * (block @ centroids.T)).argmin(1) for block in self._x.split(step)])

    def release(self) -> None:
        self.__dict__.pop("_x", None)

    def build_info(self) -> dict:
        return {"library": f"torch {getattr(self, '_version', '?')}", "precision": "fp32, tf32 off"}

    def setup_phases(self) -> dict[str, float]:
        return dict(getattr(self, "_setup", {}))

    def bytes_per_iteration(self, problem: Problem) -> int:
        return problem.n * problem.d * 4

    def fp32_per_distance(self, problem: Problem) -> float:
        return problem.d + 1  # the GEMM's d FMAs, and the argmin's compare
