"""lowd.cu's kernels for d <= 32, shared by the small-k and tiled strategies (small_k.py,
tiled.py): compiled for one d, one assignment pass per iteration that adds each point into
k x (d + 1) float64 sums (counts in the last column), then `finish` makes the centroids.

A pass runs over all the points (the whole-run adapter) or over one chunk of them at a time
(kmbench-gpu-stream: load_chunk, add_chunk, and finish_pass once per iteration).
"""

from __future__ import annotations

import os

import numpy as np

from impls.gpu.kmbench_gpu.strategies.base import Strategy, source
from kmbench.errors import ImplementationError

TILED_MAX_DIM = 32  # lowd.cu is compiled for d up to here; above, the tensor path or GEMM
SMALL_DIM = 8  # up to here a point's coordinates stay in registers beside k accumulators (resident, small-k)
DIRECT_MAX_DIM = 32  # the tiled kernel computes |x - c|^2 directly up to here (tiled_distance)
# The tiled kernel lists candidates up to here (tiled_pruning). Where nothing can be pruned
# (shuffled blobs, 1e6 points, k = 1000) listing cost 1.5% at d = 8, 4% at 16 and 44% at 32.
PRUNE_MAX_DIM = 8


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


def tiled_pruning(d: int) -> str:
    """Whether the tiled kernel first lists, per block, the centroids that can be nearest to one
    of its points ("box") or scans them all ("off"): up to PRUNE_MAX_DIM, and only with direct
    distances, whose rounding the listing's margin bounds. $KMBENCH_TILED_PRUNE=1 lists at any
    d with direct distances, 0 never (for measuring)."""
    forced = os.environ.get("KMBENCH_TILED_PRUNE") or None
    if forced not in (None, "0", "1"):
        raise ImplementationError("KMBENCH_TILED_PRUNE must be 0 or 1")
    wanted = d <= PRUNE_MAX_DIM if forced is None else forced == "1"
    return "box" if wanted and tiled_distance(d) == "direct" else "off"


def points_per_thread(d: int) -> int:
    """Points each thread of the tiled kernel holds: more share each shared-memory load of a
    centroid, fewer keep the registers (POINTS x d floats) from spilling."""
    return 4 if d <= 4 else 2 if d <= 16 else 1


class LowD(Strategy):
    max_dim = TILED_MAX_DIM
    kernel_name = ""  # lowd.cu's assignment kernel for this strategy

    def arguments(self, x, n: int, labels) -> tuple:
        """The assignment kernel's arguments over n centred points `x`."""
        raise NotImplementedError

    def compile(self) -> None:
        import cupy

        self.points = points_per_thread(self.d)
        self.form = tiled_distance(self.d)
        self.pruning = tiled_pruning(self.d)
        module = cupy.RawModule(code=source("lowd.cu"),
                                options=("-std=c++17", f"-DDIM={self.d}", f"-DPOINTS={self.points}",
                                         f"-DDIRECT={int(self.form == 'direct')}",
                                         f"-DPRUNE={int(self.pruning == 'box')}"))
        self.kernel = self.assignment_kernel(module)
        self.finish_kernel = module.get_function("finish")
        self.kernel.compile()  # here, not inside the timed region

    def assignment_kernel(self, lowd):
        """The compiled assignment kernel, from lowd.cu's module `lowd` unless it lives elsewhere."""
        return lowd.get_function(self.kernel_name)

    def allocate(self, x, changed, labels: bool = True) -> None:
        """Besides the points: centroids (float32 and float64), half norms, and the k x (d + 1)
        float64 sums with the counts last."""
        import cupy

        super().allocate(x, changed, labels)
        k, d = self.k, self.d
        self.labels = cupy.full(self.n, -1, dtype=cupy.int32) if labels else None
        self.centroids = cupy.empty((k, d), dtype=cupy.float32)
        self.centroids64 = cupy.empty((k, d), dtype=cupy.float64)
        self.half_norms = cupy.empty(k, dtype=cupy.float32)
        self.sums = cupy.zeros(k * (d + 1), dtype=cupy.float64)

    def start(self, start, track: bool) -> None:
        self.centroids64.set(start)
        self.centroids.set(start.astype(np.float32))
        self.half_norms.set(0.5 * (start.astype(np.float32) ** 2).sum(axis=1, dtype=np.float32))
        self.sums.fill(0)
        if track and self.labels is not None:
            self.labels.fill(-1)

    def iterate(self, track: bool, combine=None) -> None:
        self.assign(self.x, self.n, self.labels if track else None, self.blocks)
        if combine is not None:
            combine(self.sums, self.changed)  # counts ride in the sums' last column
        self.finish_pass()

    def assign(self, x, n: int, labels, blocks: int) -> None:
        """The assignment kernel over n centred points `x`: labels (None: not kept) and their
        float64 sums added into self.sums."""
        labels = np.uint64(0) if labels is None else labels  # a null pointer: no labels kept
        self.kernel((blocks,), (self.block_size,), self.arguments(x, n, labels))

    # ------------------------------------------------------------------ a pass in chunks

    def pass_info(self) -> dict:
        """The streamed row's fields of this strategy."""
        return {"points_per_thread": self.points, "block_size": self.block_size}

    def load_chunk(self, raw, shift) -> None:
        """A chunk as stored (m x d float32 on the GPU), centred into the kernels' buffer."""
        import cupy

        cupy.subtract(raw, shift, out=self.x[:raw.shape[0]])

    def add_chunk(self, m: int, track: bool, previous) -> None:
        """The loaded chunk's labels (its rows `previous` of the run's, under the tolerance
        rule) and sums."""
        self.assign(self.x, m, previous if track else None, self.grid(m))

    def finish_pass(self) -> None:
        """New centroids from self.sums (cleared for the next iteration)."""
        k = self.k
        self.finish_kernel(((k + 255) // 256,), (256,),
                           (self.sums, self.centroids, self.centroids64, self.half_norms, np.int32(k)))
