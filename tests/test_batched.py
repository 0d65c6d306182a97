"""The batched task (document 003): seeding, the oracle, the validator, and the vectorised
NumPy implementation; a wrong kernel is flagged."""

import numpy as np
import pytest

from impls.cpu.batched_numpy import BatchedNumpy
from kmbench.tasks import batched


def _problem(rows=40, points=100, d=1, k=3, seeds=8, iterations=100, epsilon=1e-3, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-10, 10, (rows, k, d))
    data = centres[np.arange(rows)[:, None], rng.integers(0, k, (rows, points))] + rng.standard_normal((rows, points, d))
    start = batched.initial_centroids(data, k, seeds, seed=7)
    return batched.BatchedProblem(data.astype(np.float32), start.astype(np.float32), iterations, epsilon)


def test_seeding_draws_distinct_sorted_points_of_each_row():
    problem = _problem(rows=5, points=20, d=2, k=4, seeds=6)
    starts = problem.initial_centroids
    assert starts.shape == (5, 6, 4, 2)
    for row in range(5):
        rows_points = {tuple(p) for p in problem.data[row]}
        for seed in range(6):
            chosen = [tuple(c) for c in starts[row, seed]]
            assert len(set(chosen)) == 4 and set(chosen) <= rows_points
            assert list(starts[row, seed, :, 0]) == sorted(starts[row, seed, :, 0])
    again = batched.initial_centroids(problem.data, 4, 6, seed=7)
    np.testing.assert_array_equal(again, starts)
    with pytest.raises(ValueError, match="larger than the points per row"):
        batched.initial_centroids(problem.data, 21, 2, seed=0)


def test_yard_stick_is_the_smallest_gap():
    assert batched.yard_stick(np.array([[0.0], [5.0], [5.5], [9.0]])) == pytest.approx(0.5)


@pytest.mark.parametrize("epsilon", [None, 1e-3])
@pytest.mark.parametrize("d", [1, 2])
def test_numpy_agrees_with_the_oracle(epsilon, d):
    problem = _problem(d=d, epsilon=epsilon, iterations=100 if epsilon else 12)
    oracle = batched.BatchedOracle.compute(problem)
    result = BatchedNumpy().run(problem)
    assert batched.judge(result, oracle, "float64") == ("ok", "")
    np.testing.assert_array_equal(result.iterations[oracle.rows], oracle.iterations)
    if epsilon is None:
        assert (result.iterations == 12).all()
    else:
        assert (result.iterations < 100).all()  # every seed converged by the document's rule


class WorstSeed(BatchedNumpy):
    """A wrong kernel: keeps the seed with the largest inertia."""

    def run(self, problem):
        result = super().run(problem)
        single = [BatchedNumpy().run(batched.BatchedProblem(problem.data, problem.initial_centroids[:, [s]],
                                                            problem.iterations, problem.epsilon))
                  for s in range(problem.seeds)]
        inertia = np.stack([r.inertia for r in single], axis=1)
        result.inertia = inertia.max(axis=1)
        return result


def test_validator_flags_a_wrong_kernel():
    problem = _problem(seeds=6)
    oracle = batched.BatchedOracle.compute(problem)
    status, detail = batched.judge(WorstSeed().run(problem), oracle)
    assert status == "mismatch" and "checked rows differ in best inertia" in detail


def test_oracle_checks_a_sample_of_many_rows():
    problem = _problem(rows=50, seeds=2)
    oracle = batched.BatchedOracle.compute(problem, max_rows=10)
    assert len(oracle.rows) == 10 and len(set(oracle.rows)) == 10
    assert batched.judge(BatchedNumpy().run(problem), oracle)[0] == "ok"


def test_sklearn_loop_agrees_and_a_time_budget_is_extrapolated_and_said():
    from impls.peers.batched_sklearn import BatchedSklearn

    problem = _problem(rows=12, seeds=4, epsilon=None, iterations=30)
    oracle = batched.BatchedOracle.compute(problem)
    full = BatchedSklearn().run(problem)
    assert full.rows_done is None and full.extrapolated_seconds is None
    # scikit-learn stops at strict convergence; the best inertia per row is the same fixed point
    assert batched.judge(full, oracle, "float64")[0] == "ok"
    budgeted = BatchedSklearn(budget_s=0.0)
    cut = budgeted.run(problem)
    assert cut.rows_done == 1 and np.isnan(cut.inertia[1:]).all() and np.isfinite(cut.inertia[0])
    spent = budgeted.phases["iterate"]  # the time of the one row it computed
    assert cut.extrapolated_seconds == pytest.approx(spent * 12)
    assert batched.judge(cut, oracle, "float64")[0] == "ok"  # judged on the rows it computed
