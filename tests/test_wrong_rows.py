"""Rows known to be wrong, registered as a third party registers a row (the `kmbench.impls` entry
point), each caught wherever it differs observably; rows known to be right, never called wrong."""

import numpy as np
import pytest

from kmbench import registry
from tests.conftest import gpu_cell
from kmbench.protocol import Result
from tests import wrong_rows


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    with wrong_rows.registered(tmp_path_factory.mktemp("entry-points")):
        found = registry.discover()
    return found


def blobs(n=3000, d=16, centres=12, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    where = rng.uniform(-10, 10, (centres, d))
    return (where[rng.integers(0, centres, n)] + rng.standard_normal((n, d))).astype(dtype)


def unit_norm(n=3000, d=32, seed=1):
    x = np.random.default_rng(seed).standard_normal((n, d))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def tie_lattice():
    """Integer points with an integer mean, and two centroids every point is equally near: each
    point is an exact tie, so only the lowest-index rule decides, and every form of float32
    arithmetic computes the tie exactly."""
    rng = np.random.default_rng(2)
    half = rng.integers(1, 6, (200, 2)).astype(np.float32)
    data = np.vstack([half, -half, [[0.0, 0.0]] * 4]).astype(np.float32)
    start = np.array([[1.0, 0.0], [1.0, 0.0], [-1.0, 0.0], [-1.0, 0.0]], dtype=np.float32)
    return data, start


def with_empty_cluster():
    data = blobs(n=2000, d=4, centres=3)
    start = np.vstack([data[:3], [[500.0] * 4]]).astype(np.float32)
    return data, start


PROBLEMS = {
    "blobs": lambda: (blobs(), None),
    "unit-norm": lambda: (unit_norm(), None),
    "float64 blobs": lambda: (blobs(dtype=np.float64), None),
}


def cell(rows, name, data, k, iterations=6, start=None):
    _, record = gpu_cell(rows[name], data, k, iterations, start=start)
    return record


def test_the_rows_are_found_through_the_entry_point(rows):
    for row in [wrong_rows.PlainLloyd, *wrong_rows.WRONG]:
        assert isinstance(rows[row.name], row)


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
def test_the_plain_row_is_ok(rows, problem):
    data, start = PROBLEMS[problem]()
    record = cell(rows, "plain-lloyd", data, 20, start=start)
    assert record["status"] == "ok", record["detail"]


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
@pytest.mark.parametrize("name, check", [
    ("wrong-returns-start", "means"),
    ("wrong-one-short", "means"),
    ("wrong-half-iterations", "means"),
    ("wrong-float16-sums", "means"),
    ("wrong-false-dtype", "means"),
    ("wrong-perturbed", "means"),
])
def test_a_wrong_step_is_a_mismatch_that_names_it(rows, problem, name, check):
    data, start = PROBLEMS[problem]()
    record = cell(rows, name, data, 20, start=start)
    assert record["status"] == "mismatch", record["detail"]
    failure = record["validation"]["certificate"]["failure"]
    assert failure["check"] == check and failure["iteration"] == 1, failure
    assert failure["amount"] > failure["allowance"] > 0


@pytest.mark.parametrize("name", ["wrong-claims-instant", "wrong-claims-too-long"])
def test_a_false_clock_is_an_error(rows, name):
    record = cell(rows, name, blobs(), 20)
    assert record["status"] == "error"
    assert ("physical floor" if name.endswith("instant") else "inside a call the harness timed") in record["detail"]


def test_a_row_that_moves_an_empty_cluster_is_caught(rows):
    data, start = with_empty_cluster()
    record = cell(rows, "wrong-moves-empty", data, 4, start=start)
    assert record["status"] == "mismatch"
    failure = record["validation"]["certificate"]["failure"]
    assert failure["check"] == "empty cluster" and failure["where"] == "centroid 3"
    assert cell(rows, "plain-lloyd", data, 4, start=start)["status"] == "ok"


def test_ties_to_the_higher_index_are_named_where_ties_are_exact(rows):
    data, start = tie_lattice()
    record = cell(rows, "wrong-ties-to-highest", data, 4, iterations=3, start=start)
    assert record["status"] == "mismatch"
    assert "an exact tie: the lowest index wins" in record["detail"]
    assert cell(rows, "plain-lloyd", data, 4, iterations=3, start=start)["status"] == "ok"


def test_a_row_one_iteration_short_is_caught_when_its_timed_run_is_checked():
    """Stepped one iteration at a time it is right (each call runs its one iteration); only its
    timed run, one short of the trajectory, gives it away, and then its runs of every length."""

    class ShortOnlyWhenLong(wrong_rows.PlainLloyd):
        name = "short-only-when-long"

        def iterations_to_run(self, problem):
            return max(1, problem.iterations - 1)

    record = cell({"r": ShortOnlyWhenLong()}, "r", blobs(), 20)
    assert record["status"] == "mismatch"
    # Its timed end is off the stepped trajectory, so its runs of 1, 2, ... iterations are
    # checked in turn: the run of 2 (one iteration) is no step from the run of 1.
    assert "its run of 2 iterations is no Lloyd step from its run of 1" in record["detail"]


def test_one_iteration_short_on_converged_data_cannot_be_seen():
    """Once Lloyd has converged, one iteration more changes nothing: no judge can tell, and the
    result is the right one."""

    class ShortOnlyWhenLong(wrong_rows.PlainLloyd):
        name = "short-only-when-long"

        def iterations_to_run(self, problem):
            return max(1, problem.iterations - 1)

    data = blobs(n=600, d=2, centres=3)
    record = cell({"r": ShortOnlyWhenLong()}, "r", data, 3, iterations=40)
    assert record["status"] == "ok", record["detail"]
    assert record["validation"]["certificate"]["fixed_point"]


def test_expanded_distances_declared_direct_are_caught_far_from_the_origin(rows):
    """Near-ties between neighbouring centroids 1e4 from the origin: the expanded form rounds at
    1e4^2 u ~ 6 (squared units), far past a direct form's rounding, so its labels are not a
    direct-distance row's; declared as "any" (the plain row, expanded), the same labels are fine."""
    rng = np.random.default_rng(6)
    data = (rng.uniform(-1, 1, (5_000, 2)) + 1e4).astype(np.float32)
    start = data[:60]
    record = cell(rows, "wrong-expanded-declared-direct", data, 60, iterations=2, start=start)
    assert record["status"] == "mismatch", record["detail"]
    assert record["validation"]["certificate"]["failure"]["check"] == "assignment"
    honest = cell({"r": wrong_rows.PlainLloyd(form="expanded")}, "r", data, 60, iterations=2, start=start)
    assert honest["status"] == "ok", honest["detail"]


def test_a_result_of_the_wrong_precision_fails_its_declaration(rows):
    """Declaring float64 promises float64's rounding; float32 arithmetic misses it by far."""
    record = cell(rows, "wrong-false-dtype", blobs(dtype=np.float64), 20)
    assert record["status"] == "mismatch"
    assert "in float64" in record["detail"]


class Jittery(wrong_rows.PlainLloyd):
    """Sums that differ from run to run below float32's rounding, as atomics do."""

    name = "jittery"

    def __init__(self):
        super().__init__()
        self.rng = np.random.default_rng()

    def finish(self, centroids, problem):
        return centroids * (1 + 1e-9 * self.rng.standard_normal(centroids.shape))


@pytest.mark.parametrize("row, status", [(wrong_rows.PlainLloyd, "mismatch"), (Jittery, "ok")])
def test_a_timed_end_off_the_trajectory_is_wrong_unless_the_row_is_not_deterministic(row, status):
    """A timed end no step from the validated trajectory leads to: a deterministic row is wrong;
    one whose first step differs between two runs (atomics) is said to have parted, not blamed."""
    from kmbench.judge import trajectory
    from kmbench.protocol import Problem

    data = blobs(n=2000, d=4, centres=6)
    problem = Problem(data, data[:6].copy(), 5, warmup=0, repeats=1)
    impl = row()
    timed = impl.run(problem)
    timed.centroids = timed.centroids + 0.5  # a timed run that ended elsewhere
    certificate = trajectory.certify(impl, problem, [timed], "float32")
    assert certificate.certified == (status == "ok")
    assert bool(certificate.nondeterministic) == (status == "ok")



@pytest.mark.parametrize("row, certified", [(wrong_rows.PlainLloyd, False), (Jittery, True)])
def test_the_frozen_empty_cluster_slack_is_only_for_rows_that_are_not_deterministic(row, certified):
    """A timed run that moves an empty centroid 5 units in the last place off its own trajectory:
    within the end point's slack for frozen empty clusters (one step's largest mean bound), outside
    what a kept centroid may move (2 u |c|). Only a row whose sums are not deterministic froze its
    empty clusters where its own sums put them; a deterministic row must end where it ended."""
    from kmbench.judge import trajectory
    from kmbench.judge.precision import FLOAT32
    from kmbench.judge.sums import kept_bound
    from kmbench.protocol import Problem

    data, start = with_empty_cluster()
    problem = Problem(data, start, 5, warmup=0, repeats=1)
    impl = row()
    timed = impl.run(problem)
    end = np.asarray(timed.centroids, np.float32).copy()
    assert np.array_equal(end[3], start[3])  # the premise: no point ever joins the far centroid
    for _ in range(5):
        end[3, 0] = np.nextafter(end[3, 0], np.float32(np.inf))
    timed.centroids = end.astype(np.float64)
    moved = float(end[3, 0]) - float(start[3, 0])
    assert moved > kept_bound(start.astype(np.float64), FLOAT32, np)[3]  # the premise: no kept centroid
    certificate = trajectory.certify(impl, problem, [timed], "float32")
    assert certificate.certified == certified, certificate.failure and certificate.failure.sentence()
    assert bool(certificate.nondeterministic) is False  # the slack's step passes: nothing to say
    if not certified:
        assert certificate.failure.check == "end point"

class StopsAtOnce(wrong_rows.PlainLloyd):
    """Under the tolerance rule, claims convergence after its first iteration."""

    name = "stops-at-once"

    def follows_tolerance(self, tol):
        return True

    def iterations_to_run(self, problem):
        return 1 if problem.tol is not None else problem.iterations

    def run(self, problem):
        result = super().run(problem)
        result.iterations = self.iterations_to_run(problem)
        return result


class NeverStops(StopsAtOnce):
    """Under the tolerance rule, runs every allowed iteration however early Lloyd converged."""

    name = "never-stops"

    def iterations_to_run(self, problem):
        return problem.iterations


@pytest.mark.parametrize("row, said", [(StopsAtOnce, "it stopped after iteration 1"),
                                       (NeverStops, "it went on after iteration")])
def test_a_row_that_breaks_the_tolerance_rule_is_caught(row, said):
    from tests.conftest import gpu_cell as cell_of

    data = blobs(n=1500, d=2, centres=4)
    _, record = cell_of(row(), data, 4, 60, tol=0.0)
    assert record["status"] == "mismatch", record["detail"]
    failure = record["validation"]["certificate"]["failure"]
    assert failure["check"] == "stop" and said in failure["text"]


def test_the_plain_row_under_the_tolerance_rule_is_ok():
    from tests.conftest import gpu_cell as cell_of
    from impls.cpu.numpy_fast import NumpyFast

    data = blobs(n=1500, d=2, centres=4)
    oracle, record = cell_of(NumpyFast(), data, 4, 60, tol=0.0)
    assert record["status"] == "ok", record["detail"]
    assert record["iterations_executed"] < 60


def test_every_timed_run_is_held_to_the_iteration_count():
    """Two counted runs, one of all ten iterations and one of three: the short one is caught
    though the long one alone would pass."""
    from kmbench.judge import trajectory
    from kmbench.protocol import Problem

    data = blobs(n=2000, d=4, centres=6)
    problem = Problem(data, data[:6].copy(), 10, warmup=0, repeats=1)
    row = wrong_rows.PlainLloyd()
    full = row.run(problem)
    short = row.run(Problem(data, data[:6].copy(), 3, warmup=0, repeats=1))
    assert trajectory.certify(row, problem, [full], "float32").certified
    certificate = trajectory.certify(row, problem, [full, short], "float32")
    assert certificate.failure is not None and certificate.failure.check == "iterations"


class CentredInside(wrong_rows.PlainLloyd):
    """Correct and deterministic, but it centres the data and its centroids on the data's float32
    mean and iterates in that frame (as scikit-learn does): handed its own output back, it rounds
    the centroids into the frame again, so one step at a time it is not the run it makes whole."""

    name = "centred-inside"

    def run(self, problem):
        x = np.asarray(problem.data, np.float32)
        middle = x.mean(axis=0, dtype=np.float64).astype(np.float32)
        centred = x - middle
        c = np.asarray(problem.initial_centroids, np.float32) - middle
        labels = None
        for _ in range(self.iterations_to_run(problem)):
            # Products summed elementwise, not by BLAS (whose rounding varies with its kernel), so
            # this row's every bit, and the premise below, are the same on any CPU.
            labels = (-2 * (centred[:, None, :] * c[None, :, :]).sum(axis=2) + (c * c).sum(axis=1)[None]).argmin(axis=1)
            c = np.array([centred[labels == j].mean(axis=0, dtype=np.float64) if (labels == j).any() else c[j]
                          for j in range(len(c))], np.float32)
        return Result(centroids=(c + middle).astype(np.float64), iterations=problem.iterations,
                      phases={"iterate": 1e-3}, labels=labels)


class CentredInsideWrongWhenLong(CentredInside):
    """Right for one iteration, a spread off for more: stepping alone cannot see it."""

    name = "centred-inside-wrong"

    def run(self, problem):
        result = super().run(problem)
        if problem.iterations > 1:
            result.centroids = result.centroids + 1.0
        return result


def _stateful_problem():
    from kmbench.protocol import Problem

    rng = np.random.default_rng(1)
    x = (rng.integers(0, 30, (5000, 2)) * 0.1 + 101.3).astype(np.float32)  # far enough that re-centring rounds
    # 4 iterations: stepping parts from the run at the second, and it takes prefix runs to certify.
    return Problem(x, x[rng.choice(5000, 60, replace=False)].copy(), 4, warmup=0, repeats=1)


def test_a_deterministic_row_that_steps_differently_is_certified_by_its_prefix_runs():
    from kmbench.judge import trajectory

    problem = _stateful_problem()
    row = CentredInside()
    stepped_end = list(trajectory._stepped(row, problem, problem.iterations))[-1][0]
    timed = row.run(problem)
    assert not np.array_equal(stepped_end, timed.centroids)  # the premise: stepping parts from the run
    certificate = trajectory.certify(row, problem, [timed], "float32")
    assert certificate.certified, certificate.failure.sentence()
    assert certificate.source == "prefixes"


def test_prefix_runs_still_catch_a_row_wrong_when_it_runs_long():
    from kmbench.judge import trajectory

    problem = _stateful_problem()
    row = CentredInsideWrongWhenLong()
    certificate = trajectory.certify(row, problem, [row.run(problem)], "float32")
    assert not certificate.certified
    assert "its run of 2 iterations is no Lloyd step from its run of 1" in certificate.failure.text
