"""Certify a row's whole trajectory, and that its timed runs ended where that trajectory ends.

The trajectory comes from the row itself, in untimed validation runs:
- a row that can report it cheaply (`Implementation.traces`) is run once with `Problem.trace`
  set and returns every iteration's centroids (`Result.trace`) and its last labels (the
  measuring loop makes that run the row's first warm-up and hands it here: `traced`);
- every other row (scikit-learn, subprocesses, third parties) is stepped: run for one
  iteration at a time, each from its own previous output.
Each step is certified (kmbench.judge.certify). A timed run's final centroids must then be the
trajectory's end, or themselves a certified step from the trajectory's last-but-one centroids,
where only a row that is not deterministic has its empty clusters held to the end point's slack.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from kmbench.judge.certify import Certifier, Failure, digest
from kmbench.judge.precision import declared
from kmbench.judge.seeds import Bank
from kmbench.protocol import reference


@dataclass
class Certificate:
    """What the judge found along one row's trajectory."""

    precision: str
    source: str = "stepped"  # "trace" or "stepped"
    steps: int = 0  # steps certified
    failure: Failure | None = None
    parted_at: int | None = None  # first iteration whose step is not float64's from the same centroids
    near_ties: int = 0  # points with more than one admissible label, summed over the steps
    ties_as_float64: int = 0  # of those, with labels known: decided as float64 decides
    ties_other_way: int = 0
    labels_known: int = 0  # steps whose labels the row reported
    inadmissible: list = field(default_factory=list)  # per step with labels: share not admissible
    fixed_point: bool = False  # the trajectory's end is a step from itself (Lloyd has converged)
    # Where a timed end is not one certified step from the trajectory's last but one, and the row
    # is not deterministic (its first step, run twice, differs): why it was let pass.
    nondeterministic: str = ""
    unbounded: int = 0  # most clusters in one step too large for a worst-case sum bound (unchecked)
    # The float64 inertia of centroids met on the way (the start of each step scanned), by
    # kmbench.judge.certify.digest: the end points' figures need no scan of their own.
    inertias: dict = field(default_factory=dict, repr=False)
    points: int = 0  # the problem's n: near_ties / (points * steps) is the share of decisions left open

    @property
    def undecided(self) -> float:
        """The share of the point decisions of the steps certified that more than one label could
        take in the declared precision: where it is large, a certificate proves little."""
        return self.near_ties / max(1, self.points * self.steps)

    @property
    def certified(self) -> bool:
        return self.failure is None

    def as_dict(self) -> dict:
        return {"precision": self.precision, "source": self.source, "steps": self.steps,
                "failure": self.failure.as_dict() if self.failure else None, "parted_at": self.parted_at,
                "near_ties": self.near_ties, "ties_as_float64": self.ties_as_float64,
                "ties_other_way": self.ties_other_way, "labels_known": self.labels_known,
                "inadmissible": self.inadmissible, "fixed_point": self.fixed_point,
                "nondeterministic": self.nondeterministic, "unbounded": self.unbounded,
                "undecided": self.undecided}


def _as_given(centroids, problem):
    """Centroids as a row is handed them: in the problem's dtype where that holds them exactly
    (a float32 row's own output), else as the row returned them (a row that keeps float64
    centroids on float32 data must go on from exactly where it stopped)."""
    centroids = np.ascontiguousarray(centroids, dtype=np.float64)
    narrowed = centroids.astype(problem.data.dtype)
    return narrowed if np.array_equal(narrowed, centroids) else centroids


def _stepped(impl, problem, count: int):
    """(centroids, labels) of each iteration, the row run for one iteration at a time."""
    current = problem.initial_centroids
    for _ in range(count):
        once = replace(problem, initial_centroids=_as_given(current, problem), iterations=1, tol=None,
                       warmup=0, repeats=1, max_time=None)
        result = impl.run(once)
        yield np.asarray(result.centroids, dtype=np.float64), result.labels
        current = result.centroids


def _traced(impl, problem, count: int, result=None):
    """(centroids, labels) of each iteration from the row's trace run: `result` where it was
    made already (the measuring loop's first warm-up), else run now."""
    result = result if result is not None else impl.run(replace(problem, trace=True))
    trace = list(result.trace or [])
    if len(trace) != result.iterations:
        raise ValueError(f"the row's trace has {len(trace)} steps for {result.iterations} iterations")
    for index, centroids in enumerate(trace[:count]):
        yield np.asarray(centroids, dtype=np.float64), result.labels if index == len(trace) - 1 else None


