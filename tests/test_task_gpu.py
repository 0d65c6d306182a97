"""The assign ladder and the batched GPU rows against the float64 oracles (make test-gpu):
every step for d in {1, 2, 8}, with n not a multiple of a block or of four, the changed flag
both ways; the batched kernels for both stop rules, d = 1 and 2, a partial warp of seeds,
rows of many points, and data far from the origin for kmbench's own."""

from dataclasses import replace

import numpy as np
import pytest

from impls.gpu.assign_ladder import LADDER, AssignFastest
from impls.gpu.batched import BatchedCudaC, BatchedKmbench, BatchedNumba
from kmbench.tasks import assign, batched, tasks

pytestmark = pytest.mark.gpu


def _solve(impl, problem):
    """Set up, run once, release: the result of one GPU row on one problem."""
    impl.prepare(problem)
    try:
        return impl.run(problem)
    finally:
        impl.release()


@pytest.mark.parametrize("d", [1, 2, 8])
@pytest.mark.parametrize("step", LADDER, ids=lambda cls: cls.name)
def test_every_step_of_the_ladder_agrees_with_the_oracle(step, d):
    problem = tasks.assign_problem(n=100_003, d=d, k=16, seed=d)
    oracle = assign.AssignOracle.compute(problem)
    assert assign.judge(_solve(step(), problem), oracle) == ("ok", "")
    settled = replace(problem, previous=oracle.labels)  # nothing changes: the flag must say so
    result = _solve(step(), settled)
    assert result.changed is False and assign.judge(result, assign.AssignOracle.compute(settled)) == ("ok", "")


@pytest.mark.parametrize("k", [1, 5, 64])
def test_the_fastest_pass_takes_other_k(k):
    problem = tasks.assign_problem(n=4097, d=2, k=k, seed=k)
    assert assign.judge(_solve(AssignFastest(), problem), assign.AssignOracle.compute(problem)) == ("ok", "")


BATCHED = [BatchedCudaC, BatchedKmbench, BatchedNumba]


@pytest.mark.parametrize("stop", ["epsilon", "iterations"])
@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("row_kind", BATCHED, ids=lambda cls: cls.name)
def test_batched_rows_agree_with_the_oracle(row_kind, d, stop):
    problem = tasks.batched_problem(rows=501, points=100, d=d, k=3, seeds=32, stop=stop, iterations=100 if stop == "epsilon" else 7)
    oracle = batched.BatchedOracle.compute(problem, max_rows=200)
    result = _solve(row_kind(), problem)
    assert batched.judge(result, oracle) == ("ok", "")
    same = (result.iterations[oracle.rows] == oracle.iterations).mean()
    assert same > 0.99, f"only {same:.1%} of the seeds ran the oracle's iterations"
    best = result.best_seed[oracle.rows]
    assert ((0 <= best) & (best < 32)).all()


@pytest.mark.parametrize("row_kind", [BatchedCudaC, BatchedKmbench], ids=lambda cls: cls.name)
def test_batched_partial_warp_and_long_rows(row_kind):
    problem = tasks.batched_problem(rows=37, points=1000, d=1, k=3, seeds=7)
    oracle = batched.BatchedOracle.compute(problem)
    assert batched.judge(_solve(row_kind(), problem), oracle) == ("ok", "")


def test_kmbench_batched_far_from_the_origin():
    """Offsets from the old centroid are summed, so rows at 1e4 keep their precision."""
    problem = tasks.batched_problem(rows=200, points=100, d=1, k=3, seeds=32)
    far = batched.BatchedProblem(problem.data + np.float32(1e4), problem.initial_centroids + np.float32(1e4),
                                 problem.iterations, problem.epsilon)
    assert batched.judge(_solve(BatchedKmbench(), far), batched.BatchedOracle.compute(far)) == ("ok", "")
