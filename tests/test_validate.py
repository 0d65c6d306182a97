import numpy as np
import pytest

from kmbench import validate
from kmbench.protocol import Implementation, Result
from kmbench.runner import Settings, run_cell, make_problem
from kmbench.datasets import Dataset
from impls.numpy_fast import NumpyFast
from tests.conftest import blob_data


class SkipsLastPoint(Implementation):
    """A deliberately wrong Lloyd: the last point never reaches its cluster's mean."""

    name = "wrong-last-point"

    def run(self, problem):
        data = problem.data[:-1].astype(np.float64)
        centroids = problem.initial_centroids.astype(np.float64).copy()
        for _ in range(problem.iterations):
            labels = ((data[:, None, :] - centroids[None]) ** 2).sum(-1).argmin(1)
            for j in range(problem.k):
                if (labels == j).any():
                    centroids[j] = data[labels == j].mean(0)
        return Result(centroids, problem.iterations, {"iterate": 0.001})


class OneIterationShort(NumpyFast):
    name = "one-short"

    def run(self, problem):
        from dataclasses import replace

        return super().run(replace(problem, iterations=problem.iterations - 1))


def _cell(impl, n=400, iterations=20):
    rng = np.random.default_rng(7)
    data = blob_data(rng, n=n, k=5)
    # A point far out, so leaving it out moves its centroid measurably.
    data[-1] = [60.0, 60.0]
    dataset = Dataset("unit", data, None, {"generator": "test"})
    settings = Settings(k=5, iterations=iterations, warmup=0, repeats=1)
    problem = make_problem(dataset, settings)
    oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, iterations)
    return run_cell(impl, problem, oracle, dataset, settings, "t")


def test_correct_implementation_is_ok():
    record = _cell(NumpyFast())
    assert record["status"] == "ok", record.get("detail")
    assert record["validation"]["centroid_error"] < 1e-5


def test_validator_flags_a_missed_point():
    record = _cell(SkipsLastPoint())
    assert record["status"] == "mismatch"
    assert "centroid error" in record["detail"]


def test_validator_flags_a_missing_iteration():
    rng = np.random.default_rng(3)
    data = rng.uniform(0, 1, size=(500, 2)).astype(np.float32)  # slow to converge: moves each step
    dataset = Dataset("uniform", data, None, {"generator": "test"})
    settings = Settings(k=8, iterations=3, warmup=0, repeats=1)
    problem = make_problem(dataset, settings)
    oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, 3)
    record = run_cell(OneIterationShort(), problem, oracle, dataset, settings, "t")
    assert record["status"] == "mismatch"


@pytest.mark.parametrize("bad", [np.full((5, 2), np.nan), np.zeros((4, 2))])
def test_nan_or_wrong_shape_is_a_mismatch(bad):
    data = np.random.default_rng(0).standard_normal((100, 2))
    oracle = validate.Oracle.compute(data, data[:5], 3)
    verdict = validate.judge(bad, oracle, data, "float64")
    assert verdict.status == "mismatch"


def test_float64_tolerance_is_tighter_than_float32():
    data = np.random.default_rng(1).standard_normal((300, 2)) + 5
    oracle = validate.Oracle.compute(data, data[:3], 5)
    nudged = oracle.centroids * (1 + 1e-5)
    assert validate.judge(nudged, oracle, data, "float32").status == "ok"
    assert validate.judge(nudged, oracle, data, "float64").status == "mismatch"


def test_tolerance_widens_only_for_problems_that_amplify_float32_rounding():
    rng = np.random.default_rng(8)
    calm = blob_data(rng, n=3000, k=3)
    calm_oracle = validate.Oracle.compute(calm, calm[:3], 30)
    assert calm_oracle.tolerances("float32")[0] == validate.TOLERANCES["float32"][0]
    # 100 centroids on a uniform square converge slowly: an honest float32 run drifts.
    rng = np.random.default_rng(2)
    crowded = (rng.uniform(-1, 1, (20000, 2)) + 5).astype(np.float32)
    start = crowded[rng.choice(len(crowded), 100, replace=False)]
    oracle = validate.Oracle.compute(crowded, start, 200)
    assert validate.SENSITIVITY_FACTOR * oracle.sensitivity > validate.TOLERANCES["float32"][0]
    tol_c, tol_i = oracle.tolerances("float32")
    assert tol_c == max(validate.TOLERANCES["float32"][0], validate.SENSITIVITY_FACTOR * oracle.sensitivity)
    assert tol_i == validate.TOLERANCES["float32"][1]  # the inertia check never loosens
    assert oracle.tolerances("float64") == validate.TOLERANCES["float64"]
