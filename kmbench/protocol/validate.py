"""Compare an implementation's centroids with the float64 oracle.

Two measures, both must pass:
- centroid error: ||C - R||_F / (sqrt(k) * spread): the RMS displacement of the centroids in
  units of the data's spread (the RMS distance of the points from their mean). Spread does
  not change when the data move, so the measure means the same thing at the origin and at
  1e6; a norm of R in the scale (as before) let centroids 90 units off pass on unit-spread
  data sitting near 1e6.
- inertia difference: |I(C) - I(R)| / max(I(R), INERTIA_FLOOR * n * spread^2), inertia
  measured in float64 by us on the same data for both sets of centroids. The floor, a tiny
  fraction of the data's total sum of squares, keeps the ratio meaningful when the reference
  inertia is zero (n = k: every point its own cluster).

Tolerances are set for float32 arithmetic: a float32 sum over 1e6 points carries a relative
rounding error of order 1e-5..1e-4, and iterations near a fixed point do not amplify it. A
wrong kernel (a missed point, a stale mean, a wrong count) moves a centroid by far more.
float64 implementations get tolerances 1000 times tighter.

Two things a correct float32 program cannot avoid widen the float32 tolerances, each
measured on the problem itself:
- sensitivity: with many centroids crowded into few blobs, Lloyd drifts for hundreds of
  iterations and near-ties flip, so two correct float32 programs end 1e-3 apart. The oracle
  runs itself once more as a careful float32 program does (float32 distances, float32 sums of
  each point's offset from its old centroid, float32 stored centroids); a float32 result may
  differ by up to max(1e-3, SENSITIVITY_FACTOR x that run's divergence).
- ties: a point whose two nearest centroids are closer together than float32 can tell apart
  (computing the distance directly, or expanded as |c|^2 - 2 x.c on centred data) may go
  either way. The oracle counts such points in its last assignment and bounds how far
  their going the other way moves each mean; TIE_FACTOR x that bound is allowed too.
- representation: a centroid at 1e6 stored in float32 is only known to 0.03. The inertia
  tolerance becomes max(1e-4, SENSITIVITY_FACTOR x the inertia cost of rounding the
  reference centroids to float32). That cost is zero near the origin, so there the inertia
  check stays as tight as before.
- carried-over ties: on dense data with k in the thousands a float32 program flips a near-tie
  or two in every iteration (gaps of 1e-7), and each flip carries over into the next
  iterations; the run ends at a neighbouring fixed point whose inertia differs by more than
  1e-4. The careful float32 run of the reference does the same, so its inertia difference,
  times SENSITIVITY_FACTOR, is allowed too (inertia_sensitivity).
A program that sums raw coordinates far from the origin in float32 (or expands the distance
as |c|^2 - 2 x.c in float32) is off by far more than either allowance, and is flagged.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from kmbench.protocol import reference

OK, MISMATCH, ERROR, SKIPPED = "ok", "mismatch", "error", "skipped"
TOLERANCES = {  # dtype -> (centroid error, inertia difference)
    "float32": (1e-3, 1e-4),
    "float64": (1e-6, 1e-7),
}
SENSITIVITY_FACTOR = 10.0
TIE_FACTOR = 2.0
INERTIA_FLOOR = 1e-9  # of the total sum of squares n * spread^2


@dataclass
class Oracle:
    """The reference result for one problem, computed once and shared by every cell."""

    centroids: np.ndarray
    inertia: float
    spread: float
    n: int = 0
    sensitivity: float = 0.0  # centroid error of a careful float32 run of the reference
    representation: float = 0.0  # inertia difference of the reference rounded to float32
    iterations: int = 0  # iterations the reference executed
    ties: float = 0.0  # centroid error that float32 ties in the last assignment can cause
    near_ties: int = 0  # how many points are such ties
    inertia_sensitivity: float = 0.0  # inertia difference of the careful float32 run
    emptied: int = 0  # clusters the reference left empty at some iteration (it keeps them)
    offset: float = 0.0  # how far the data's mean lies from the origin, in spreads
    _inertias: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def compute(cls, data, initial_centroids, iterations, progress=None, tol=None) -> "Oracle":
        """Run the float64 reference, then the float32 one, by the same stop rule (`tol`: see
        `kmbench.protocol.stop_done`); `progress(text)` is told of each iteration of each, so a
        long oracle shows it is working."""
        n, k = data.shape[0], initial_centroids.shape[0]
        xp = reference.array_module(n, k, iterations)
        device_data = reference.resident(data, xp)

        def stage(name):
            return None if progress is None else (
                lambda done, total: progress(f"{name}: iteration {done}/{total}"))

        run = reference.lloyd(device_data, initial_centroids, iterations, xp,
                              progress=stage("float64 reference"), tol=tol)
        total = reference.inertia(device_data, run.centroids, xp)
        oracle = cls(reference.to_numpy(run.centroids), total, reference.spread(device_data, xp), n,
                     iterations=run.iterations, emptied=run.emptied)
        # Float32 ties are counted in the last assignment, made from the centroids before it.
        shift, oracle.near_ties = reference.tie_shift(device_data, reference.to_numpy(run.previous), xp,
                                                      center=reference.mean(device_data, xp))
        oracle.ties = float(np.linalg.norm(shift)) / max(np.sqrt(k) * oracle.spread, 1e-300)
        rounded = oracle.centroids.astype(np.float32).astype(np.float64)
        oracle.representation = oracle.inertia_difference(
            reference.inertia(device_data, rounded, xp))
        drifted = reference.lloyd(device_data, initial_centroids, iterations, xp, dtype=xp.float32,
                                  progress=stage("float32 sensitivity run"), tol=tol)
        oracle.sensitivity = centroid_error(reference.to_numpy(drifted.centroids), oracle)
        oracle.inertia_sensitivity = oracle.inertia_difference(reference.inertia(device_data, drifted.centroids, xp))
        middle = reference.to_numpy(reference.mean(device_data, xp))
        oracle.offset = float(np.linalg.norm(middle)) / max(oracle.spread, 1e-300)
        return oracle

    @property
    def inertia_scale(self) -> float:
        """The denominator of the inertia difference: the reference inertia, floored."""
        return max(self.inertia, INERTIA_FLOOR * self.n * self.spread ** 2, 1e-300)

    def inertia_difference(self, value: float) -> float:
        return abs(value - self.inertia) / self.inertia_scale

    def tolerances(self, dtype: str) -> tuple[float, float]:
        tol_c, tol_i = TOLERANCES.get(dtype, TOLERANCES["float32"])
        if dtype == "float32":
            tol_c = max(tol_c, SENSITIVITY_FACTOR * self.sensitivity, TIE_FACTOR * self.ties)
            tol_i = max(tol_i, SENSITIVITY_FACTOR * self.representation,
                        SENSITIVITY_FACTOR * self.inertia_sensitivity)
        return tol_c, tol_i

    def inertia_of(self, centroids: np.ndarray, data) -> float:
        """I(C) in float64, remembered per distinct set of centroids: repeats of a
        deterministic implementation return the same bytes and cost one pass, not one each."""
        key = hashlib.sha256(np.ascontiguousarray(centroids, dtype=np.float64).tobytes()).hexdigest()
        if key not in self._inertias:
            xp = reference.array_module(data.shape[0], centroids.shape[0], 1000)
            self._inertias[key] = reference.inertia(data, centroids, xp)
        return self._inertias[key]

    def to_dict(self) -> dict:
        return {"centroids": self.centroids.tolist(), "inertia": self.inertia, "spread": self.spread,
                "n": self.n, "sensitivity": self.sensitivity, "representation": self.representation,
                "iterations": self.iterations, "ties": self.ties, "near_ties": self.near_ties,
                "inertia_sensitivity": self.inertia_sensitivity, "offset": self.offset, "emptied": self.emptied}

    @classmethod
    def from_dict(cls, payload: dict) -> "Oracle":
        return cls(np.asarray(payload["centroids"], dtype=np.float64), float(payload["inertia"]),
                   float(payload["spread"]), int(payload["n"]), float(payload["sensitivity"]),
                   float(payload["representation"]), int(payload["iterations"]),
                   float(payload["ties"]), int(payload["near_ties"]), float(payload["inertia_sensitivity"]),
                   int(payload["emptied"]), float(payload["offset"]))


@dataclass
class Verdict:
    status: str
    centroid_error: float | None = None
    inertia_difference: float | None = None
    detail: str = ""
    inertia: float | None = None

    def as_dict(self) -> dict:
        return {
            "status": self.status,
            "centroid_error": self.centroid_error,
            "inertia_difference": self.inertia_difference,
            "inertia": self.inertia,
            "detail": self.detail,
        }


def centroid_error(centroids: np.ndarray, oracle: Oracle) -> float:
    ref = oracle.centroids
    # The floor only matters when every point is the same (spread 0): then any correct
    # result equals the reference exactly, and a wrong one is wrong by a visible amount.
    scale = max(np.sqrt(ref.shape[0]) * oracle.spread,
                np.finfo(np.float64).eps * float(np.linalg.norm(ref)), 1e-300)
    return float(np.linalg.norm(centroids.astype(np.float64) - ref) / scale)


def _inertia_problem(value: float, difference: float, tolerance: float, oracle: Oracle) -> str:
    """Say what is meaningful: the relative difference where the reference inertia is a fair
    scale, the share of the data's total sum of squares where it is (near) zero."""
    if oracle.inertia >= oracle.inertia_scale:
        return f"inertia difference {difference:.2e} > {tolerance:.0e}"
    share = value / max(oracle.n * oracle.spread ** 2, 1e-300)
    return (f"inertia {share:.2e} of the data's total sum of squares where the reference has "
            f"{oracle.inertia:.3g} (difference {difference:.2e} > {tolerance:.0e} on that scale)")


