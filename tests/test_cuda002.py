"""cuda-002 (document 002's design, double precision, convergence flag)."""

import numpy as np
import pytest

from impls.gpu.cuda import cuda_status
from impls.gpu.cuda.doc002 import SHARED_MAX_K, Cuda002
from kmbench.protocol import runner
from kmbench.data.datasets import Dataset, radial
from kmbench.errors import ImplementationError
from tests.conftest import gpu_cell


def _problem(n=60, d=2, k=3):
    data = np.random.default_rng(0).standard_normal((n, d))
    return runner.make_problem(Dataset("t", data, None, {}), runner.Settings(k=k, iterations=2))


def test_limits_are_refused_before_launch():
    with pytest.raises(ImplementationError, match="d = 2"):
        Cuda002().check(_problem(d=3))
    with pytest.raises(ImplementationError, match="multiple of 32"):
        Cuda002(block_size=100).check(_problem())


@pytest.mark.skipif(cuda_status()[0], reason="a GPU is present: the row is not skipped here")
def test_without_gpu_the_row_is_skipped_with_a_reason():
    problem = _problem()
    record = runner.run_cell(Cuda002(), problem, None, Dataset("t", problem.data, None, {}),
                             runner.Settings(k=3, iterations=2), "t")
    assert record["status"] == "skipped" and record["detail"] == cuda_status()[1]


def _cell(impl, data, k, iterations=20, tol=None):
    return gpu_cell(impl, data, k, iterations, tol)


def _radial(cluster_size, dtype="float64", tmp=None):
    return np.asarray(radial(cluster_size=cluster_size, dtype=dtype, directory=tmp).data)


@pytest.mark.gpu
@pytest.mark.parametrize("k", [1, 3, 31, 33, 1000, SHARED_MAX_K + 1, 2500])
@pytest.mark.parametrize("block", [32, 256, 1024])
def test_agrees_with_the_oracle_for_any_k_and_block(k, block, tmp_path):
    data = _radial(200, tmp=tmp_path)  # 10,000 points
    _, record = _cell(Cuda002(block_size=block), data, k, iterations=8)
    assert record["status"] == "ok", record.get("detail")
    assert record["build"]["accumulate"] == ("shared" if k <= SHARED_MAX_K else "global")


@pytest.mark.gpu
@pytest.mark.parametrize("tol", [0.0, 0.001])
def test_stops_when_the_oracle_does(tol, tmp_path):
    data = _radial(20000, tmp=tmp_path)  # document 002's 1M points
    oracle, record = _cell(Cuda002(), data, 30, iterations=30, tol=tol)
    assert record["status"] == "ok", record.get("detail")
    assert record["stop"]["followed"] == "own"
    assert record["iterations_executed"] == oracle.iterations


@pytest.mark.gpu
def test_partial_last_block_and_float32_data(tmp_path):
    data = np.random.default_rng(2).standard_normal((100_003, 2)).astype(np.float32)
    _, record = _cell(Cuda002(), data, 7, iterations=10)
    assert record["status"] == "ok", record.get("detail")
