import numpy as np
import pytest

from kmbench.protocol import validate
from kmbench.protocol import Implementation, Result
from kmbench.protocol.runner import Settings, run_cell, make_problem
from kmbench.data.datasets import Dataset
from impls.cpu.numpy_fast import NumpyFast
from tests.conftest import blob_data, gpu_cell


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


class ExpandedFloat32(Implementation):
    """Lloyd as a careless float32 program writes it: |x|^2 - 2 x.c + |c|^2 on the raw data."""

    name = "expanded-float32"

    def run(self, problem):
        x = np.asarray(problem.data, dtype=np.float32)
        centroids = problem.initial_centroids.astype(np.float32)
        for _ in range(problem.iterations):
            scores = (x * x).sum(1)[:, None] - 2 * x @ centroids.T + (centroids * centroids).sum(1)[None]
            labels = scores.argmin(1)
            for j in range(problem.k):
                if (labels == j).any():
                    centroids[j] = x[labels == j].astype(np.float64).mean(0)
        return Result(centroids.astype(np.float64), problem.iterations, {"iterate": 0.001})


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


def _measured(impl, data, k, iterations, repeats=1):
    dataset = Dataset("unit", data, None, {"generator": "test"})
    settings = Settings(k=k, iterations=iterations, warmup=0, repeats=repeats)
    problem = make_problem(dataset, settings)
    oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, iterations)
    return run_cell(impl, problem, oracle, dataset, settings, "t")


def test_correct_implementation_is_ok():
    record = _cell(NumpyFast())
    assert record["status"] == "ok", record.get("detail")
    assert record["validation"]["centroid_error"] < 1e-5
    certificate = record["validation"]["certificate"]
    assert certificate["steps"] == 20 and certificate["failure"] is None
    assert "20 steps certified in float32" in record["detail"]


def test_validator_flags_a_missed_point_and_names_the_step():
    record = _cell(SkipsLastPoint())
    assert record["status"] == "mismatch"
    failure = record["validation"]["certificate"]["failure"]
    assert failure["iteration"] == 1 and failure["check"] == "means"
    assert "iteration 1, means, centroid" in record["detail"]


def test_validator_flags_a_missing_iteration():
    rng = np.random.default_rng(3)
    data = rng.uniform(0, 1, size=(500, 2)).astype(np.float32)  # slow to converge: moves each step
    assert _measured(OneIterationShort(), data, 8, 3)["status"] == "mismatch"


@pytest.mark.parametrize("bad", [np.full((5, 2), np.nan), np.zeros((4, 2))])
def test_nan_or_wrong_shape_is_a_mismatch(bad):
    data = np.random.default_rng(0).standard_normal((100, 2))
    oracle = validate.Oracle.compute(data, data[:5], 3)
    assert validate.figures(bad, oracle, data).status == "mismatch"


def test_worst_shows_the_worst_repeat():
    good = validate.Verdict("ok", 1e-9, 1e-9)
    bad = validate.Verdict("mismatch", 1e-3, 1e-4, "wrong")
    approximate = validate.Verdict("approximate", 1e-2, 1e-2)
    assert validate.worst([good, bad, good]) is bad
    assert validate.worst([good, approximate]) is approximate
    assert validate.worst([approximate, validate.Verdict("error")]).status == "error"
    assert validate.worst([validate.Verdict("ok", 1e-9), validate.Verdict("ok", 1e-3)]).centroid_error == 1e-3


class WrongSecondRepeat(NumpyFast):
    """Correct in every validation run and in its first counted repeat; the second moves a centroid.
    It takes no thread count: no calibration runs (tests/test_threads.py) come before the counted."""

    name = "wrong-second-repeat"
    takes_threads = False

    def __init__(self):
        self.counted = 0

    def run(self, problem):
        result = super().run(problem)
        if problem.iterations > 1:
            self.counted += 1
            if self.counted == 2:
                result.centroids = result.centroids.copy()
                result.centroids[0] += 0.5
        return result


def test_one_wrong_counted_repeat_makes_the_cell_wrong():
    record = _measured(WrongSecondRepeat(), blob_data(np.random.default_rng(2), n=600, k=3), 3, 5, repeats=3)
    assert record["status"] == "mismatch", record["detail"]
    assert "timed run 2" in record["detail"]


