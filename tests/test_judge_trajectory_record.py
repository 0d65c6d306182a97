"""What kmbench.judge.trajectory records along a row's trajectory, and how it runs the row: the
near-ties counted step by step and where a row parts from float64, the inertias it leaves for the
end points, the scans it adds to the problem's bank, the stepped runs it asks for, and what it
reuses from its caller (spread, geometry, the row's distance form). Each case is a tiny problem
whose every step is known by hand."""

from dataclasses import replace

import numpy as np
import pytest

from kmbench.judge import certify, trajectory
from kmbench.judge.scan import Geometry
from kmbench.judge.seeds import Bank
from kmbench.protocol import Problem, Result, reference, residence
from tests.test_judge_trajectory import Recorded, three_blobs
from tests.wrong_rows import Perturbed, PlainLloyd, update

GAP = 2.0 ** -22


def near_tie_problem():
    """Three points on a line. From centroids -0.5 and 2, step 1 gives 0 and 2; there point 1
    (at 1 + GAP) is nearer 2 by 4 GAP in squared distance: a near tie in float32 (either label
    admissible), where float64 keeps the centroids at 0 and 2 for good."""
    data = np.array([[0, 0], [1 + GAP, 0], [3 - GAP, 0]], np.float32)
    return Problem(data, np.array([[-0.5, 0], [2, 0]], np.float32), 3, warmup=0, repeats=1)


class NearTiesToLowest(PlainLloyd):
    """Gives a point the lowest index among centroids within a millionth of its nearest's squared
    distance, as a row whose rounding cannot tell them apart would: right, but not float64's."""

    name = "near-ties-to-lowest"

    def step(self, x, centroids):
        distances = ((x[:, None, :].astype(np.float64) - centroids[None].astype(np.float64)) ** 2).sum(axis=2)
        labels = np.argmax(distances <= distances.min(axis=1, keepdims=True) * (1 + 1e-6), axis=1)
        return labels, update(x, labels, centroids, self.work)


def findings(certificate):
    return (certificate.certified, certificate.near_ties, certificate.ties_as_float64, certificate.ties_other_way,
            certificate.parted_at, certificate.labels_known, certificate.inadmissible, certificate.unbounded)


def test_near_ties_are_counted_over_every_step_each_as_the_row_decided_it():
    """Float64's way: the tie at steps 2 and 3, both decided as float64 does, no parting."""
    problem = near_tie_problem()
    row = PlainLloyd()
    certificate = trajectory.certify(row, problem, [row.run(problem)], "float32")
    assert findings(certificate) == (True, 2, 2, 0, None, 3, [0.0, 0.0, 0.0], 0)
    assert certificate.undecided == pytest.approx(2 / 9)  # of 3 points x 3 steps


def test_a_row_that_decides_a_near_tie_the_other_way_parts_from_float64_there():
    """The other way at step 2 (point 1 to centroid 0): certified, parted at 2; from there its
    centroids (0.5, 3) leave no tie."""
    problem = near_tie_problem()
    row = NearTiesToLowest()
    certificate = trajectory.certify(row, problem, [row.run(problem)], "float32")
    assert findings(certificate) == (True, 1, 0, 1, 2, 3, [0.0, 0.0, 0.0], 0)
    assert certificate.undecided == pytest.approx(1 / 9)


def test_the_certificate_holds_the_inertia_of_every_centroids_it_scanned_and_says_each_step():
    """The start of each step and each timed end: the end points' figures need no scan of their own."""
    data = three_blobs()
    problem = Problem(data, data[[0, 1, 60]].copy(), 2, warmup=0, repeats=1)
    row = PlainLloyd()
    met = [problem.initial_centroids, row.run(replace(problem, iterations=1)).centroids, row.run(problem).centroids]
    heard = []
    certificate = trajectory.certify(row, problem, [row.run(problem)], "float32", progress=heard.append)
    expected = {certify.digest(c): certify.inertia(data, c) for c in met}
    assert len(expected) == 3  # the premise: the trajectory has not converged yet
    assert certificate.inertias.keys() == expected.keys()
    assert all(certificate.inertias[key] == pytest.approx(value, rel=1e-12) for key, value in expected.items())
    assert heard == ["validating plain-lloyd: step 1/2", "validating plain-lloyd: step 2/2"]


class BreaksAtSecondRun(PlainLloyd):
    """Stepped, its second run (the second step) returns `broken` centroids."""

    name = "breaks-at-second-run"

    def __init__(self, broken):
        super().__init__()
        self.broken, self.runs = broken, 0

    def run(self, problem):
        result = super().run(problem)
        self.runs += 1
        if self.runs == 2:
            result.centroids = self.broken(result.centroids.copy())
        return result


def with_nan(c):
    c[1, 0] = np.nan
    return c


def with_inf(c):
    c[0, 1] = np.inf
    return c