def certify(impl, problem, timed: list, precision: str, xp=None, progress=None, data=None,
            bank: Bank | None = None, spread: float | None = None, geometry=None, traced=None) -> Certificate:
    """Certify `impl`'s trajectory on `problem` and the end of every timed result in `timed`;
    `traced`: the result of the row's trace run on `problem`, where one was made already;
    `progress(text)` hears of each step; `data`: the problem's data already where xp computes;
    `bank`: the problem's kept scans (kmbench.judge.seeds), which this certification adds to;
    `spread`, `geometry`: the data's, where known (the oracle's)."""
    xp = xp or reference.judge_module(problem.data, problem.k, max(r.iterations for r in timed))
    certifier = Certifier.of(problem.data if data is None else data, declared(precision), xp,
                             direct=impl.distance_form(problem) == "direct", bank=bank, spread=spread,
                             geometry=geometry)
    counts = sorted({int(result.iterations) for result in timed})
    length = counts[-1]
    traces = getattr(impl, "traces", False)
    certificate = Certificate(precision, "trace" if traces else "stepped", points=problem.n)
    if counts[0] < 1:
        certificate.failure = Failure(0, "iterations", text="a timed run claims no iteration at all")
        return certificate
    source = _traced(impl, problem, length, traced) if traces else _stepped(impl, problem, length)
    kept = {0: np.asarray(problem.initial_centroids, dtype=np.float64)}
    wanted = {1} | {c for count in counts for c in (count - 1, count)}
    previous, before, changes = kept[0], None, {}
    for iteration, (centroids, labels) in enumerate(source, start=1):
        if centroids.shape != previous.shape or not np.isfinite(centroids).all():
            certificate.failure = Failure(iteration, "means", text="centroids of the wrong shape, NaN or infinite")
            return certificate
        if progress is not None:
            progress(f"validating {impl.name}: step {iteration}/{length}")
        step = certifier.step(iteration, previous, centroids, labels)
        certificate.inertias[digest(previous)] = step.inertia_before
        _count(certificate, step, labels is not None)
        if problem.tol is not None:  # only the tolerance rule counts changes (and keeps the last decisions)
            changes[iteration] = _changes(before, step.assignment, problem.n)
            step.failure = step.failure or _stop_failure(problem, iteration, length, changes[iteration])
            before = replace(step.assignment, pair_points=None, pair_centroids=None, allowance=None, lower=None)
        if step.failure is not None:
            certificate.failure = step.failure
            return certificate
        if not step.as_float64 and certificate.parted_at is None:
            certificate.parted_at = iteration
        certificate.steps = iteration
        if iteration in wanted:
            kept[iteration] = centroids
        previous = centroids
        step = None  # its assignment (13 bytes a point, and its pairs) goes before the next step's scan
    if certificate.steps < length:
        certificate.failure = Failure(certificate.steps + 1, "iterations",
                                      text=f"the validation run gave {certificate.steps} steps of {length}")
        return certificate
    fixed = {}
    for count in counts:  # one more step from each end: a fixed point, and the end's inertia
        # Off the trajectory: the trajectory's last scan stays the one a timed end is checked from.
        step = certifier.step(count + 1, kept[count], kept[count], keep=False)
        fixed[count] = step.failure is None
        certificate.inertias[digest(kept[count])] = step.inertia_before
    certificate.fixed_point = fixed[length]
    # Every timed run's count is held to the rule, not only the longest's.
    certificate.failure = next((failure for count in counts for failure in
                                [_iterations_failure(problem, count, fixed[count]),
                                 _stop_failure(problem, count, count, changes.get(count))] if failure), None)
    if certificate.failure is None:
        end = _end_failure(certifier, timed, kept, frozen_slack=False)
        deterministic = end is None or _deterministic(impl, problem)
        if end is not None and not deterministic:
            # Only a row whose sums are not deterministic froze its empty clusters at centroids of
            # its own run: it alone gets the end-point slack for them (Certifier.step, `end`).
            end = _end_failure(certifier, timed, kept, frozen_slack=True)
        if end is not None and deterministic and length <= PREFIX_MAX_ITERATIONS:
            # A deterministic row that runs differently when stepped (state its centroids do not
            # carry): certify its continuous runs instead, one prefix length at a time.
            end = _prefix_failure(impl, problem, certifier, timed, length)
            certificate.source = "prefixes" if end is None else certificate.source
        if end is not None and not deterministic:
            # Sums in an order that changes from run to run (atomics) part the timed run from the
            # validated one at some near-tie: its end is then no step from this trajectory's, and
            # nothing short of its own trajectory could certify it. Said, not hidden.
            certificate.nondeterministic = end.sentence()
        else:
            certificate.failure = end
    return certificate


PREFIX_MAX_ITERATIONS = 50  # prefix runs cost T (T + 1) / 2 iterations of the row


