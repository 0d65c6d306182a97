"""A peer: KeOps (pykeops), the k-means of its tutorial as users write it.

The assignment is the argmin of symbolic (x_i - c_j)^2 distances, a KeOps reduction that
KeOps compiles for each (d, dtype) on first use, in FP32; the update is the torch row's
(index_add_ and bincount, FP32 sums, as the tutorial's scatter_add_). Forced into the
protocol: the harness's centroids and iteration count, and an empty cluster keeps its
centroid where the tutorial divides by zero.

KeOps compiles in a child process. On kmbench's GPU machine (pykeops 2.3, CUDA 13.0's nvrtc)
its compiler crashed the process with SIGSEGV every time it was the first nvrtc compile
there, and never when CuPy had compiled a kernel first (seen, not understood). The child
does that first (with an empty CuPy cache, so it really compiles), then compiles the formula
into KeOps's cache, where this process finds it; if KeOps crashes all the same, the cell is
an error that says so, and the run goes on.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from impls.peers.torch_lloyd import TorchLloyd
from kmbench.errors import ImplementationError
from kmbench.protocol import Problem
from kmbench.protocol.timing import host_region

ROOT = Path(__file__).resolve().parents[2]  # the checkout that holds impls/, for the child's imports
COMPILE_TIMEOUT_S = 900

# Run as `python -c CHILD n k d`: the same formula, on tensors of the same shapes.
CHILD = """
import sys
try:
    import cupy
    cupy.RawModule(code='extern "C" __global__ void warm(float* a) { a[0] = 1.0f; }').get_function("warm")
except ImportError:
    pass
import torch
from impls.peers.keops_kmeans import keops_nearest
n, k, d = map(int, sys.argv[1:])
keops_nearest(torch.zeros((n, d), device="cuda"), torch.zeros((k, d), device="cuda"))
torch.cuda.synchronize()
"""


def keops_nearest(x, centroids):
    """Each point's nearest centroid, as KeOps's tutorial writes it."""
    from pykeops.torch import LazyTensor

    x_i = LazyTensor(x[:, None, :])
    c_j = LazyTensor(centroids[None, :, :])
    return ((x_i - c_j) ** 2).sum(-1).argmin(dim=1).long().view(-1)


def compile_in_child(n: int, k: int, d: int) -> None:
    """Fill KeOps's cache for this shape from a child process; a crash there is an error here."""
    with tempfile.TemporaryDirectory(prefix="kmbench-keops-") as scratch:
        env = dict(os.environ, CUPY_CACHE_DIR=scratch,
                   PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        try:
            done = subprocess.run([sys.executable, "-c", CHILD, str(n), str(k), str(d)], env=env,
                                  capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise ImplementationError(f"KeOps did not compile its k-means formula within {COMPILE_TIMEOUT_S} s")
    if done.returncode != 0:
        how = f"signal {-done.returncode}" if done.returncode < 0 else f"exit status {done.returncode}"
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ImplementationError(f"KeOps's compiler failed for d = {d} ({how}): {last}")


class PykeopsKMeans(TorchLloyd):
    name = "pykeops"
    row_order = 210
    label = "KeOps (pykeops)"
    description = "pykeops LazyTensor argmin of (x_i - c_j)^2, torch index_add_ sums; FP32 throughout"
    source = "peer users pick (the Yinyang issue): KeOps's k-means formulation"
    library = "pykeops"
    install_hint = ("pykeops is not installed: pip install pykeops (it compiles its kernels at first "
                    "use, so it needs a C++ compiler and the CUDA headers)")

    def prepare(self, problem: Problem) -> None:
        import torch

        super().prepare(problem)
        with host_region(self._setup, "compile"):
            compile_in_child(problem.n, problem.k, problem.d)
            start = torch.as_tensor(np.asarray(problem.initial_centroids, dtype=np.float32), device="cuda")
            self._nearest(start)  # loads what the child compiled
            torch.cuda.synchronize()

    def _nearest(self, centroids):
        return keops_nearest(self._x, centroids)

    def build_info(self) -> dict:
        import pykeops

        return {"library": f"pykeops {pykeops.__version__}", "torch": getattr(self, "_version", "?"),
                "precision": "fp32 (distances and sums)",
                "not_forced": "sums in FP32, as KeOps's tutorial makes them"}
