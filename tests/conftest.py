import os

import numpy as np
import pytest


def _gpu_reason() -> str | None:
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device visible to CuPy"
    except ImportError:
        return "CuPy is not installed (install kmbench[cuda12] or kmbench[cuda13])"
    except Exception as exc:
        return f"no usable CUDA device ({exc.__class__.__name__}: {exc})"
    return None


def pytest_collection_modifyitems(config, items):
    reason = _gpu_reason()
    if reason is None:
        return
    if os.environ.get("KMBENCH_REQUIRE_GPU") == "1":  # `make test-gpu`: a skip would hide a failure
        raise pytest.UsageError(f"GPU tests asked for, but {reason}")
    skip = pytest.mark.skip(reason=f"GPU test: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def isolated_paths(tmp_path, monkeypatch):
    """Every test gets its own dataset cache and record store, never the repository's."""
    monkeypatch.setenv("KMBENCH_DATA", str(tmp_path / "datasets"))
    monkeypatch.setenv("KMBENCH_RESULTS", str(tmp_path / "results" / "records.jsonl"))
    (tmp_path / "results").mkdir()  # as in a checkout: a store in a folder that exists, no warning to say
    return tmp_path


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def blob_data(rng, n=2000, d=2, k=5, dtype=np.float32):
    centers = rng.uniform(-10, 10, size=(k, d))
    labels = rng.integers(0, k, size=n)
    return (centers[labels] + rng.standard_normal((n, d))).astype(dtype)


def memory_problem(data, k, iterations, tol=None, repeats=1, start=None, warmup=1):
    """The dataset, settings and problem of one cell on in-memory data, as a run makes them
    (`start`: initial centroids instead of the harness's)."""
    from dataclasses import replace

    from kmbench.data.datasets import Dataset
    from kmbench.protocol import runner

    dataset = Dataset("gpu", data, None, {"generator": "test"})
    settings = runner.Settings(k=k, iterations=iterations, warmup=warmup, repeats=repeats,
                               stop="iterations" if tol is None else "tolerance", tol=tol or 0.0)
    problem = runner.make_problem(dataset, settings)
    if start is not None:
        problem = replace(problem, initial_centroids=start)
    return dataset, settings, problem


def gpu_cell(impl, data, k, iterations, tol=None, repeats=1, start=None):
    """One validated cell on in-memory data: the oracle and the record, as a run makes them
    (any implementation, GPU or not; `start`: initial centroids instead of the harness's)."""
    from kmbench.protocol import runner, validate

    dataset, settings, problem = memory_problem(data, k, iterations, tol=tol, repeats=repeats, start=start)
    oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, iterations, tol=problem.tol)
    return oracle, runner.run_cell(impl, problem, oracle, dataset, settings, "gpu")
