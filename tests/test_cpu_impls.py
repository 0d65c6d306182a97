"""Every CPU implementation agrees with the float64 oracle from the harness's start."""

import numpy as np
import pytest

from kmbench import registry
from kmbench.protocol import runner, validate
from kmbench.data.datasets import Dataset
from tests.conftest import blob_data

CPU = ["numpy-blog", "numpy", "sklearn", "scipy"]


def _check(name, data, k, iterations, start=None):
    impl = registry.discover()[name]
    dataset = Dataset("unit", data, None, {"generator": "test"})
    settings = runner.Settings(k=k, iterations=iterations, warmup=0, repeats=1)
    problem = runner.make_problem(dataset, settings)
    if start is not None:
        from dataclasses import replace

        problem = replace(problem, initial_centroids=start.astype(data.dtype))
    oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, iterations)
    return runner.run_cell(impl, problem, oracle, dataset, settings, "t")


@pytest.mark.parametrize("name", CPU)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_agrees_with_reference(name, dtype):
    data = blob_data(np.random.default_rng(21), n=3000, d=3, k=6, dtype=dtype)
    record = _check(name, data, k=6, iterations=30)
    assert record["status"] == "ok", record.get("detail")


@pytest.mark.parametrize("name", ["numpy-blog", "numpy", "scipy"])
def test_empty_cluster_keeps_previous_centroid(name):
    data = blob_data(np.random.default_rng(4), n=500, d=2, k=3)
    start = np.vstack([data[:3], [[500.0, 500.0]]])  # the far centroid never gets a point
    record = _check(name, data, k=4, iterations=10, start=start)
    assert record["status"] == "ok", record.get("detail")


def test_blog_counting_defect_is_fixed():
    """Points with a zero coordinate must still count (the published `sparse != 0` bug)."""
    data = np.array([[0.0, 1.0], [2.0, 3.0], [10.0, 0.0], [12.0, 5.0]], dtype=np.float64)
    record = _check("numpy-blog", data, k=2, iterations=3, start=data[[0, 2]])
    assert record["status"] == "ok", record.get("detail")


def test_numpy_says_whether_an_iteration_left_a_cluster_empty():
    """kmbench.KMeans takes such a step again with scikit-learn's relocation (issue 51)."""
    from tests.conftest import memory_problem

    data = blob_data(np.random.default_rng(4), n=500, d=2, k=3)
    impl = registry.find(["numpy"])["numpy"]
    for start, emptied in ((np.vstack([data[:2], [[500.0, 500.0]]]), True), (data[:3], False)):
        _, _, problem = memory_problem(data, 3, 5, start=start.astype(data.dtype), warmup=0)
        assert impl.run(problem).emptied is emptied
