"""Wrong verdicts the judge must not give, each on a row made to provoke it: a one-line slip in
the judge (`make mutate-judge` plants such slips) turns one of these red. Right rows stay `ok`,
wrong ones do not."""

from dataclasses import replace

import numpy as np
import pytest

from kmbench.judge import trajectory
from kmbench.judge.certify import Certifier
from kmbench.judge.precision import FLOAT32
from kmbench.judge.sums import group
from kmbench.protocol import Problem, runner, validate
from tests.wrong_rows import PlainLloyd


def test_a_near_tie_sent_to_a_far_centroid_is_inadmissible():
    """Points on the bisector of two centroids may take either of them, never a third far off."""
    rng = np.random.default_rng(0)
    centroids = np.array([[-1.0, 0.0], [1.0, 0.0], [9.0, 9.0]])
    ties = np.c_[np.zeros(200), rng.uniform(-0.7, 0.7, 200) + 1e-3].astype(np.float32)  # not integers: no exact tie
    clear = np.vstack([rng.normal((-1, 0), 0.1, (300, 2)), rng.normal((1, 0), 0.1, (300, 2)),
                       rng.normal((9, 9), 0.1, (300, 2))]).astype(np.float32)
    data = np.vstack([ties, clear])
    certifier = Certifier.of(data, FLOAT32)
    honest = np.r_[np.zeros(200, int), np.repeat([0, 1, 2], 300)]
    means, _ = group(certifier.data, honest, centroids, certifier.geometry, np).means(centroids, np)
    assert certifier.step(1, centroids, means, honest).failure is None
    assert certifier.step(1, centroids, means, honest).near_ties >= 200  # the bisector's points are near-ties
    far = honest.copy()
    far[:200] = 2
    means, _ = group(certifier.data, far, centroids, certifier.geometry, np).means(centroids, np)
    failure = certifier.step(1, centroids, means, far).failure
    assert failure is not None and failure.check == "assignment"


def test_a_correct_float64_row_within_a_hair_of_bisectors_is_ok():
    """float64 data at d = 16, points within 1e-7 of the bisector of two centroids: the judge's
    float32 product cannot tell their sides, so it must score them again in float64 rather than
    take its own float32 answer for exact."""
    rng = np.random.default_rng(1)
    d = 16
    axis = np.zeros(d)
    axis[0] = 1.0
    start = np.vstack([-axis, axis, 6 * np.ones(d)])
    side = rng.choice([-1.0, 1.0], 3000)
    data = np.vstack([side[:, None] * 1e-7 * axis + rng.uniform(-0.5, 0.5, (3000, d)) * (1 - axis),
                      6 + rng.standard_normal((300, d)) * 0.1])
    row = PlainLloyd("float64", "direct")
    problem = Problem(data, start, 1, warmup=0, repeats=1)
    certificate = trajectory.certify(row, problem, [row.run(problem)], "float64")
    assert certificate.certified, certificate.failure.sentence()


class WholeInFloat32(PlainLloyd):
    """Declares float64, and computes in float64 when stepped one iteration at a time, in
    float32 when it runs whole: its timed end is close to its trajectory's, and not on it."""

    name = "whole-in-float32"

    def run(self, problem):
        self.work = np.float64 if problem.iterations == 1 else np.float32
        return super().run(problem)

    def reported_labels(self, labels):
        return None


def test_a_timed_end_near_but_off_the_trajectory_is_a_mismatch():
    rng = np.random.default_rng(2)
    data = np.vstack([rng.normal(c, 1.0, (500, 3)) for c in (0, 6, 12)]).astype(np.float64)
    start = data[rng.choice(len(data), 3, replace=False)]
    row = WholeInFloat32("float64")
    problem = Problem(data, start, 6, warmup=0, repeats=1)
    timed = row.run(problem)
    stepped = row.run(replace(problem, iterations=1))
    assert np.allclose(timed.centroids, row.run(problem).centroids)  # the case: close, not equal
    certificate = trajectory.certify(row, problem, [timed], "float64")
    assert not certificate.certified and stepped.iterations == 1


