"""What kmbench.judge.trajectory says about a row, fact by fact: the sentences of its failures
(the iteration, the check, the point or timed run they name), the record of its certificate, the
runs it asks of a row and the scans it spends. Each case is a small row known to be right or
wrong in one way; the verdicts themselves are tested in test_judge_guard.py and test_wrong_rows.py."""

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from kmbench.judge import trajectory
from kmbench.judge.certify import Certifier
from kmbench.judge.precision import FLOAT32
from kmbench.protocol import Problem, Result
from tests.test_wrong_rows import CentredInside, _stateful_problem
from tests.wrong_rows import PlainLloyd, assign, update

STATE_NOTE = ("a row that keeps state across iterations that its centroids do not carry runs differently when "
              "stepped, and should report its trajectory instead (`traces`)")


def three_blobs(n=60, seed=0):
    rng = np.random.default_rng(seed)
    return np.vstack([rng.normal(c, 0.5, (n, 2)) for c in ((0, 0), (6, 0), (0, 6))]).astype(np.float32)


def long_problem():
    """One iteration past what prefix runs are made for: a deterministic row's end-point failure
    is then the verdict, not replaced by its prefix runs'."""
    data = three_blobs()
    return Problem(data, data[[0, 60, 120]].copy(), trajectory.PREFIX_MAX_ITERATIONS + 1, warmup=0, repeats=1)


class MislabelsPointZeroWhenTimed(PlainLloyd):
    """Right in the judge's untimed runs; in its timed run, point 0 goes to the centroid farthest
    from it in every iteration, and the means follow those labels."""

    name = "mislabels-point-zero-when-timed"
    timed = False

    def step(self, x, centroids):
        labels = assign(x, centroids, self.form)
        if self.timed:
            labels[0] = int(((x[0] - centroids) ** 2).sum(axis=1).argmax())
        return labels, update(x, labels, centroids, self.work)


def test_a_timed_end_with_a_label_not_admissible_names_its_run_its_iteration_and_its_point():
    problem = long_problem()
    row = MislabelsPointZeroWhenTimed()
    honest = row.run(problem)
    row.timed = True
    wrong = row.run(problem)
    row.timed = False
    failure = trajectory.certify(row, problem, [honest, wrong], "float32").failure
    assert (failure.iteration, failure.check, failure.where) == (problem.iterations, "end point", "point 0")
    head = ("timed run 2 did not end where its validated trajectory ends, nor one step from its last but one "
            "(1 label(s) not admissible; point 0 went to ")
    assert failure.text.startswith(head) and failure.text.endswith(f"); {STATE_NOTE}"), failure.text
    assert failure.sentence().startswith(f"iteration {problem.iterations}, end point, point 0: off by ")


def test_a_timed_end_with_nan_is_named_by_its_run_and_shape():
    problem = long_problem()
    row = PlainLloyd()
    honest = row.run(problem)
    broken = replace(honest, centroids=honest.centroids.copy())
    broken.centroids[1, 0] = np.nan
    failure = trajectory.certify(row, problem, [honest, broken], "float32").failure
    assert failure.as_dict() == {"iteration": 0, "check": "end point", "where": "", "amount": 0.0, "allowance": 0.0,
                                 "text": "timed run 2 returned centroids of shape (3, 2) or with NaN"}


def test_a_timed_end_on_the_validated_trajectory_costs_no_scan_of_its_own(monkeypatch):
    """Each step of the trajectory is scanned once, and each end once more (is it a fixed point?);
    timed runs that ended where the trajectory ends are taken as they are."""
    scans = []
    original = Certifier.step
    monkeypatch.setattr(Certifier, "step", lambda self, iteration, *rest, **options: (
        scans.append(iteration), original(self, iteration, *rest, **options))[1])
    data = three_blobs()
    problem = Problem(data, data[[0, 60, 120]].copy(), 3, warmup=0, repeats=1)
    row = PlainLloyd()
    certificate = trajectory.certify(row, problem, [row.run(problem), row.run(problem)], "float32")
    assert certificate.certified
    assert scans == [1, 2, 3, 4]


class Recorded(PlainLloyd):
    """Keeps the problem of every run it is asked for."""

    name = "recorded"

    def __init__(self):
        super().__init__()
        self.asked = []

    def run(self, problem):
        self.asked.append(problem)
        return super().run(problem)


def test_prefix_runs_are_single_untimed_runs_of_one_to_t_iterations_with_no_stop_rule():
    data = three_blobs()
    problem = Problem(data, data[[0, 60, 120]].copy(), 3, warmup=2, repeats=3, max_time=5.0, tol=0.01)
    row = Recorded()
    timed = row.run(replace(problem, tol=None))
    row.asked.clear()
    assert trajectory._prefix_failure(row, problem, Certifier.of(data, FLOAT32, np), [timed], 3) is None
    assert [(p.iterations, p.tol, p.warmup, p.repeats, p.max_time) for p in row.asked] == [
        (1, None, 0, 1, None), (2, None, 0, 1, None), (3, None, 0, 1, None)]


