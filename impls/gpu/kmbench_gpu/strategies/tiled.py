"""tiled (d <= 32, any k): lowd.cu's `tiled` kernel. Centroids in shared-memory tiles,
several points per thread (points_per_thread) sharing each load; |x - c|^2 computed directly
(the expanded |c|^2/2 - x.c, half the arithmetic, lost the radial tree's inertia: NOTES.md;
tiled_distance says which, and $KMBENCH_TILED_DISTANCE forces one). Each block first lists
the centroids that can be nearest to one of its points, from the box around them, and scans
only those (tiled_pruning; NOTES.md). A warp whose points all chose one cluster adds one warp
sum; otherwise float64 atomics per point."""

from __future__ import annotations

import numpy as np

from impls.gpu.kmbench_gpu.strategies.base import BLOCK, BLOCKS_PER_SM, blocks
from impls.gpu.kmbench_gpu.strategies.lowd import LowD, tiled_distance, tiled_pruning
from kmbench.protocol import Problem


class Tiled(LowD):
    name = "tiled"
    kernel_name = "tiled"

    @property
    def distance(self) -> str:
        return self.form  # as compiled

    @classmethod
    def distance_form(cls, problem: Problem) -> str:
        return "direct" if tiled_distance(problem.d) == "direct" else "any"

    @classmethod
    def fp32_per_distance(cls, problem: Problem) -> float | None:
        # Pruned, the distances computed depend on how the data lie: no compute floor is claimed.
        return None if tiled_pruning(problem.d) == "box" else super().fp32_per_distance(problem)

    def info(self) -> dict:
        return {"pruning": self.pruning}

    def pass_info(self) -> dict:
        return {**super().pass_info(), **self.info()}

    def grid(self, n: int) -> int:
        return blocks(n, BLOCK * self.points, self.sms * BLOCKS_PER_SM)  # each thread holds `points` points

    def arguments(self, x, n: int, labels) -> tuple:
        return (x, np.int64(n), self.centroids, self.half_norms, np.int32(self.k), self.sums, labels, self.changed)
