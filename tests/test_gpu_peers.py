"""GPU peers (impls/peers/gpu_libraries.py, impls/peers/keops_kmeans.py): fast-pytorch-kmeans and KeOps,
validated on a GPU; cuML, whose adapter cannot be run on kmbench's GPU machine and must say
so; KeOps's compile in a child process, whose crash must become a clear error."""

import sys

import numpy as np
import pytest

from impls.peers import keops_kmeans
from impls.peers.gpu_libraries import CumlKMeans, FastPytorchKMeans
from impls.peers.keops_kmeans import PykeopsKMeans
from kmbench.protocol import runner, validate
from kmbench.data.datasets import Dataset
from kmbench.errors import ImplementationError


def test_cuml_missing_says_it_is_untested_here(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuml", None)
    usable, reason = CumlKMeans().available()
    assert not usable
    assert "untested" in reason and "pip install" in reason


@pytest.mark.parametrize("impl_type, module, hint", [
    (FastPytorchKMeans, "fast_pytorch_kmeans", "pip install fast-pytorch-kmeans"),
    (PykeopsKMeans, "pykeops", "pip install pykeops")])
def test_a_missing_library_says_how_to_get_it(impl_type, module, hint, monkeypatch):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA GPU: the library check comes after that one")
    monkeypatch.setitem(sys.modules, module, None)
    usable, reason = impl_type().available()
    assert not usable and hint in reason


def test_a_crash_in_keops_compile_is_an_error_not_the_end_of_the_run(monkeypatch):
    monkeypatch.setattr(keops_kmeans, "CHILD", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    with pytest.raises(ImplementationError, match=r"failed for d = 3 \(signal 11\)"):
        keops_kmeans.compile_in_child(10, 2, 3)
    monkeypatch.setattr(keops_kmeans, "CHILD", "import sys; sys.exit('no GPU here')")
    with pytest.raises(ImplementationError, match="exit status 1.*no GPU here"):
        keops_kmeans.compile_in_child(10, 2, 3)


def _blobs(n=50_003, d=8, centers=10, seed=0):
    rng = np.random.default_rng(seed)
    middle = rng.uniform(-10, 10, (centers, d))
    return (middle[rng.integers(0, centers, n)] + 0.3 * rng.standard_normal((n, d))).astype(np.float32)


@pytest.mark.gpu
@pytest.mark.parametrize("impl_type, module", [(FastPytorchKMeans, "fast_pytorch_kmeans"),
                                               (PykeopsKMeans, "pykeops"), (CumlKMeans, "cuml")])
def test_gpu_peer_agrees_with_the_oracle(impl_type, module):
    pytest.importorskip(module)
    dataset = Dataset("peers", _blobs(), None, {"generator": "test"})
    settings = runner.Settings(k=10, iterations=20, warmup=1, repeats=2)
    problem = runner.make_problem(dataset, settings)
    oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, 20)
    record = runner.run_cell(impl_type(), problem, oracle, dataset, settings, "gpu")
    assert record["status"] == "ok", record.get("detail")
    assert record["iterations_executed"] == 20


@pytest.mark.gpu
def test_pykeops_compiles_in_prepare_and_follows_the_tolerance_rule():
    pytest.importorskip("pykeops")
    dataset = Dataset("peers", _blobs(n=100_003, d=3, centers=6), None, {"generator": "test"})
    settings = runner.Settings(k=6, iterations=50, warmup=1, repeats=1, stop="tolerance", tol=0.0)
    problem = runner.make_problem(dataset, settings)
    oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, 50, tol=problem.tol)
    record = runner.run_cell(PykeopsKMeans(), problem, oracle, dataset, settings, "gpu")
    assert record["status"] == "ok", record.get("detail")
    assert "compile" in record["times"]["setup_phases"]
    assert record["build"]["library"].startswith("pykeops ")
    # FP32 sums in atomic order: a point on a bisector may flip once more than in float64.
    assert oracle.iterations <= record["iterations_executed"] <= oracle.iterations + 1