class CentredInsideMislabelsWhenLong(CentredInside):
    """Right for one iteration; run for more, it reports every point's label one cluster on
    (its centroids stay right): only the labels of its prefix runs can tell."""

    name = "centred-inside-mislabels"

    def run(self, problem):
        result = super().run(problem)
        if problem.iterations > 1:
            result.labels = (result.labels + 1) % problem.k
        return result


def test_prefix_runs_check_the_labels_each_run_reports_and_name_the_run():
    problem = _stateful_problem()
    row = CentredInsideMislabelsWhenLong()
    certificate = trajectory.certify(row, problem, [row.run(problem)], "float32")
    failure = certificate.failure
    assert failure is not None and (failure.iteration, failure.check) == (2, "assignment")
    assert certificate.source == "stepped"  # "prefixes" only where they certified it
    assert failure.where.startswith("point ")
    assert failure.text.startswith("its run of 2 iterations is no Lloyd step from its run of 1 (")
    assert failure.sentence().startswith("iteration 2, assignment, point ")


def test_a_timed_run_off_its_prefix_runs_end_is_named_with_its_iteration_count():
    problem = _stateful_problem()
    row = CentredInside()
    honest = row.run(problem)
    moved = replace(honest, centroids=honest.centroids + 0.5)
    failure = trajectory.certify(row, problem, [honest, moved], "float32").failure
    assert failure.as_dict() == {"iteration": 0, "check": "end point", "where": "", "amount": 0.0, "allowance": 0.0,
                                 "text": "timed run 2 did not end where the same row's untimed run of 4 "
                                         "iterations ends"}


def test_a_trajectory_as_long_as_the_prefix_limit_is_still_certified_by_its_prefix_runs(monkeypatch):
    """The limit is the longest trajectory prefix runs are made for, itself included (here 3,
    not 50: the stateful row steps differently from its third iteration on)."""
    problem = replace(_stateful_problem(), iterations=3)
    monkeypatch.setattr(trajectory, "PREFIX_MAX_ITERATIONS", 3)
    row = CentredInside()
    certificate = trajectory.certify(row, problem, [row.run(problem)], "float32")
    assert certificate.certified and certificate.source == "prefixes"


def small_problem(**rule):
    return Problem(np.zeros((100, 2), np.float32), np.zeros((2, 2), np.float32), 10, warmup=0, repeats=1, **rule)


def test_the_iterations_rule_names_the_claimed_and_the_asked_counts():
    fewer = trajectory._iterations_failure(small_problem(), 3, fixed_point=False)
    assert fewer.as_dict() == {"iteration": 0, "check": "iterations", "where": "", "amount": 0.0, "allowance": 0.0,
                               "text": "it claims 3 iterations where 10 were asked for, and its end is not a fixed "
                                       "point"}
    assert fewer.sentence() == "iterations; " + fewer.text
    assert trajectory._iterations_failure(small_problem(), 3, fixed_point=True) is None


def test_under_the_tolerance_rule_a_row_may_use_every_allowed_iteration_and_no_more():
    tolerant = small_problem(tol=0.01)
    assert trajectory._iterations_failure(tolerant, 10, fixed_point=False) is None
    assert trajectory._iterations_failure(tolerant, 3, fixed_point=False) is None  # the stop rule judges that
    more = trajectory._iterations_failure(tolerant, 11, fixed_point=False)
    assert more.as_dict() == {"iteration": 0, "check": "iterations", "where": "", "amount": 0.0, "allowance": 0.0,
                              "text": "it ran 11 iterations, more than the 10 allowed"}


def test_a_row_that_went_on_is_told_the_iteration_where_it_should_have_stopped():
    failure = trajectory._stop_failure(small_problem(tol=0.05), iteration=3, length=6, changed=(2, 4))
    assert failure.sentence() == ("iteration 3, stop; it went on after iteration 3, where at most 4 of 100 points "
                                  "could change cluster (the rule stops at 5)")


def test_a_row_that_stopped_while_more_points_changed_is_told_where_unless_no_iteration_was_left():
    tolerant = small_problem(tol=0.05)
    early = trajectory._stop_failure(tolerant, iteration=4, length=4, changed=(20, 30))
    assert early.sentence() == ("iteration 4, stop; it stopped after iteration 4, where at least 20 of 100 points "
                                "changed cluster (more than 5)")
    assert trajectory._stop_failure(tolerant, iteration=10, length=10, changed=(20, 30)) is None  # the last allowed