def test_centroid_error_means_the_same_wherever_the_data_sit():
    near = _far_unit_spread(offset=0.0)
    far = near + 1e6
    errors = []
    for data in (near, far):
        oracle = validate.Oracle.compute(data, data[:4], 10)
        errors.append(validate.centroid_error(oracle.centroids + [0.5, 0.0], oracle))
    assert errors[0] == pytest.approx(errors[1], rel=1e-6)


def _far_unit_spread(n=4000, offset=1e6, dtype=np.float64, seed=5):
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-1, 1, (4, 2))
    return (centers[rng.integers(0, 4, n)] + 0.3 * rng.standard_normal((n, 2)) + offset).astype(dtype)


def test_zero_reference_inertia_is_not_a_false_mismatch():
    """n = k: every point its own cluster, reference inertia 0."""
    data = np.random.default_rng(9).standard_normal((6, 2)).astype(np.float32)
    oracle, record = gpu_cell(NumpyFast(), data, 6, 3, start=data.copy())
    assert oracle.inertia == 0.0
    assert record["status"] == "ok", record["detail"]
    assert record["validation"]["inertia_difference"] == 0.0


def test_a_row_that_moves_empty_clusters_says_so_and_its_mismatch_names_it():
    from impls.peers.sklearn_kmeans import SklearnKMeans

    data = blob_data(np.random.default_rng(3), n=3000, k=3)
    start = np.vstack([data[:2], [[1e3, 1e3]]]).astype(np.float32)  # the third is empty from the start
    oracle, record = gpu_cell(SklearnKMeans(), data, 3, 3, start=start)
    assert oracle.emptied == 1
    assert any("moves an empty cluster" in note for note in record["notes"])
    assert record["status"] == "mismatch"
    assert "iteration 1, empty cluster, centroid 2" in record["detail"]
    assert "Likely cause: the reference left 1 cluster(s) empty" in record["detail"]


def test_a_mismatch_without_a_known_cause_says_so():
    data = _far_unit_spread(offset=0.0, dtype=np.float32)
    oracle, record = gpu_cell(SkipsLastPoint(), np.vstack([data, [[80.0, 80.0]]]).astype(np.float32), 4, 10)
    assert record["status"] == "mismatch"
    assert "Likely cause: no known cause" in record["detail"]


def test_dense_ties_far_from_the_origin_are_certified():
    """Dense data far from the origin, k = 500: nearly every decision is a float32 near-tie and
    faiss's float32 sums carry its centroids away from float64's end point (hundreds of spreads
    at 12 iterations); every step is still a float32 Lloyd step, which is what the verdict says."""
    pytest.importorskip("faiss")
    from impls.peers.faiss_kmeans import FaissKMeans

    data = (np.random.default_rng(1).standard_normal((5_000, 2)) + 100.0).astype(np.float32)
    oracle, record = gpu_cell(FaissKMeans(), data, 500, 12)
    assert record["status"] == "ok", record["detail"]
    assert record["validation"]["certificate"]["near_ties"] > 0


def test_an_expanded_float32_row_far_from_the_origin_is_certified_not_blamed():
    """|x|^2 - 2 x.c + |c|^2 on raw float32 coordinates near 1e4 loses digits, but it is the
    float32 arithmetic it declares: rounding the judge's bound admits, not a wrong program."""
    data = _far_unit_spread(offset=1e4, dtype=np.float32)
    _, record = gpu_cell(ExpandedFloat32(), data, 4, 10)
    assert record["status"] == "ok", record["detail"]


def test_a_row_that_traces_is_certified_from_its_trace():
    record = _cell(NumpyFast())
    assert record["validation"]["certificate"]["source"] == "trace"
    assert record["validation"]["certificate"]["labels_known"] == 1  # the last step's labels


class TraceSkipsAStep(NumpyFast):
    """Its trace leaves out the first iteration: the second is then no step from the start."""

    name = "trace-skips-a-step"

    def run(self, problem):
        result = super().run(problem)
        if result.trace:
            result.trace = result.trace[1:] + [result.trace[-1]]
        return result


def test_a_trace_that_skips_a_step_is_caught():
    record = _cell(TraceSkipsAStep())
    assert record["status"] == "mismatch"
    assert record["validation"]["certificate"]["failure"]["iteration"] == 1
