"""Compare an implementation's centroids with the float64 oracle.

Two measures, both must pass:
- centroid error: ||C - R||_F / max(||R||_F, sqrt(k) * spread), where spread is the
  RMS distance of the points from their mean. The floor keeps the measure meaningful
  when the reference centroids sit near the origin.
- inertia difference: |I(C) - I(R)| / I(R), inertia measured in float64 by us on the
  same data for both sets of centroids.

Tolerances are set for float32 arithmetic: a float32 sum over 1e6 points carries a
relative rounding error of order 1e-5..1e-4, and 300 iterations near a fixed point do
not amplify it. A wrong kernel (a missed point, a stale mean, a wrong count) moves a
centroid by far more. float64 implementations get tolerances 1000 times tighter.

Some problems do amplify rounding: with many centroids crowded into few blobs, Lloyd
drifts for hundreds of iterations and near-ties flip, so two correct float32 programs
end 1e-3 apart (measured: 100 centroids on 5 blobs, n=1e5). The oracle therefore
measures the problem's sensitivity: a second run of the same code in float32 (float32
distances, running sums in point order and stored centroids), which is what an honest
float32 program computes. A float32 result may differ by up to
max(1e-3, SENSITIVITY_FACTOR x that run's divergence); the inertia tolerance never loosens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kmbench import reference

OK, MISMATCH, ERROR, SKIPPED = "ok", "mismatch", "error", "skipped"
TOLERANCES = {  # dtype -> (centroid error, inertia difference)
    "float32": (1e-3, 1e-4),
    "float64": (1e-6, 1e-7),
}
SENSITIVITY_FACTOR = 10.0


@dataclass
class Oracle:
    """The reference result for one problem, computed once and shared by every cell."""

    centroids: np.ndarray
    inertia: float
    spread: float
    sensitivity: float = 0.0  # centroid error of an honest float32 run of the reference

    @classmethod
    def compute(cls, data, initial_centroids, iterations) -> "Oracle":
        n, k = data.shape[0], initial_centroids.shape[0]
        xp = reference.array_module(n, k, iterations)
        device_data = xp.asarray(data)
        centroids, _ = reference.lloyd(device_data, initial_centroids, iterations, xp)
        total = reference.inertia(device_data, centroids, xp)
        as_float64 = xp.asarray(data, dtype=xp.float64)
        spread = float(xp.sqrt(((as_float64 - as_float64.mean(axis=0)) ** 2).sum(axis=1).mean()))
        del as_float64
        oracle = cls(reference.to_numpy(centroids), total, spread)
        drifted, _ = reference.lloyd(device_data, initial_centroids, iterations, xp, dtype=xp.float32)
        oracle.sensitivity = centroid_error(reference.to_numpy(drifted), oracle)
        return oracle

    def tolerances(self, dtype: str) -> tuple[float, float]:
        tol_c, tol_i = TOLERANCES.get(dtype, TOLERANCES["float32"])
        if dtype == "float32":
            tol_c = max(tol_c, SENSITIVITY_FACTOR * self.sensitivity)
        return tol_c, tol_i


@dataclass
class Verdict:
    status: str
    centroid_error: float | None = None
    inertia_difference: float | None = None
    detail: str = ""

    def as_dict(self) -> dict:
        return {
            "status": self.status,
            "centroid_error": self.centroid_error,
            "inertia_difference": self.inertia_difference,
            "detail": self.detail,
        }


def centroid_error(centroids: np.ndarray, oracle: Oracle) -> float:
    ref = oracle.centroids
    scale = max(float(np.linalg.norm(ref)), np.sqrt(ref.shape[0]) * oracle.spread, 1e-300)
    return float(np.linalg.norm(centroids.astype(np.float64) - ref) / scale)


def judge(centroids, oracle: Oracle, data, dtype: str = "float32", check_inertia: bool = True) -> Verdict:
    """Validate one result's centroids against the oracle."""
    centroids = np.asarray(centroids)
    if centroids.shape != oracle.centroids.shape:
        return Verdict(MISMATCH, detail=f"centroids have shape {centroids.shape}, "
                                        f"expected {oracle.centroids.shape}")
    if not np.isfinite(centroids).all():
        return Verdict(MISMATCH, detail="centroids contain NaN or infinite values")
    tol_c, tol_i = oracle.tolerances(dtype)
    error = centroid_error(centroids, oracle)
    difference = None
    if check_inertia:
        xp = reference.array_module(data.shape[0], centroids.shape[0], 1000)
        total = reference.inertia(xp.asarray(data), centroids, xp)
        difference = abs(total - oracle.inertia) / max(oracle.inertia, 1e-300)
    problems = []
    if error > tol_c:
        problems.append(f"centroid error {error:.2e} > {tol_c:.1e}")
    if difference is not None and difference > tol_i:
        problems.append(f"inertia difference {difference:.2e} > {tol_i:.0e}")
    status = MISMATCH if problems else OK
    return Verdict(status, error, difference, "; ".join(problems))


def worst(verdicts: list[Verdict]) -> Verdict:
    """The verdict to show for a cell: the worst of its repeats."""
    order = {ERROR: 3, MISMATCH: 2, OK: 1, SKIPPED: 0}
    return max(verdicts, key=lambda v: (order[v.status], v.centroid_error or 0.0))
