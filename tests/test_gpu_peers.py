"""GPU peers (impls/gpu_peers.py): fast-pytorch-kmeans, validated on a GPU; cuML, whose
adapter cannot be run on kmbench's GPU machine and must say so."""

import sys

import numpy as np
import pytest

from impls.gpu_peers import CumlKMeans, FastPytorchKMeans
from kmbench import runner, validate
from kmbench.datasets import Dataset


def test_cuml_missing_says_it_is_untested_here(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuml", None)
    usable, reason = CumlKMeans().available()
    assert not usable
    assert "untested" in reason and "pip install" in reason


def test_fast_pytorch_kmeans_missing_says_how_to_get_it(monkeypatch):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA GPU: the library check comes after that one")
    monkeypatch.setitem(sys.modules, "fast_pytorch_kmeans", None)
    usable, reason = FastPytorchKMeans().available()
    assert not usable and "pip install fast-pytorch-kmeans" in reason


def _blobs(n=50_003, d=8, centers=10, seed=0):
    rng = np.random.default_rng(seed)
    middle = rng.uniform(-10, 10, (centers, d))
    return (middle[rng.integers(0, centers, n)] + 0.3 * rng.standard_normal((n, d))).astype(np.float32)


@pytest.mark.gpu
@pytest.mark.parametrize("impl_type, module", [(FastPytorchKMeans, "fast_pytorch_kmeans"),
                                               (CumlKMeans, "cuml")])
def test_gpu_peer_agrees_with_the_oracle(impl_type, module):
    pytest.importorskip(module)
    dataset = Dataset("peers", _blobs(), None, {"generator": "test"})
    settings = runner.Settings(k=10, iterations=20, warmup=1, repeats=2)
    problem = runner.make_problem(dataset, settings)
    oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, 20)
    record = runner.run_cell(impl_type(), problem, oracle, dataset, settings, "gpu")
    assert record["status"] == "ok", record.get("detail")
    assert record["iterations_executed"] == 20
