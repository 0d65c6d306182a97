"""Verdicts: what the certified trajectory (kmbench.judge) says of a row, and the float64
reference end point kept beside it as a figure.

A row is `ok` when every Lloyd step of its trajectory is certified in the precision it declares
(kmbench.judge.certify: admissible labels, means within the rounding of the declared sum, empty
clusters kept) and its timed runs ended where that trajectory ends. `mismatch` names the first
step that fails. A row that declares itself approximate (no precision whose bounds it keeps)
and fails is `approximate`, with its quality: inertia above the float64 reference's. The float64
end point is not the judge: how far a certified row ends from it (centroid error, inertia
difference, in the data's spread) is a figure in the record, since on problems that amplify
rounding two correct programs may end far apart.

The figures:
- centroid error: ||C - R||_F / (sqrt(k) * spread), spread the RMS distance of the points from
  their mean, so it means the same at the origin and at 1e6;
- inertia difference: |I(C) - I(R)| / max(I(R), INERTIA_FLOOR * n * spread^2), both inertias in
  float64 on the same data.
"""

from __future__ import annotations

import gc
import hashlib
import time
from dataclasses import dataclass, field

import numpy as np

from kmbench.judge import certify
from kmbench.judge.seeds import Bank
from kmbench.protocol import reference

OK, MISMATCH, ERROR, SKIPPED, APPROXIMATE = "ok", "mismatch", "error", "skipped", "approximate"
INERTIA_FLOOR = 1e-9  # of the total sum of squares n * spread^2
WEAK_SHARE = 0.5  # an ok whose steps left more than this share of point decisions open is marked weak
KEPT_SHARE = 1 / 8  # of a GPU's memory, the most the judge keeps there while a row runs


def start_digest(initial_centroids) -> str:
    start = np.ascontiguousarray(initial_centroids)
    return hashlib.sha256(str(start.dtype).encode() + str(start.shape).encode() + start.tobytes()).hexdigest()[:32]


@dataclass
class Workspace:
    """The data where the judge computes (on a GPU, or as they are) and their Geometry."""

    source: object  # the data as handed over: the same object means the same problem
    xp: object
    data: object
    geometry: object

    @classmethod
    def of(cls, data, xp) -> "Workspace":
        held = reference.resident(data, xp)
        return cls(data, xp, held, certify.Geometry.of(held, xp))

    def device_nbytes(self) -> int:
        """GPU memory this workspace holds of its own (a copy of the data, the cached points)."""
        if self.xp is np:
            return 0
        arrays = [self.data] if self.data is not self.source and isinstance(self.data, self.xp.ndarray) else []
        if self.geometry.full is not None:
            full = self.geometry.full
            arrays += [full.norm, full.centred_norm, full.centred64] + ([full.x64] if full.x64 is not full.x else [])
        elif self.geometry.norms is not None:
            arrays += list(self.geometry.norms)
        return sum(int(array.nbytes) for array in arrays)


