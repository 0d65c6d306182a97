"""small-k (d <= 8 and k <= 32, past the resident limit): lowd.cu's `small_k` kernel, one
fused pass per iteration, one point per thread; per cluster a ballot, then a warp shuffle sum
per dimension into per-warp float64 accumulators in shared memory. Distances are direct.

columns (d <= 8 and k * (d + 1) <= 40, where each pass's sums must be seen before the centroids
are made: a shard of several GPUs, a streamed chunk): resident.cu's `columns` kernel, the
resident kernel's accumulation for one pass a launch (each thread its own float64 column of
every cluster's sums in shared memory, eight points a thread in flight), then lowd.cu's
`finish`. Where the resident kernel cannot run, it does what small-k does without its warp
shuffles, which bound small-k at 1e9 points to a third of the memory's speed."""

from __future__ import annotations

import numpy as np

from impls.gpu.kmbench_gpu.strategies.base import blocks, source
from impls.gpu.kmbench_gpu.strategies.lowd import SMALL_DIM, LowD
from impls.gpu.kmbench_gpu.strategies.resident import RESIDENT_BLOCK, RESIDENT_POINTS, RESIDENT_SLOTS, blocks_per_sm
from kmbench.errors import ImplementationError
from kmbench.protocol import Problem

SMALL_K = 32  # one warp's lanes, one cluster each


class SmallK(LowD):
    name = "small-k"
    kernel_name = "small_k"
    distance = "direct"

    @classmethod
    def limits(cls, problem: Problem) -> None:
        super().limits(problem)
        if problem.k > SMALL_K or problem.d > SMALL_DIM:
            raise ImplementationError(f"strategy small-k handles k <= {SMALL_K} and d <= {SMALL_DIM}")

    def arguments(self, x, n: int, labels) -> tuple:
        return (x, np.int64(n), self.centroids, np.int32(self.k), self.sums, labels, self.changed)


class Columns(LowD):
    name = "columns"
    distance = "direct"
    block_size = RESIDENT_BLOCK

    @classmethod
    def limits(cls, problem: Problem) -> None:
        super().limits(problem)
        if problem.k * (problem.d + 1) > RESIDENT_SLOTS or problem.d > SMALL_DIM:
            raise ImplementationError(f"strategy columns handles d <= {SMALL_DIM} and k * (d + 1) <= {RESIDENT_SLOTS}")

    def assignment_kernel(self, lowd):
        import cupy

        module = cupy.RawModule(code=source("resident.cu"),
                                options=("-std=c++17", f"-DDIM={self.d}", f"-DKC={self.k}"))
        return module.get_function("columns")

    def compile(self) -> None:
        super().compile()
        self.points = RESIDENT_POINTS
        self.held = blocks_per_sm(self.kernel)

    def grid(self, n: int) -> int:
        """As many blocks as the GPU holds at once, as the resident kernel has (four an SM is
        only what resident.cu's __launch_bounds__ asks for)."""
        return blocks(n, RESIDENT_BLOCK * RESIDENT_POINTS, self.sms * self.held)

    def arguments(self, x, n: int, labels) -> tuple:
        return (x, np.int64(n), self.centroids, self.sums, labels, self.changed)