def _prefix_failure(impl, problem, certifier, timed: list, length: int) -> Failure | None:
    """Run the row for 1, 2, ..., T iterations from the start: each run's end must be a certified
    step from the one before, and each timed run's end the prefix run's of its count."""
    previous = np.asarray(problem.initial_centroids, dtype=np.float64)
    ends = {}
    for count in range(1, length + 1):
        result = impl.run(replace(problem, iterations=count, tol=None, warmup=0, repeats=1, max_time=None))
        centroids = np.asarray(result.centroids, dtype=np.float64)
        failure = certifier.step(count, previous, centroids, result.labels).failure
        if failure is not None:
            failure.text = (f"its run of {count} iterations is no Lloyd step from its run of {count - 1} "
                            f"({failure.text})")
            return failure
        ends[count] = previous = centroids
    for index, result in enumerate(timed):
        if not np.array_equal(np.asarray(result.centroids, dtype=np.float64), ends[int(result.iterations)]):
            return Failure(0, "end point", text=f"timed run {index + 1} did not end where the same row's untimed "
                                                f"run of {result.iterations} iterations ends")
    return None


def _deterministic(impl, problem) -> bool:
    """Does the row's first step, run twice the same way, give the same centroids to the bit?"""
    once, _ = next(_stepped(impl, problem, 1))
    again, _ = next(_stepped(impl, problem, 1))
    return np.array_equal(once, again)


def _count(certificate: Certificate, step, labelled: bool) -> None:
    certificate.near_ties += step.near_ties
    certificate.unbounded = max(certificate.unbounded, step.unbounded)
    if labelled:
        certificate.labels_known += 1
        certificate.ties_as_float64 += step.ties_as_float64
        certificate.ties_other_way += step.ties_other_way
        certificate.inadmissible.append(step.inadmissible)


def _changes(before, after, n: int) -> tuple[int, int]:
    """(fewest, most) points that changed cluster between two assignments: points clear in both
    with different labels surely changed; all but those clear in both with the same label may
    have. In the first iteration every point counts as changed."""
    if before is None:
        return n, n
    both = before.unique & after.unique
    return (int((both & (before.nearest != after.nearest)).sum()),
            n - int((both & (before.nearest == after.nearest)).sum()))


def _stop_failure(problem, iteration: int, length: int, changed: tuple[int, int]) -> Failure | None:
    """Under the tolerance rule (stop after an iteration in which at most tol * n points changed
    cluster), a row must stop where the rule holds for every admissible labelling and go on where
    it holds for none."""
    if problem.tol is None:
        return None
    n, limit = problem.n, problem.tol * problem.n
    least, most = changed
    if iteration < length and most <= limit:
        return Failure(iteration, "stop", text=f"it went on after iteration {iteration}, where at most {most} of "
                                               f"{n} points could change cluster (the rule stops at {limit:g})")
    if iteration == length < problem.iterations and least > limit:
        return Failure(iteration, "stop", text=f"it stopped after iteration {iteration}, where at least {least} of "
                                               f"{n} points changed cluster (more than {limit:g})")
    return None


def _iterations_failure(problem, claimed: int, fixed_point: bool) -> Failure | None:
    """Under the iterations rule a row runs exactly the iterations asked for; fewer only where
    its trajectory has reached a fixed point (more iterations would change nothing)."""
    if problem.tol is None and claimed != problem.iterations and not (claimed < problem.iterations and fixed_point):
        return Failure(0, "iterations", text=f"it claims {claimed} iterations where {problem.iterations} were "
                                             "asked for, and its end is not a fixed point")
    if problem.tol is not None and claimed > problem.iterations:
        return Failure(0, "iterations", text=f"it ran {claimed} iterations, more than the {problem.iterations} allowed")
    return None


def _end_failure(certifier: Certifier, timed: list, kept: dict, frozen_slack: bool) -> Failure | None:
    """Each timed result ends where the trajectory ends, or one certified step from its last
    but one (a row that steps differently, or whose sums are not deterministic, ends a rounding
    away). frozen_slack: empty clusters may be off by the step's largest mean bound, for a row
    whose sums are not deterministic only (its timed run froze them where its own sums put them)."""
    for index, result in enumerate(timed):
        count = int(result.iterations)
        end = np.asarray(result.centroids, dtype=np.float64)
        if end.shape == kept[count].shape and np.array_equal(end, kept[count]):
            continue
        if end.shape != kept[count].shape or not np.isfinite(end).all():
            return Failure(0, "end point", text=f"timed run {index + 1} returned centroids of shape {end.shape} "
                                                "or with NaN")
        step = certifier.step(count, kept[count - 1], end, result.labels, end=frozen_slack)
        if step.failure is not None:
            failure = step.failure
            failure.check = "end point"
            failure.text = (f"timed run {index + 1} did not end where its validated trajectory ends, nor one "
                            f"step from its last but one ({failure.text}); a row that keeps state across "
                            "iterations that its centroids do not carry runs differently when stepped, and "
                            "should report its trajectory instead (`traces`)")
            return failure
    return None