def test_only_points_clear_in_both_assignments_are_known_to_have_changed_or_stayed():
    """Point 0: clear in both, moved (surely changed). Point 1: open before, point 2 open after
    (either may have changed). Point 3: clear in both, stayed."""
    before = SimpleNamespace(unique=np.array([True, False, True, True]), nearest=np.array([0, 0, 1, 1]))
    after = SimpleNamespace(unique=np.array([True, True, False, True]), nearest=np.array([1, 1, 1, 1]))
    assert trajectory._changes(before, after, 4) == (1, 3)
    assert trajectory._changes(None, after, 4) == (4, 4)


class Traced(PlainLloyd):
    """Reports every iteration's centroids when asked (`traces`); counts its runs."""

    name = "traced"
    traces = True
    runs = 0

    def run(self, problem):
        self.runs += 1
        x, c = np.asarray(problem.data, np.float32), np.asarray(problem.initial_centroids, np.float32)
        trace = []
        for _ in range(problem.iterations):
            labels, c = self.step(x, c)
            trace.append(c.astype(np.float64))
        return Result(c.astype(np.float64), problem.iterations, {"iterate": 1e-3}, labels=labels,
                      trace=self.kept(trace) if problem.trace else None)

    def kept(self, trace):
        return trace


class TraceOneShort(Traced):
    name = "trace-one-short"

    def kept(self, trace):
        return trace[:-1]


def test_a_trace_made_as_the_warm_up_is_certified_without_running_the_row_again():
    data = three_blobs()
    problem = Problem(data, data[[0, 60, 120]].copy(), 3, warmup=0, repeats=1)
    row = Traced()
    traced, timed = row.run(replace(problem, trace=True)), row.run(problem)
    row.runs = 0
    certificate = trajectory.certify(row, problem, [timed], "float32", traced=traced)
    assert certificate.certified and certificate.source == "trace" and certificate.steps == 3
    assert row.runs == 0


def test_a_trace_of_the_wrong_length_is_refused_with_both_counts():
    data = three_blobs()
    problem = Problem(data, data[[0, 60, 120]].copy(), 3, warmup=0, repeats=1)
    row = TraceOneShort()
    with pytest.raises(ValueError, match=r"^the row's trace has 2 steps for 3 iterations$"):
        trajectory.certify(row, problem, [row.run(problem)], "float32")


RECORD_FIELDS = {"precision", "source", "steps", "failure", "parted_at", "near_ties", "ties_as_float64",
                 "ties_other_way", "labels_known", "inadmissible", "fixed_point", "nondeterministic", "unbounded",
                 "undecided"}


def test_a_certificates_record_holds_every_finding_under_its_own_name():
    """Reports and re-judging read the record by these names."""
    data = three_blobs()
    problem = Problem(data, data[[0, 1, 60]].copy(), 3, warmup=0, repeats=1)
    row = PlainLloyd()
    certificate = trajectory.certify(row, problem, [row.run(problem)], "float32")
    record = certificate.as_dict()
    assert set(record) == RECORD_FIELDS
    assert all(record[name] == getattr(certificate, name) for name in RECORD_FIELDS)
    assert (record["precision"], record["source"], record["steps"], record["labels_known"]) == ("float32", "stepped",
                                                                                                3, 3)


def test_a_trace_shorter_than_the_longest_timed_run_fails_at_the_first_step_it_lacks():
    data = three_blobs()
    problem = Problem(data, data[[0, 60, 120]].copy(), 3, warmup=0, repeats=1)
    row = Traced()
    traced = row.run(replace(problem, iterations=2, trace=True))  # a trace run that stopped one early
    failure = trajectory.certify(row, problem, [row.run(problem)], "float32", traced=traced).failure
    assert failure.as_dict() == {"iteration": 3, "check": "iterations", "where": "", "amount": 0.0, "allowance": 0.0,
                                 "text": "the validation run gave 2 steps of 3"}


def test_a_trace_longer_than_the_timed_runs_is_certified_as_far_as_they_went():
    data = three_blobs()
    problem = Problem(data, data[[0, 1, 60]].copy(), 3, warmup=0, repeats=1)
    row = Traced()
    traced = row.run(replace(problem, iterations=5, trace=True))
    certificate = trajectory.certify(row, problem, [row.run(problem)], "float32", traced=traced)
    assert certificate.certified and certificate.steps == 3


def test_a_timed_run_that_claims_no_iteration_fails_before_the_row_is_run_again():
    data = three_blobs()
    problem = Problem(data, data[[0, 60, 120]].copy(), 3, warmup=0, repeats=1)
    row = Recorded()
    claims_none = replace(row.run(problem), iterations=0)
    row.asked.clear()
    certificate = trajectory.certify(row, problem, [claims_none], "float32")
    assert certificate.failure.as_dict() == {"iteration": 0, "check": "iterations", "where": "", "amount": 0.0,
                                             "allowance": 0.0, "text": "a timed run claims no iteration at all"}
    assert certificate.steps == 0 and row.asked == []
