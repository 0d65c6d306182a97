"""Certify one Lloyd step at a time: is `new` a Lloyd step from `previous` in the declared
precision? NOTES.md beside this file derives every bound used here.

A step is certified when
- assignment: every label the row reports is admissible (kmbench.judge.scan);
- means: every centroid lies within the rounding bound of the declared sum of the mean of its
  points. With labels, its points are the labelled ones. Without, the clear points fix most of
  the mean and the ambiguous ones bound how far it may move (their share of the mean);
- empty clusters: a cluster no point may join keeps its centroid (to its stored rounding).
Each step also says whether it is the float64 step from the same centroids (its decisions on
near-ties as float64 makes them): the first step that is not is where the row's trajectory
parts from float64's, and the float64 step itself is how the reference trajectory is made.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from kmbench.judge.precision import FLOAT64, Precision
from kmbench.judge.scan import Assignment, Geometry, admissible, as_labels, assign
from kmbench.judge.seeds import Bank, Seed, closest_first
from kmbench.judge.sums import (Groups, chosen_chunks, cluster_sum_factors, group, kept_bound, rounding_bound, rows_of,
                                widen_boxes)
from kmbench.protocol import reference

PAIR_ELEMENTS = 1 << 27  # (point, centroid) pairs x d visited one by one; past it, bounds at large
SEEDS_FROM_K = 32  # above this many centroids scans start from kept ones (kmbench.judge.seeds)


@dataclass
class Failure:
    """The first check a row's trajectory fails, in words and numbers."""

    iteration: int
    check: str  # "assignment", "means", "empty cluster", "iterations", "end point", "stop"
    where: str = ""  # "point 12", "centroid 3"
    amount: float = 0.0  # how far off, in the data's spread (0 where no distance applies)
    allowance: float = 0.0  # the bound it passed, in the same unit
    text: str = ""

    def sentence(self) -> str:
        head = f"iteration {self.iteration}, {self.check}" if self.iteration else self.check
        where = f", {self.where}" if self.where else ""
        numbers = (f": off by {self.amount:.3g} spreads where {self.allowance:.3g} is allowed"
                   if self.amount or self.allowance else "")
        return f"{head}{where}{numbers}{'; ' + self.text if self.text else ''}"

    def as_dict(self) -> dict:
        return {"iteration": self.iteration, "check": self.check, "where": self.where,
                "amount": self.amount, "allowance": self.allowance, "text": self.text}


@dataclass
class StepResult:
    failure: Failure | None
    as_float64: bool  # the row's step is the float64 step from the same centroids
    float64_step: object  # (k, d) the float64 Lloyd step from `previous`, on xp
    near_ties: int = 0
    ties_as_float64: int = 0  # with labels: near-ties decided as float64 decides them
    ties_other_way: int = 0
    inadmissible: float = 0.0  # share of the row's labels that are not admissible
    assignment: Assignment | None = None  # the judge's view of this step's assignment
    unbounded: int = 0  # clusters too large for a worst-case sum bound: means not checked
    inertia_before: float | None = None  # the float64 inertia of the centroids the step started from


def digest(centroids) -> str:
    """A key for one set of centroids (their float64 bytes)."""
    values = np.ascontiguousarray(reference.to_numpy(centroids), dtype=np.float64)
    return hashlib.sha256(str(values.shape).encode() + values.tobytes()).hexdigest()[:32]


