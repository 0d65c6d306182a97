"""One assignment pass (document 001's task) in NumPy, float32 like the document's kernels:
direct squared distances to every centroid, argmin (ties to the lower index), and the
changed flag against the previous labels."""

from __future__ import annotations

import numpy as np

from kmbench.tasks.assign import AssignProblem, AssignResult
from kmbench.protocol import Implementation
from kmbench.protocol.timing import host_region

ROWS_PER_BLOCK = 1 << 16


class AssignNumpy(Implementation):
    name = "assign-numpy"
    row_order = 350
    label = "NumPy (assign)"
    description = "one float32 assignment pass: direct distances, argmin, changed flag"
    source = "001 (the assignment kernel), restated in NumPy"
    tasks = ("assign",)

    def run(self, problem: AssignProblem) -> AssignResult:
        data = np.asarray(problem.data, dtype=np.float32)
        centroids = np.asarray(problem.centroids, dtype=np.float32)
        labels = np.empty(problem.n, dtype=np.int64)
        phases: dict[str, float] = {}
        with host_region(phases, "iterate"):
            for start in range(0, problem.n, ROWS_PER_BLOCK):
                block = data[start:start + ROWS_PER_BLOCK]
                distances = ((block[:, None, :] - centroids[None, :, :]) ** 2).sum(axis=2)
                labels[start:start + ROWS_PER_BLOCK] = distances.argmin(axis=1)
            changed = bool((labels != problem.previous).any())
        self.phases = phases
        return AssignResult(labels, changed)