@pytest.mark.parametrize("broken", [with_nan, with_inf, lambda c: c[:-1]], ids=["nan", "inf", "shape"])
def test_a_step_with_centroids_no_mean_can_be_fails_at_that_step(broken):
    data = three_blobs()
    problem = Problem(data, data[[0, 1, 60]].copy(), 3, warmup=0, repeats=1)
    certificate = trajectory.certify(BreaksAtSecondRun(broken), problem, [PlainLloyd().run(problem)], "float32")
    assert certificate.failure.as_dict() == {"iteration": 2, "check": "means", "where": "", "amount": 0.0,
                                             "allowance": 0.0, "text": "centroids of the wrong shape, NaN or infinite"}
    assert certificate.steps == 1


def test_a_stepped_row_is_run_once_a_step_untimed_from_its_own_last_output_in_the_datas_dtype():
    """A float32 row's output goes back as float32 (as the problem's start came); a row that
    keeps float64 centroids on float32 data gets them back unrounded."""
    data = three_blobs()
    problem = Problem(data, data[[0, 1, 60]].copy(), 3, warmup=2, repeats=3, max_time=5.0, tol=0.01)
    for dtype, handed in (("float32", np.float32), ("float64", np.float64)):
        row = Recorded()
        row.dtype, row.work = dtype, handed  # the precision it computes and keeps its centroids in
        steps = list(trajectory._stepped(row, problem, 3))
        assert [(p.iterations, p.tol, p.warmup, p.repeats, p.max_time) for p in row.asked] == [(1, None, 0, 1, None)] * 3
        assert [p.initial_centroids.dtype for p in row.asked] == [np.float32] + [handed] * 2
        assert all(np.array_equal(p.initial_centroids, c) for p, (c, _) in zip(row.asked[1:], steps))


class StopsWhereNothingMoves(PlainLloyd):
    """Stops after the first iteration that left its centroids where they were, and says so."""

    name = "stops-where-nothing-moves"

    def run(self, problem):
        x, c = np.asarray(problem.data, np.float32), np.asarray(problem.initial_centroids, np.float32)
        for done in range(1, problem.iterations + 1):
            labels, new = self.step(x, c)
            moved, c = not np.array_equal(new, c), new
            if not moved:
                break
        return Result(c.astype(np.float64), done, {"iterate": 1e-3}, labels=labels)


def test_a_row_that_stops_early_at_a_fixed_point_is_certified():
    data = np.array([[-1, 0], [0, 0], [1, 0], [9, 0], [10, 0], [11, 0]], np.float32)
    problem = Problem(data, np.array([[0, 0], [5, 0]], np.float32), 10, warmup=0, repeats=1)
    row = StopsWhereNothingMoves()
    result = row.run(problem)
    assert result.iterations == 2  # the premise: step 1 reaches (0, 10), step 2 stays
    certificate = trajectory.certify(row, problem, [result], "float32")
    assert certificate.certified and certificate.fixed_point and certificate.steps == 2


def test_certify_adds_each_scan_to_the_problems_bank():
    """With more centroids than SEEDS_FROM_K the scans are kept, so that the next row's start near them."""
    data = three_blobs()
    k = certify.SEEDS_FROM_K + 1
    problem = Problem(data, data[:: data.shape[0] // k][:k].copy(), 2, warmup=0, repeats=1)
    row, bank = PlainLloyd(), Bank()
    assert trajectory.certify(row, problem, [row.run(problem)], "float32", bank=bank).certified
    assert sorted(bank.by_step) == [1, 2, 3]  # two steps, and the end's fixed-point check


def test_failure_amounts_are_in_units_of_the_spread_given():
    data = three_blobs()
    problem = Problem(data, data[[0, 60, 120]].copy(), 2, warmup=0, repeats=1)
    row = Perturbed()
    timed = [row.run(problem)]
    in_spreads = trajectory.certify(row, problem, timed, "float32").failure
    in_units = trajectory.certify(row, problem, timed, "float32", spread=1.0).failure
    assert in_spreads.amount > 0 and in_units.check == in_spreads.check
    assert in_units.amount == pytest.approx(in_spreads.amount * reference.spread(data, np), rel=1e-9)


class Duck:
    """A row written without kmbench's Implementation: no `traces`; its distance form depends on
    the problem (as kmbench-gpu's tiled strategy's does)."""

    name = "duck"

    def __init__(self):
        self.plain, self.asked = PlainLloyd(), []

    def run(self, problem):
        return self.plain.run(problem)

    def distance_form(self, problem):
        self.asked.append(problem.d)
        return "direct" if problem.d <= 4 else "any"


def test_a_small_host_problem_is_judged_with_numpy_reusing_the_geometry_given(monkeypatch):
    """Also: a row that says nothing of traces is stepped, and is asked its distance form on this problem."""
    data = three_blobs()
    problem = Problem(data, data[[0, 60, 120]].copy(), 2, warmup=0, repeats=1)
    geometry = Geometry.of(data, np)
    monkeypatch.setattr(Geometry, "of", classmethod(lambda cls, *a, **kw: pytest.fail("the geometry made again")))
    monkeypatch.setattr(residence, "device_module", lambda: pytest.fail("a small host problem sent to a GPU"))
    row = Duck()
    certificate = trajectory.certify(row, problem, [row.run(problem)], "float32", geometry=geometry)
    assert certificate.certified and certificate.source == "stepped" and row.asked == [2]