class ApproximateShift(PlainLloyd):
    """Says it is approximate, and moves every centroid by half a unit."""

    name = "approximate-shift"
    approximate = True

    def finish(self, centroids, problem):
        return centroids + 0.5

    def reported_labels(self, labels):
        return None


def test_an_approximate_row_that_fails_its_steps_is_approximate_not_ok():
    rng = np.random.default_rng(3)
    data = np.vstack([rng.normal(c, 1.0, (400, 2)) for c in (0, 8, 16)]).astype(np.float32)
    start = data[rng.choice(len(data), 3, replace=False)]
    problem = Problem(data, start, 4, warmup=0, repeats=1)
    oracle = validate.Oracle.compute(data, start, 4)
    row = ApproximateShift()
    verdict = runner.judgement([row.run(problem)], oracle, problem, row)
    assert verdict.status == validate.APPROXIMATE, verdict.detail
    plain = PlainLloyd()
    assert runner.judgement([plain.run(problem)], oracle, problem, plain).status == validate.OK


def test_the_worst_repeat_is_shown_and_a_malformed_end_is_a_mismatch():
    ok, wrong = validate.Verdict(validate.OK, 0.0, 0.0), validate.Verdict(validate.MISMATCH, 1.0, 1.0)
    assert validate.worst([ok, wrong, ok]) is wrong
    oracle = validate.Oracle(np.zeros((2, 2)), 1.0, 1.0, 10)
    assert validate.malformed(np.array([[0.0, np.nan], [1.0, 1.0]]), oracle).status == validate.MISMATCH
    assert validate.malformed(np.zeros((3, 2)), oracle).status == validate.MISMATCH
    assert validate.malformed(np.zeros((2, 2)), oracle) is None


def _overlapping(offset):
    rng = np.random.default_rng(4)
    centres = rng.uniform(-3, 3, (20, 2))
    data = (centres[rng.integers(0, 20, 20_000)] + rng.standard_normal((20_000, 2)) + offset).astype(np.float32)
    return data, data[rng.choice(len(data), 20, replace=False)]


def test_where_most_decisions_stay_open_an_ok_says_it_proves_little():
    """2-D data 1,000 from the origin, overlapping clusters: float32's bound for expanded distances
    leaves nearly every decision open, and a row that moves every centroid by half a unit passes
    it. The verdict says how little that proves; the same row near the origin is caught."""
    for offset, caught in ((1000.0, False), (0.0, True)):
        data, start = _overlapping(offset)
        problem = Problem(data, start, 2, warmup=0, repeats=1)
        oracle = validate.Oracle.compute(data, start, 2)
        row = ApproximateShift()
        row.form = "expanded"
        verdict = runner.judgement([row.run(problem)], oracle, problem, row)
        if caught:
            assert verdict.status == validate.APPROXIMATE
        else:
            assert verdict.status == validate.OK and validate.weak({"certificate": verdict.certificate})
            assert "proves little" in verdict.detail


class SumsInFloat32WhenTimed(PlainLloyd):
    """Declares float64; its timed run sums in float32, every untimed run of the judge's in
    float64: close ends, and not the same work."""

    name = "float32-when-timed"

    def __init__(self):
        super().__init__("float64", "direct")
        self.timed = False

    def step(self, x, centroids):
        labels, _ = super().step(x, centroids)
        from tests.wrong_rows import update

        return labels, update(x, labels, centroids, np.float32 if self.timed else np.float64)

    def reported_labels(self, labels):
        return None


def test_a_timed_run_that_does_other_work_than_its_untimed_runs_is_a_mismatch():
    rng = np.random.default_rng(6)
    data = np.vstack([rng.normal(c, 1.0, (2000, 3)) for c in (0, 5, 10)]).astype(np.float64)
    start = data[rng.choice(len(data), 3, replace=False)]
    row = SumsInFloat32WhenTimed()
    problem = Problem(data, start, 4, warmup=0, repeats=1)
    row.timed = True
    timed = row.run(problem)
    row.timed = False
    untimed = row.run(problem)
    assert not np.array_equal(timed.centroids, untimed.centroids)
    assert np.allclose(timed.centroids, untimed.centroids)  # the case: close, not equal
    certificate = trajectory.certify(row, problem, [timed], "float64")
    assert not certificate.certified