@dataclass
class Certifier:
    """Certifies steps of one problem for rows of one declared precision."""

    data: object
    precision: Precision
    spread: float
    geometry: Geometry
    xp: object = np
    direct: bool = False  # the row declares direct distances, sum of (x - c)^2 (scan.assign)
    bank: Bank = field(default_factory=Bank)  # the problem's scans by step (kmbench.judge.seeds)
    last: Seed | None = None  # this certifier's last scan along its trajectory

    @classmethod
    def of(cls, data, precision: Precision, xp=np, direct: bool = False, bank: Bank | None = None,
           spread: float | None = None, geometry: Geometry | None = None) -> "Certifier":
        """spread, geometry: the data's, where the caller has them (the oracle's), else made."""
        data = reference.resident(data, xp)
        return cls(data, precision, reference.spread(data, xp) if spread is None else spread,
                   geometry if geometry is not None else Geometry.of(data, xp), xp, direct,
                   bank if bank is not None else Bank())

    def scan(self, iteration: int, previous, keep: bool = True):
        """The judge's assignment from `previous` at this step, started from the closer of two kept
        scans (the bank's of this step, this trajectory's last); kept in turn (as the trajectory's
        last unless `keep` is off: a check off the trajectory, whose scan no later step starts
        near). With few centroids a scan costs no more than carrying bounds does: none are kept,
        nor the lower bounds they would need. One scan of the trajectory is kept, not one a step:
        the next step starts near it, and a step kept longer would hold 8 bytes a point each."""
        n, k = self.data.shape[0], previous.shape[0]
        if k <= SEEDS_FROM_K:
            return assign(self.data, previous, self.precision, self.geometry, self.xp, self.direct, bounds=False)
        seeds = closest_first([self.bank.get(iteration), self.last], previous, n, self.xp)
        found = assign(self.data, previous, self.precision, self.geometry, self.xp, self.direct, seeds)
        seed = found.seed(previous)
        if self.xp is not np and reference.from_host():
            # Judged from host memory (the GPUs are the rows'): between scans the judge holds nothing
            # per point on a GPU; the next scan takes the seed back a chunk at a time.
            seed = seed.on(np)
        if keep:
            self.last = seed
        self.bank.keep(iteration, seed)
        return found

    def _spreads(self, value) -> float:
        return float(value) / max(self.spread, 1e-300)

    def step(self, iteration: int, previous, new, labels=None, end: bool = False, keep: bool = True) -> StepResult:
        """Certify `new` as a step from `previous`. end: a timed run's end checked against the
        validated trajectory's last-but-one centroids; a row whose sums are not deterministic
        froze its empty clusters at centroids of its own, off those by up to one step's
        rounding, so an empty cluster may be off by the step's largest mean bound. keep: the
        step's scan becomes the trajectory's last (`scan`)."""
        xp, k = self.xp, previous.shape[0]
        previous = xp.asarray(previous, dtype=xp.float64)
        new = xp.asarray(new, dtype=xp.float64)
        found = self.scan(iteration, previous, keep)
        by_float64 = group(self.data, found.nearest, previous, self.geometry, xp)
        float64_step, _ = by_float64.means(previous, xp)
        own_bound = rounding_bound(by_float64, float64_step, self.precision, xp)
        as_float64 = self._within(new, float64_step, own_bound) is None
        result = StepResult(None, as_float64, float64_step, near_ties=found.near_ties, assignment=found,
                            inertia_before=by_float64.inertia())
        finite = own_bound[xp.isfinite(own_bound)]
        slack = float(finite.max()) if end and finite.size else 0.0  # for frozen empty clusters
        # A cluster of 2^23 points or more has no worst-case float32 sum bound (gamma_n >= 1/2):
        # its mean is not checked, and the certificate counts it.
        result.unbounded = int((~xp.isfinite(own_bound) & (by_float64.counts > 0)).sum())
        if labels is not None:
            result.failure = self._with_labels(iteration, found, previous, new, labels, result, slack)
        else:
            result.failure = self._without_labels(iteration, found, by_float64, previous, new, slack)
        return result

    def _within(self, new, target, bound, filled=None):
        """(cluster, distance, bound) of the worst centroid farther from its target than its bound."""
        xp = self.xp
        gap = xp.sqrt(((new - target) ** 2).sum(axis=1))
        excess = gap - bound
        if filled is not None:
            excess = xp.where(filled, excess, -xp.inf)
        # An unbounded cluster (bound inf) cannot fail, and must not hide the others (inf/inf).
        bounded = xp.isfinite(bound)
        ratio = xp.where(bounded, excess / xp.maximum(xp.where(bounded, bound, 1.0), 1e-300), -xp.inf)
        worst = int(xp.argmax(ratio))
        if float(excess[worst]) <= 0:
            return None
        return worst, float(gap[worst]), float(bound[worst])

    def _empty_moved(self, iteration, previous, new, empty, slack: float):
        """An empty cluster must keep its centroid, to its stored rounding (plus `slack`)."""
        bound = kept_bound(previous, self.precision, self.xp) + slack
        moved = self._within(new, previous, bound, filled=empty)
        if moved is None:
            return None
        cluster, gap, allowed = moved
        return Failure(iteration, "empty cluster", f"centroid {cluster}", self._spreads(gap), self._spreads(allowed),
                       "no point may join it, so it keeps its centroid; the row moved it")

    def _with_labels(self, iteration, found: Assignment, previous, new, labels, result: StepResult, slack):
        xp, k = self.xp, previous.shape[0]
        labels = as_labels(labels, xp)
        if labels.shape != found.nearest.shape or (labels.size and (int(labels.min()) < 0 or int(labels.max()) >= k)):
            return Failure(iteration, "assignment", text=f"labels of shape {labels.shape} or out of range 0..{k - 1}")
        good = admissible(found, labels, k, xp)
        tied = ~found.unique
        result.ties_as_float64 = int((tied & (labels == found.nearest)).sum())
        result.ties_other_way = int((tied & (labels != found.nearest)).sum())
        result.inadmissible = float((~good).sum()) / max(labels.size, 1)
        result.as_float64 = result.as_float64 and result.ties_other_way == 0
        if not bool(good.all()):
            return self._label_failure(iteration, found, previous, labels, good)
        groups = group(self.data, labels, previous, self.geometry, xp)
        means, filled = groups.means(previous, xp)
        return (self._empty_moved(iteration, previous, new, ~filled, slack)
                or self._mean_failure(iteration, new, means, rounding_bound(groups, means, self.precision, xp),
                                      filled, "the mean of the points it labelled"))

    def _label_failure(self, iteration, found, previous, labels, good):
        xp = self.xp
        bad = xp.nonzero(~good)[0]
        x = rows_of(self.data, bad, xp)
        chosen = ((x - previous[labels[bad]]) ** 2).sum(axis=1)
        best = ((x - previous[found.nearest[bad]]) ** 2).sum(axis=1)
        excess = chosen - best
        worst = int(xp.argmax(excess))
        point, label, nearest = int(bad[worst]), int(labels[bad][worst]), int(found.nearest[bad][worst])
        tie = float(excess[worst]) <= float(found.allowance[bad][worst])
        text = (f"{bad.size} label(s) not admissible; point {point} went to {label}, its nearest is {nearest}"
                + (" (an exact tie: the lowest index wins)" if tie else ""))
        return Failure(iteration, "assignment", f"point {point}", self._spreads(np.sqrt(max(float(excess[worst]), 0))),
                       self._spreads(np.sqrt(float(found.allowance[bad][worst]))), text)

    def _mean_failure(self, iteration, new, target, bound, filled, what):
        worst = self._within(new, target, bound, filled=filled)
        if worst is None:
            return None
        cluster, gap, allowed = worst
        return Failure(iteration, "means", f"centroid {cluster}", self._spreads(gap), self._spreads(allowed),
                       f"it is not {what} to the rounding of a {self.precision.name} sum")

    def _candidates(self, found: Assignment, previous, fixed_means):
        """Per cluster, from every (ambiguous point, admissible centroid) pair: the points that may
        join it (counts, weights), their summed distance from its clear mean, and their box."""
        xp, (k, d) = self.xp, previous.shape
        points, owners = found.pair_points, found.pair_centroids
        extra = group(self.data, owners, previous, self.geometry, xp, rows=points)
        away, low, high = xp.zeros(k), xp.full((k, d), xp.inf), xp.full((k, d), -xp.inf)
        for x, own in chosen_chunks(self.data, points, owners, xp, self.geometry):
            away += xp.bincount(own, weights=xp.sqrt(((x - fixed_means[own]) ** 2).sum(axis=1)), minlength=k)
            widen_boxes(low, high, own, x, xp)
        return extra, away, low, high

    def _candidates_at_large(self, found: Assignment, tied, previous, fixed_means):
        """The same figures bounded from above without visiting every pair, where nearly every
        point may go nearly anywhere (data far from the origin in float32, say): each pair's
        point is some ambiguous point, within `radius` of the data's mean and inside their box.
        Wider bounds only let more rows pass a check that cannot decide much here anyway."""
        xp, (k, d) = self.xp, previous.shape
        mean = self.geometry.mean
        radius, low, high = 0.0, xp.full(d, xp.inf), xp.full(d, -xp.inf)
        for x, _ in chosen_chunks(self.data, tied, tied, xp, self.geometry):
            radius = max(radius, float(xp.sqrt(((x - mean) ** 2).sum(axis=1)).max()))
            low, high = xp.minimum(low, x.min(axis=0)), xp.maximum(high, x.max(axis=0))
        counts = xp.bincount(found.pair_centroids, minlength=k).astype(xp.float64)
        from_mean = lambda c: xp.sqrt(((c - mean) ** 2).sum(axis=1))  # noqa: E731
        # A summand's norm max(|x|, |x - m|, |x - c|) is at most radius + max(|m|, |c - m|).
        norm = radius + xp.maximum(float(xp.sqrt((mean * mean).sum())), from_mean(previous))
        extra = Groups(counts, xp.zeros((k, d)), counts * norm)
        away = counts * (radius + from_mean(fixed_means))
        return extra, away, xp.broadcast_to(low, (k, d)), xp.broadcast_to(high, (k, d))

    def _without_labels(self, iteration, found: Assignment, by_float64: Groups, previous, new, slack):
        """The clear points fix each mean to within the ambiguous points' share of it."""
        xp, k = self.xp, previous.shape[0]
        mean = self.geometry.mean
        tied = xp.nonzero(~found.unique)[0]
        fixed = by_float64
        if tied.size:
            removed = group(self.data, found.nearest[tied], previous, self.geometry, xp, rows=tied)
            fixed = Groups(by_float64.counts - removed.counts, by_float64.sums - removed.sums,
                           by_float64.weights - removed.weights)
        fixed_means, has_fixed = fixed.means(previous, xp)
        away = xp.zeros(k)  # per cluster: the ambiguous points' summed distance from its clear mean
        extra = Groups(xp.zeros(k), xp.zeros((k, previous.shape[1])), xp.zeros(k))
        low = high = None
        if found.pair_points.size:
            if found.pair_points.size * previous.shape[1] <= PAIR_ELEMENTS:
                extra, away, low, high = self._candidates(found, previous, fixed_means)
            else:
                extra, away, low, high = self._candidates_at_large(found, tied, previous, fixed_means)
        fixed_count = xp.maximum(fixed.counts, 1)
        most = Groups(fixed.counts + extra.counts, fixed.sums, fixed.weights + extra.weights)
        factor = cluster_sum_factors(most.counts, self.precision, xp)
        centre = xp.sqrt((fixed_means * fixed_means).sum(axis=1)) + away / fixed_count
        bound = factor * most.weights / fixed_count + 3 * self.precision.store * centre + away / fixed_count
        failure = self._mean_failure(iteration, new, fixed_means, bound, has_fixed,
                                     "within reach of the mean of its clear points")
        if failure is not None:
            return failure
        none_fixed = ~has_fixed
        candidates = extra.counts > 0
        empty = none_fixed & ~candidates
        moved = self._empty_moved(iteration, previous, new, empty, slack)
        if moved is not None or low is None:
            return moved
        # The new mean lies between its clear points' mean and some of the ambiguous points: in
        # their box, widened by the sum's rounding. A cluster of ambiguous points alone may also
        # keep its centroid (none joined it).
        kept = xp.sqrt(((new - previous) ** 2).sum(axis=1)) <= kept_bound(previous, self.precision, xp)
        low = xp.where(has_fixed[:, None], xp.minimum(low, fixed_means), low)
        high = xp.where(has_fixed[:, None], xp.maximum(high, fixed_means), high)
        low, high = xp.where(candidates[:, None], low, 0.0), xp.where(candidates[:, None], high, 0.0)
        reach = xp.maximum(xp.abs(low), xp.abs(high)).max(axis=1)
        margin = (factor * most.weights / fixed_count + 3 * self.precision.store * reach)[:, None]
        inside = ((new >= low - margin) & (new <= high + margin)).all(axis=1)
        wrong = candidates & ~inside & (has_fixed | ~kept)
        if bool(wrong.any()):
            cluster = int(xp.nonzero(wrong)[0][0])
            return Failure(iteration, "means", f"centroid {cluster}",
                           text="it lies outside the box of its clear points' mean and the ambiguous points that "
                                "may join it" + ("" if bool(has_fixed[cluster]) else ", and it was not kept"))
        return None


