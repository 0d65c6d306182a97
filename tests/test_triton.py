"""triton-fused (impls/gpu/triton_fused). Without a GPU: the tiling rules and
what `available` says when a library is missing. With a GPU (make test-gpu): agreement with
the oracle in every kernel path (broadcast or tl.dot distances; per-program or per-point
sums), with and without the CUDA graph, both stop rules, data far from the origin, an empty
cluster, and partial last blocks."""

import sys

import numpy as np
import pytest

from impls.gpu.triton_fused import BROADCAST_ELEMENTS, LOW_D_MAX, TritonFused, tiling
from tests.conftest import gpu_cell


def _is_pow2(value):
    return value > 0 and value & (value - 1) == 0


@pytest.mark.parametrize("d", [1, 2, 3, 5, 8, 9, 16, 33, 408])
@pytest.mark.parametrize("k", [1, 3, 32, 33, 1000, 5000])
def test_tiling_shapes_are_legal_for_triton(d, k):
    shape = tiling(d, k)
    for name in ("DIM_PAD", "BLOCK_N", "BLOCK_K", "BLOCK_D"):
        assert _is_pow2(shape[name]), (name, shape)  # tl.arange takes powers of two
    assert shape["LOW_D"] == (d <= LOW_D_MAX)
    if shape["LOW_D"]:
        assert shape["DIM_PAD"] >= d and shape["BLOCK_D"] == shape["DIM_PAD"]
        assert shape["BLOCK_N"] * shape["BLOCK_K"] * shape["DIM_PAD"] <= BROADCAST_ELEMENTS
    else:  # tl.dot needs every side of 16 or more
        assert min(shape["BLOCK_N"], shape["BLOCK_K"], shape["BLOCK_D"]) >= 16
    # Sums stay in a program only where one tile holds every centroid (and x is in registers).
    assert shape["SUMS_IN_PROGRAM"] == (shape["LOW_D"] and k <= shape["BLOCK_K"])


def test_missing_triton_or_torch_is_explained(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)
    usable, reason = TritonFused().available()
    assert not usable
    assert "pip install" in reason and ("triton" in reason or "torch" in reason)


# ------------------------------------------------------------------ on a GPU


def _blobs(n, d, centers=8, seed=0, offset=0.0, std=1.0):
    rng = np.random.default_rng(seed)
    middle = rng.uniform(-10, 10, (centers, d))
    return (middle[rng.integers(0, centers, n)] + std * rng.standard_normal((n, d)) + offset).astype(np.float32)


def _triton():
    pytest.importorskip("triton")
    return TritonFused()


@pytest.mark.gpu
@pytest.mark.parametrize("d, k", [(1, 3), (2, 5), (2, 32), (2, 300), (3, 7), (8, 40), (9, 5), (16, 200),
                                  (64, 10), (408, 130)])
def test_agrees_with_the_oracle_in_every_path(d, k):
    n = 20_011 if d <= 64 else 6_007  # not a multiple of any block: partial last blocks
    _, record = gpu_cell(_triton(), _blobs(n, d, centers=k, std=0.05), k, 10)
    assert record["status"] == "ok", (record["build"], record.get("detail"))
    assert record["build"]["sums_in_program"] == tiling(d, k)["SUMS_IN_PROGRAM"]


@pytest.mark.gpu
@pytest.mark.parametrize("graph", ["1", "0"])
def test_with_and_without_the_graph(graph, monkeypatch):
    monkeypatch.setenv("KMBENCH_CUDA_GRAPH", graph)
    _, record = gpu_cell(_triton(), _blobs(50_003, 3), 6, 10, repeats=2)
    assert record["status"] == "ok", record.get("detail")
    assert record["build"]["launch"] == ("cuda graph" if graph == "1" else "stream")


@pytest.mark.gpu
@pytest.mark.parametrize("tol", [0.0, 0.001])
@pytest.mark.parametrize("k, centers, std", [(8, 20, 1.0), (100, 100, 0.05)])  # sums in program, atomics
def test_tolerance_stop_agrees_on_iterations(tol, k, centers, std):
    # Well posed: 100 centroids on 20 unit blobs drift apart in float32 (kmbench-gpu and torch too).
    oracle, record = gpu_cell(_triton(), _blobs(200_000, 2, centers=centers, std=std), k, 50, tol=tol)
    assert record["status"] == "ok", record.get("detail")
    assert record["iterations_executed"] == oracle.iterations


@pytest.mark.gpu
@pytest.mark.parametrize("k", [5, 100])
def test_data_far_from_the_origin(k):
    """Unit-spread data at 1e6, where raw float32 sums and the unshifted expansion fail."""
    _, record = gpu_cell(_triton(), _blobs(1_000_000, 2, centers=5, offset=1e6) / 10 + 9e5, k, 10)
    assert record["status"] == "ok", record.get("detail")


@pytest.mark.gpu
def test_an_empty_cluster_keeps_its_centroid():
    from dataclasses import replace

    from kmbench.protocol import runner, validate
    from kmbench.data.datasets import Dataset

    data = _blobs(10_007, 2, centers=4, std=0.1)
    dataset = Dataset("gpu", data, None, {"generator": "test"})
    settings = runner.Settings(k=5, iterations=5, warmup=1, repeats=1)
    problem = runner.make_problem(dataset, settings)
    far = problem.initial_centroids.copy()
    far[4] = 1e4  # nothing is ever nearest to it
    problem = replace(problem, initial_centroids=far)
    oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, 5)
    record = runner.run_cell(_triton(), problem, oracle, dataset, settings, "gpu")
    assert record["status"] == "ok", record.get("detail")


@pytest.mark.gpu
def test_one_hundred_million_points(tmp_path):
    from kmbench.data.datasets import radial

    data = np.asarray(radial(cluster_size=2_000_000, directory=tmp_path).data)
    _, record = gpu_cell(_triton(), data, 3, 3)
    assert record["status"] == "ok", record.get("detail")
    assert record["validation"]["centroid_error"] < 1e-5