class ClaimsNoIteration(PlainLloyd):
    name = "claims-no-iteration"

    def run(self, problem):
        result = super().run(problem)
        result.iterations = 0
        return result


def test_a_run_that_claims_no_iteration_is_not_ok_even_where_the_start_is_converged():
    rng = np.random.default_rng(7)
    data = np.vstack([rng.normal(c, 0.5, (500, 2)) for c in (0, 20)]).astype(np.float32)
    converged = PlainLloyd().run(Problem(data, data[[0, 600]], 30, warmup=0, repeats=1)).centroids
    problem = Problem(data, converged.astype(np.float32), 3, warmup=0, repeats=1)
    row = ClaimsNoIteration()
    certificate = trajectory.certify(row, problem, [row.run(problem)], "float32")
    assert not certificate.certified and "no iteration" in certificate.failure.sentence()


def test_the_tolerance_rule_holds_a_row_to_the_counts_that_surely_and_possibly_changed():
    """Between the points that surely changed cluster (least) and those that may have (most):
    stopping is wrong only where even `least` exceeds the limit, going on only where even `most`
    is within it."""
    problem = Problem(np.zeros((100, 2), np.float32), np.zeros((2, 2), np.float32), 10, warmup=0, repeats=1,
                      tol=0.05)  # the limit: 5 points
    stops, goes_on = dict(iteration=3, length=3), dict(iteration=3, length=6)
    assert trajectory._stop_failure(problem, changed=(2, 9), **stops) is None  # the rule may hold: stopping is fine
    assert trajectory._stop_failure(problem, changed=(6, 9), **stops).check == "stop"  # it surely does not
    assert trajectory._stop_failure(problem, changed=(2, 9), **goes_on) is None  # the rule may fail: going on is fine
    assert trajectory._stop_failure(problem, changed=(2, 4), **goes_on).check == "stop"  # it surely holds


def test_the_end_points_figures_are_the_float64_inertia_of_the_end():
    """The certificate hands over the float64 inertia of the centroids it met (the end included):
    the record's figure is that inertia, not a scan of its own, and not another number."""
    from kmbench.judge import certify

    rng = np.random.default_rng(8)
    data = np.vstack([rng.normal(c, 1.0, (800, 2)) for c in (0, 6, 12)]).astype(np.float32)
    start = data[rng.choice(len(data), 40, replace=False)]
    problem = Problem(data, start, 3, warmup=0, repeats=1)
    oracle = validate.Oracle.compute(data, start, 3)
    row = PlainLloyd()
    timed = row.run(problem)
    verdict = runner.judgement([timed], oracle, problem, row)
    assert verdict.inertia == pytest.approx(certify.inertia(data, timed.centroids), rel=1e-12)
    plain = ((data.astype(np.float64)[:, None] - timed.centroids[None]) ** 2).sum(axis=2).min(axis=1).sum()
    assert verdict.inertia == pytest.approx(plain, rel=1e-9)