@dataclass
class Oracle:
    """The float64 reference for one problem, computed once and shared by every cell."""

    centroids: np.ndarray
    inertia: float
    spread: float
    n: int = 0
    iterations: int = 0  # iterations the reference executed
    emptied: int = 0  # clusters the reference left empty at some iteration (it keeps them)
    offset: float = 0.0  # how far the data's mean lies from the origin, in spreads
    problem: dict = field(default_factory=dict)  # what it belongs to: start digest, stop rule (+ data checksum)
    seconds: float = 0.0  # what computing it cost in this process (0: it came from the cache)
    # The reference's scans by step, for the rows' scans to start from (kmbench.judge.seeds): kept in
    # this process only, filled by the first trajectory judged where the oracle came from the cache.
    seeds: Bank = field(default_factory=Bank, repr=False, compare=False)
    # The data where the judge computes and what every scan of them shares, made once for every
    # verdict on this problem until `release` (kept on a GPU: copying 8 GB costs a second).
    workspace: Workspace | None = field(default=None, repr=False, compare=False)
    _inertias: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def compute(cls, data, initial_centroids, iterations, progress=None, tol=None) -> "Oracle":
        """The float64 reference by the judge's own steps, by the stop rule `tol` (see
        `kmbench.protocol.stop_done`); `progress(text)` is told of each iteration."""
        started = time.perf_counter()
        n, k = data.shape[0], initial_centroids.shape[0]
        space = Workspace.of(data, reference.judge_module(data, k, iterations))
        report = None if progress is None else (
            lambda done, total: progress(f"float64 reference: iteration {done}/{total}"))
        bank = Bank()
        centroids, done, emptied, _, value = certify.float64_lloyd(space.data, initial_centroids, iterations, tol,
                                                                   space.xp, progress=report, bank=bank,
                                                                   geometry=space.geometry)
        spread = space.geometry.spread(space.data, space.xp)
        stop = {"rule": "iterations" if tol is None else "tolerance", "max_iter": iterations, "tol": tol}
        middle = reference.to_numpy(space.geometry.mean)
        oracle = cls(reference.to_numpy(centroids), value, spread, n, done, emptied,
                     float(np.linalg.norm(middle)) / max(spread, 1e-300),
                     {"start": start_digest(initial_centroids), "stop": stop}, seeds=bank, workspace=space)
        oracle.remember({certify.digest(centroids): value})
        oracle.seconds = time.perf_counter() - started
        return oracle

    def __getstate__(self) -> dict:
        """The oracle as data (a Dask worker's copy): without what this process holds on its GPU."""
        return {**self.__dict__, "workspace": None, "seeds": Bank()}

    def workspace_for(self, data, xp) -> Workspace:
        """The workspace of these data on xp: the one kept, or a new one, kept."""
        if self.workspace is None or self.workspace.source is not data or self.workspace.xp is not xp:
            self.workspace = Workspace.of(data, xp)
        return self.workspace

    def make_room(self) -> None:
        """Before a row's timed runs: what the judge holds on the GPU for this problem goes back if
        it is more than KEPT_SHARE of the GPU's memory, so that no row finds its memory taken; less
        stays, for the next verdict on the problem."""
        if self.workspace is None or self.workspace.xp is np:
            return
        total = self.workspace.xp.cuda.runtime.memGetInfo()[1]
        if self.workspace.device_nbytes() + self.seeds.device_nbytes() > KEPT_SHARE * total:
            self.release()

    def release(self) -> None:
        """Give back what the judge holds for this problem on a GPU (its copy of the data, the
        scans it kept there, the pools' blocks), for a row that needs the memory, or at the end."""
        xp = self.workspace.xp if self.workspace is not None else None
        self.workspace = None
        self.seeds.release_device()
        if xp is not None:
            gc.collect()  # arrays in reference cycles go back now, not at the next collection
            reference.release(xp)

    @property
    def inertia_scale(self) -> float:
        """The denominator of the inertia difference: the reference inertia, floored."""
        return max(self.inertia, INERTIA_FLOOR * self.n * self.spread ** 2, 1e-300)

    def inertia_difference(self, value: float) -> float:
        return abs(value - self.inertia) / self.inertia_scale

    def inertia_of(self, centroids: np.ndarray, data) -> float:
        """I(C) in float64, remembered per distinct set of centroids: repeats of a
        deterministic implementation return the same bytes and cost one pass, not one each (the
        judge's certificate hands over those it computed on the way)."""
        key = certify.digest(centroids)
        if key not in self._inertias:
            kept = self.workspace is not None and self.workspace.source is data
            space = self.workspace if kept else Workspace.of(data, reference.judge_module(data, centroids.shape[0], 1))
            self._inertias[key] = certify.inertia(space.data, centroids, space.xp, self.seeds, space.geometry)
        return self._inertias[key]

    def remember(self, inertias: dict) -> None:
        """Inertias the judge computed on the way, by `certify.digest` of their centroids."""
        self._inertias.update(inertias)

    def to_dict(self) -> dict:
        return {"centroids": self.centroids.tolist(), "inertia": self.inertia, "spread": self.spread,
                "n": self.n, "iterations": self.iterations, "emptied": self.emptied, "offset": self.offset,
                "problem": self.problem}

    @classmethod
    def from_dict(cls, payload: dict) -> "Oracle":
        return cls(np.asarray(payload["centroids"], dtype=np.float64), float(payload["inertia"]),
                   float(payload["spread"]), int(payload["n"]), int(payload["iterations"]),
                   int(payload["emptied"]), float(payload["offset"]), dict(payload["problem"]))


@dataclass
class Verdict:
    status: str
    centroid_error: float | None = None
    inertia_difference: float | None = None
    detail: str = ""
    inertia: float | None = None
    certificate: dict | None = None

    def as_dict(self) -> dict:
        return {"status": self.status, "centroid_error": self.centroid_error,
                "inertia_difference": self.inertia_difference, "inertia": self.inertia, "detail": self.detail,
                "certificate": self.certificate}


