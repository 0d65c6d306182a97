"""The "assign" task (document 001): one assignment pass, the part of Lloyd that the
document's kernel ladder tunes. Given points, centroids and the previous labels, an
implementation returns every point's nearest centroid (ties to the lower index) and whether
any label changed.

The oracle computes the labels in float64 from the data as stored. A returned label may
differ from the oracle's only at a float32 tie (two centroids closer than float32 can tell
apart, `kmbench.protocol.reference.two_nearest`), and then only to the other of its two nearest. The
changed flag must agree, unless every disagreement is such a tie.

Measured and recorded by kmbench.tasks.tasks (`kmbench reproduce assign-ladder` / `batched`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kmbench.protocol import reference


@dataclass(frozen=True)
class AssignProblem:
    data: np.ndarray  # (n, d)
    centroids: np.ndarray  # (k, d)
    previous: np.ndarray  # (n,) labels of the previous pass, for the changed flag

    @property
    def n(self) -> int:
        return self.data.shape[0]

    @property
    def k(self) -> int:
        return self.centroids.shape[0]


@dataclass
class AssignResult:
    labels: np.ndarray  # (n,)
    changed: bool


@dataclass
class AssignOracle:
    labels: np.ndarray  # float64 nearest, ties to the lower index
    second: np.ndarray  # the second nearest (labels itself where k = 1)
    tie: np.ndarray  # bool: a float32 tie
    changed: bool

    @classmethod
    def compute(cls, problem: AssignProblem) -> "AssignOracle":
        n = problem.n
        labels, second = np.empty(n, np.int64), np.empty(n, np.int64)
        tie = np.zeros(n, dtype=bool)
        if problem.k == 1:
            labels[:] = 0
            second[:] = 0
        else:
            center = reference.mean(problem.data)
            for rows, first, other, _, _, near in reference.two_nearest(problem.data, problem.centroids,
                                                                       center=center):
                labels[rows], second[rows], tie[rows] = first, other, near
        return cls(labels, second, tie, bool((labels != problem.previous).any()))


def judge(result: AssignResult, oracle: AssignOracle) -> tuple[str, str]:
    labels = np.asarray(result.labels)
    if labels.shape != oracle.labels.shape:
        return "mismatch", f"labels have shape {labels.shape}, expected {oracle.labels.shape}"
    differ = labels != oracle.labels
    allowed = differ & oracle.tie & (labels == oracle.second)
    wrong = differ & ~allowed
    if wrong.any():
        first = int(np.argmax(wrong))
        return "mismatch", (f"{int(wrong.sum())} of {len(labels)} labels are not the nearest centroid "
                            f"(first at point {first}: {int(labels[first])}, expected {int(oracle.labels[first])})")
    if bool(result.changed) != oracle.changed and not (differ.any() and not wrong.any()):
        return "mismatch", f"changed flag is {bool(result.changed)}, expected {oracle.changed}"
    return "ok", ""