def test_the_judge_stays_right_when_its_own_products_err_by_all_their_bound_allows(monkeypatch):
    """The judge's float32 scores may each be off by its bound J, in opposite directions: a gap it
    computes is the true one within 2 J. Here every score errs that way, widening every gap by
    1.98 J, on points exactly on the bisector of two centroids (float64 data at d = 16, so its
    float32 product scores them), where a float64 row may take either centroid and this one takes
    the higher index. The judge must still leave them open and accept the row."""
    from kmbench.judge import scoring
    from tests.wrong_rows import TiesToHighest

    original = scoring.Scorer.best_two

    def widened(self, points, rows):
        d1, d2, best = original(self, points, rows)
        reach = float(np.sqrt((self.c_centred ** 2).sum(axis=1)).max())
        error = 0.99 * self.factor * (points.centred_norm[rows] + reach) ** 2
        return d1 - error, d2 + error, best

    monkeypatch.setattr(scoring.Scorer, "best_two", widened)
    rng = np.random.default_rng(9)
    d = 16
    on_bisector = np.c_[np.zeros(500), rng.uniform(-1, 1, (500, d - 1)) + 0.1]
    sides = np.vstack([rng.normal(0, 0.3, (400, d)) + 3 * np.eye(d)[0], rng.normal(0, 0.3, (400, d)) - 3 * np.eye(d)[0]])
    data = np.vstack([on_bisector, sides])
    start = np.vstack([-np.eye(d)[0], np.eye(d)[0]])
    row = TiesToHighest("float64", "direct")
    problem = Problem(data, start, 1, warmup=0, repeats=1)
    timed = row.run(problem)
    assert (timed.labels[:500] == 1).all()  # it took the higher index on every tie
    certificate = trajectory.certify(row, problem, [timed], "float64")
    assert certificate.certified, certificate.failure.sentence()


def test_ties_on_integers_too_large_for_exact_float32_may_go_either_way():
    """Integer points 1,000 from the origin: their ties are exact in the reals, but a float32 row
    may compute |x|^2 - 2 x.c + |c|^2 there, which rounds (sums of products past 2^24), so the
    lowest-index rule cannot be asked of it; a row that sends ties to the higher index is ok.
    (Near the origin, tests/test_wrong_rows.py shows the same row named.)"""
    from tests.wrong_rows import TiesToHighest

    rng = np.random.default_rng(10)
    half = rng.integers(0, 11, size=(3000, 2))
    data = (np.vstack([half, 10 - half]) + 1000).astype(np.float32)  # an integer mean, (1005, 1005)
    start = (np.array([[0, 0], [2, 0], [0, 2], [2, 2], [10, 10], [8, 10], [10, 8], [8, 8]]) + 1000).astype(np.float32)
    row = TiesToHighest("float32", "direct")
    problem = Problem(data, start, 2, warmup=0, repeats=1)
    timed = row.run(problem)
    distances = ((data[:, None, :].astype(np.float64) - start[None]) ** 2).sum(axis=2)
    ordered = np.sort(distances, axis=1)
    assert (ordered[:, 0] == ordered[:, 1]).sum() > 500  # exact ties in the reals to decide
    certificate = trajectory.certify(row, problem, [timed], "float32")
    assert certificate.certified, certificate.failure.sentence()


def test_a_weak_ok_says_so_in_its_table_cell():
    from kmbench.report.formatting import status_text

    weak = {"certificate": {"undecided": 0.98}}
    assert validate.weak(weak) and not validate.weak({"certificate": {"undecided": 0.1}}) and not validate.weak({})
    assert status_text("ok", "float32", "float32", validate.weak(weak)) == "ok (weak)"
    assert status_text("ok", "tf32", "float32", True) == "ok (tf32, weak)"
    assert status_text("mismatch", "float32", "float32", True) == "mismatch"


def test_scores_that_overflow_float32_decide_nothing():
    """float64 data near 1e20: the judge's float32 product overflows (inf - inf is no distance),
    so it must score those points again in float64, not take an infinite score for a nearest."""
    from kmbench.judge.points import Geometry
    from kmbench.judge.precision import FLOAT32, FLOAT64
    from kmbench.judge.scan import assign

    rng = np.random.default_rng(0)
    for scale in (1e18, 1e19, 1e20, 1e21):
        for declared in (FLOAT64, FLOAT32):
            data = np.vstack([rng.normal(0, 1, (1000, 10)) + 3, rng.normal(0, 1, (1000, 10)) - 3]) * scale
            centroids = data[rng.choice(len(data), 5, replace=False)]
            with np.errstate(over="ignore", invalid="ignore"):
                found = assign(data, centroids, declared, Geometry.of(data))
            exact = ((data[:, None, :] / scale - centroids[None] / scale) ** 2).sum(axis=2).argmin(axis=1)
            np.testing.assert_array_equal(found.nearest, exact, err_msg=f"scale {scale:g}, {declared.name}")