def float64_lloyd(data, start, iterations: int, tol=None, xp=np, progress=None, bank: Bank | None = None,
                  geometry: Geometry | None = None):
    """The float64 reference by the judge's own steps (certified float64 decisions, float64
    sums): (centroids, iterations done, clusters ever empty, last labels, its inertia), stopping
    by the tolerance rule (kmbench.protocol.stop_done) where `tol` is given. Each step's scan is
    kept in `bank`, for the rows' steps to start from; the inertia's scan (from the last
    centroids) as the step after the last."""
    from kmbench.protocol import stop_done

    walker = Certifier.of(data, FLOAT64, xp, bank=bank, spread=0.0, geometry=geometry)  # it words no failure in spreads
    centroids = xp.asarray(start, dtype=xp.float64)
    labels, done, emptied = None, 0, xp.zeros(centroids.shape[0], dtype=bool)
    for done in range(1, iterations + 1):
        found = walker.scan(done, centroids)
        groups = group(walker.data, found.nearest, centroids, walker.geometry, xp)
        changed = found.nearest.size if labels is None else int((found.nearest != labels).sum())
        labels = found.nearest
        centroids, filled = groups.means(centroids, xp)
        emptied |= ~filled
        if progress is not None:
            progress(done, iterations)
        if stop_done(changed, found.nearest.size, tol):
            break
        found = groups = None  # the step's assignment goes before the next is made (its labels stay)
    found = groups = None  # the same where the tolerance rule ended the loop
    last = walker.scan(done + 1, centroids)
    value = group(walker.data, last.nearest, centroids, walker.geometry, xp).inertia()
    return centroids, done, int(emptied.sum()), labels, value


def inertia(data, centroids, xp=np, bank: Bank | None = None, geometry: Geometry | None = None) -> float:
    """Sum of squared float64 distances from each point to its exact nearest centroid; the scan
    starts from the closest of the bank's scans, where one is given."""
    certifier_data = reference.resident(data, xp)
    geometry = geometry if geometry is not None else Geometry.of(certifier_data, xp)
    centroids = xp.asarray(centroids, dtype=xp.float64)
    seeds = closest_first(bank.by_step.values(), centroids, certifier_data.shape[0], xp) if bank else []
    found = assign(certifier_data, centroids, FLOAT64, geometry, xp, seeds=seeds, bounds=False)
    return group(certifier_data, found.nearest, centroids, geometry, xp).inertia()
