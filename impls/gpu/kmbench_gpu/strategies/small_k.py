"""small-k (d <= 8 and k <= 32, past the resident limit): lowd.cu's `small_k` kernel, one
fused pass per iteration, one point per thread; per cluster a ballot, then a warp shuffle sum
per dimension into per-warp float64 accumulators in shared memory. Distances are direct."""

from __future__ import annotations

import numpy as np

from impls.gpu.kmbench_gpu.strategies.lowd import SMALL_DIM, LowD
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
