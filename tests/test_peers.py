"""The CPU peers users pick, forced into the protocol: faiss-cpu and scikit-learn-intelex
(installed by `make test` through the dev extra). Each must agree with the oracle from the
harness's start, say what it ran, and say why it is missing when it is."""

import sys
from dataclasses import replace

import numpy as np
import pytest

from impls.faiss_impl import FaissKMeans
from impls.sklearnex_impl import SklearnexKMeans, path_taken
from kmbench.protocol import runner, validate
from kmbench.data.datasets import Dataset


def _cell(impl, data, k, iterations=30, start=None):
    dataset = Dataset("peers", data, None, {"generator": "test"})
    settings = runner.Settings(k=k, iterations=iterations, warmup=1, repeats=2)
    problem = runner.make_problem(dataset, settings)
    if start is not None:
        problem = replace(problem, initial_centroids=start)
    oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, iterations)
    return runner.run_cell(impl, problem, oracle, dataset, settings, "cpu")


def _blobs(n=20_003, d=3, centers=6, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    middle = rng.uniform(-10, 10, (centers, d))
    return (middle[rng.integers(0, centers, n)] + 0.5 * rng.standard_normal((n, d))).astype(dtype)


@pytest.mark.parametrize("impl_type, module", [(FaissKMeans, "faiss"), (SklearnexKMeans, "sklearnex")])
def test_missing_library_says_how_to_get_it(impl_type, module, monkeypatch):
    monkeypatch.setitem(sys.modules, module, None)  # import now raises ImportError
    usable, reason = impl_type().available()
    assert not usable
    assert "pip install" in reason


def test_faiss_agrees_with_the_oracle_using_every_point():
    pytest.importorskip("faiss")
    # 20,003 points and 6 clusters: faiss's default would sample 256 per centroid.
    record = _cell(FaissKMeans(), _blobs(), 6)
    assert record["status"] == "ok", record.get("detail")
    assert record["iterations_executed"] == 30
    assert record["build"]["precision"] == "fp32"
    assert record["notes"] == []


def test_faiss_runs_every_iteration_asked_where_its_objective_stalls():
    """faiss 1.15 stopped this one after 66 of 100 (its objective-based early stop, on by
    default); the row would then be timed against rows that ran all 100."""
    pytest.importorskip("faiss")
    data = np.random.default_rng(0).standard_normal((5_000, 2)).astype(np.float32)
    record = _cell(FaissKMeans(), data, 20, iterations=100)
    assert record["iterations_executed"] == 100
    assert not any("stopped early" in warning for warning in record["warnings"])


def test_a_row_that_stops_early_says_so_alike_in_table_and_warning():
    from kmbench.report import formatting
    assert runner.iteration_warnings(21, 30, "own") == [
        "stopped early: ran 21 of 30 iterations; compare it per iteration"]
    assert runner.iteration_warnings(30, 30, "own") == []
    assert "given the reference's count, stopped early" in runner.iteration_warnings(21, 30, "reference count")[0]
    row = {"iters_executed": 21, "reference_iterations": 30, "iterations": 30, "stop_followed": "own"}
    assert formatting.iterations_text(row) == "21 of 30 (stopped early)"
    assert formatting.iterations_text({**row, "stop_followed": "reference count"}) == \
        "21 of 30 (reference's count; stopped early)"
    assert formatting.iterations_text({**row, "iters_executed": 30, "stop_followed": "reference count"}) == \
        "30 (reference's count)"


def test_faiss_records_the_empty_cluster_it_cannot_keep():
    pytest.importorskip("faiss")
    data = _blobs(n=5_000, d=2, centers=3)
    start = np.vstack([data[:2], [[1e4, 1e4]]]).astype(np.float32)  # the third starts empty
    record = _cell(FaissKMeans(), data, 3, iterations=5, start=start)
    assert any("splitting" in note for note in record["notes"]), record["notes"]
    assert record["status"] == "mismatch"  # the oracle keeps the empty cluster where it was


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sklearnex_agrees_with_the_oracle_and_says_it_ran_onedal(dtype):
    pytest.importorskip("sklearnex")
    record = _cell(SklearnexKMeans(), _blobs(dtype=dtype), 6)
    assert record["status"] == "ok", record.get("detail")
    assert record["build"]["ran"] == "oneDAL"
    assert 1 <= record["iterations_executed"] <= 30


def test_sklearnex_path_is_read_from_its_log():
    fit = "sklearn.cluster.KMeans.fit: "
    assert path_taken([fit + "running accelerated version on CPU"]) == "oneDAL"
    assert path_taken([fit + "fallback to original Scikit-learn"]) == "scikit-learn fallback"
    assert path_taken([]).startswith("unknown")
