"""The assign task (document 001): the oracle's labels, the float32-tie allowance, the
changed flag, and a wrong kernel flagged."""

import numpy as np

from impls.cpu.assign_numpy import AssignNumpy
from kmbench.tasks.assign import AssignOracle, AssignProblem, AssignResult, judge


def _problem(n=1 << 14, d=1, k=16, seed=0):
    rng = np.random.default_rng(seed)
    data = rng.uniform(-10, 10, (n, d)).astype(np.float32)
    centroids = data[rng.choice(n, k, replace=False)]
    return AssignProblem(data, centroids, np.full(n, -1))


def test_numpy_assign_agrees_for_several_dimensions():
    for d in (1, 2, 8):
        problem = _problem(d=d)
        oracle = AssignOracle.compute(problem)
        result = AssignNumpy().run(problem)
        assert judge(result, oracle) == ("ok", ""), d
        assert oracle.changed and result.changed  # from -1, every label changes


def test_changed_flag_is_checked():
    problem = _problem()
    oracle = AssignOracle.compute(problem)
    same = AssignProblem(problem.data, problem.centroids, oracle.labels)
    unchanged = AssignOracle.compute(same)
    assert not unchanged.changed
    assert judge(AssignResult(oracle.labels.copy(), True), unchanged)[0] == "mismatch"  # no atomic flag bug hides
    assert judge(AssignResult(oracle.labels.copy(), False), unchanged) == ("ok", "")


def test_a_tie_may_go_to_its_other_nearest_only():
    data = np.array([[0.0], [1.0], [2.0]], dtype=np.float32)
    centroids = np.array([[0.5], [1.5], [9.0]], dtype=np.float32)  # point 1.0 is exactly between
    problem = AssignProblem(data, centroids, np.full(3, -1))
    oracle = AssignOracle.compute(problem)
    assert oracle.labels[1] == 0 and oracle.tie[1]  # the lower index wins the exact tie
    flipped = oracle.labels.copy()
    flipped[1] = 1
    assert judge(AssignResult(flipped, True), oracle) == ("ok", "")
    flipped[1] = 2
    assert judge(AssignResult(flipped, True), oracle)[0] == "mismatch"


def test_a_wrong_kernel_is_flagged():
    """The published ladder's risk: a kernel that skips the last cluster of a partial tile."""
    problem = _problem(k=17)
    oracle = AssignOracle.compute(problem)
    data, centroids = problem.data.astype(np.float64), problem.centroids[:-1].astype(np.float64)
    wrong = ((data[:, None, :] - centroids[None]) ** 2).sum(-1).argmin(1)
    status, detail = judge(AssignResult(wrong, True), oracle)
    assert status == "mismatch" and "not the nearest centroid" in detail