def judge(centroids, oracle: Oracle, data, dtype: str = "float32") -> Verdict:
    """Validate one result's centroids against the oracle."""
    centroids = np.asarray(centroids)
    if centroids.shape != oracle.centroids.shape:
        return Verdict(MISMATCH, detail=f"centroids have shape {centroids.shape}, "
                                        f"expected {oracle.centroids.shape}")
    if not np.isfinite(centroids).all():
        return Verdict(MISMATCH, detail="centroids contain NaN or infinite values")
    tol_c, tol_i = oracle.tolerances(dtype)
    error = centroid_error(centroids, oracle)
    value = oracle.inertia_of(centroids, data)
    difference = oracle.inertia_difference(value)
    problems = []
    if error > tol_c:
        problems.append(f"centroid error {error:.2e} > {tol_c:.1e} (of the data's spread)")
    if difference > tol_i:
        problems.append(_inertia_problem(value, difference, tol_i, oracle))
    status = MISMATCH if problems else OK
    return Verdict(status, error, difference, "; ".join(problems), value)


def worst(verdicts: list[Verdict]) -> Verdict:
    """The verdict to show for a cell: the worst of its repeats."""
    order = {ERROR: 3, MISMATCH: 2, OK: 1, SKIPPED: 0}
    return max(verdicts, key=lambda v: (order[v.status], v.centroid_error or 0.0,
                                        v.inertia_difference or 0.0))