def centroid_error(centroids: np.ndarray, oracle: Oracle) -> float:
    ref = oracle.centroids
    # The floor only matters when every point is the same (spread 0).
    scale = max(np.sqrt(ref.shape[0]) * oracle.spread,
                np.finfo(np.float64).eps * float(np.linalg.norm(ref)), 1e-300)
    return float(np.linalg.norm(centroids.astype(np.float64) - ref) / scale)


def malformed(centroids, oracle: Oracle) -> Verdict | None:
    """A mismatch for a result of the wrong shape or with NaN, whatever its trajectory; else None."""
    centroids = np.asarray(centroids)
    if centroids.shape != oracle.centroids.shape:
        return Verdict(MISMATCH, detail=f"centroids have shape {centroids.shape}, expected {oracle.centroids.shape}")
    if not np.isfinite(centroids).all():
        return Verdict(MISMATCH, detail="centroids contain NaN or infinite values")
    return None


def figures(centroids, oracle: Oracle, data) -> Verdict:
    """The float64 reference's figures for one result (status left to the certificate); a
    result of the wrong shape or with NaN is a mismatch whatever its trajectory."""
    broken = malformed(centroids, oracle)
    if broken:
        return broken
    centroids = np.asarray(centroids)
    value = oracle.inertia_of(centroids, data)
    return Verdict(OK, centroid_error(centroids, oracle), oracle.inertia_difference(value), "", value)


def verdict(certificate, end: Verdict, oracle: Oracle, approximate: bool = False) -> Verdict:
    """The cell's verdict from its certificate and its end point's figures."""
    if end.status != OK:
        return end
    data = certificate.as_dict()
    if certificate.certified:
        return Verdict(OK, end.centroid_error, end.inertia_difference, certified_text(certificate, end),
                       end.inertia, data)
    failure = certificate.failure.sentence()
    if approximate:
        share = (f"; {certificate.inadmissible[-1]:.2%} of its last labels inadmissible"
                 if certificate.inadmissible else "")
        above = (end.inertia - oracle.inertia) / oracle.inertia_scale
        return Verdict(APPROXIMATE, end.centroid_error, end.inertia_difference,
                       f"approximate: inertia {above:+.3%} against the float64 trajectory's{share} "
                       f"(first uncertified step: {failure})", end.inertia, data)
    return Verdict(MISMATCH, end.centroid_error, end.inertia_difference, f"not a Lloyd trajectory in "
                   f"{certificate.precision}: {failure}", end.inertia, data)


def certified_text(certificate, end: Verdict) -> str:
    """One line for an `ok` cell: how it relates to the float64 trajectory."""
    parted = (f"parted from float64's at iteration {certificate.parted_at}" if certificate.parted_at
              else "float64's decisions at every step")
    ties = f"{certificate.near_ties} near-tie decisions"
    if certificate.labels_known == certificate.steps:
        ties += f" ({certificate.ties_as_float64} as float64, {certificate.ties_other_way} the other way)"
    elif certificate.labels_known:
        ties += (f" (in the {certificate.labels_known} step(s) with labels: {certificate.ties_as_float64} as "
                 f"float64, {certificate.ties_other_way} the other way)")
    text = (f"{certificate.steps} steps certified in {certificate.precision}; {parted}; {ties}; end point "
            f"{end.centroid_error:.2g} spreads from float64's")
    if certificate.undecided > WEAK_SHARE:
        text += (f"; {certificate.undecided:.0%} of its point decisions could go more than one way in "
                 f"{certificate.precision} here, so this certificate proves little")
    if certificate.unbounded:
        text += (f"; {certificate.unbounded} cluster(s) too large for a worst-case {certificate.precision} sum "
                 "bound: their means were not checked")
    if certificate.nondeterministic:
        text += ("; its sums are not deterministic and a timed run ended off the certified trajectory "
                 f"({certificate.nondeterministic})")
    return text


def weak(validation: dict | None) -> bool:
    """Did this cell's certificate leave most point decisions open (far from the origin in a
    narrow precision, say), so that its `ok` proves little? From a record's validation."""
    certificate = (validation or {}).get("certificate") or {}
    return (certificate.get("undecided") or 0.0) > WEAK_SHARE


def worst(verdicts: list[Verdict]) -> Verdict:
    """The verdict to show for a cell: the worst of its repeats."""
    order = {ERROR: 4, MISMATCH: 3, APPROXIMATE: 2, OK: 1, SKIPPED: 0}
    return max(verdicts, key=lambda v: (order[v.status], v.centroid_error or 0.0,
                                        v.inertia_difference or 0.0))
