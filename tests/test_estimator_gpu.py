"""kmbench.KMeans on a GPU (kmbench/estimator/on_gpu.py, issue 63 item 3).

On any machine: what counts as GPU input, which fits go to the GPU, the sentence a fit that
needs a GPU gets without one, and NumPy fits answering in NumPy as before. On a GPU machine
(`gpu`): CuPy in gives CuPy out and torch gives torch, on the input's device; the k-means++
seeding picks the same points there as on the CPU; a float32 fit's trajectory is kmbench-gpu's
row's from the same start, certified `ok` by the judge; predict, transform and score agree
with the CPU estimator's; float64 and weighted fits are the exact Lloyd the CPU runs; the
README's GPU snippet runs as copied."""

from __future__ import annotations

import numpy as np
import pytest

import kmbench
from kmbench.estimator import on_gpu
from tests.conftest import blob_data


class _CudaArray:
    """Something that says it lives on a GPU, as Numba's and CuPy's arrays say it."""

    shape, dtype, ndim = (10, 2), np.dtype(np.float32), 2

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": "<f4", "data": (0, False), "version": 3}


class _DlpackArray:
    def __init__(self, device_type):
        self.device_type = device_type

    def __dlpack_device__(self):
        return (self.device_type, 0)


def _torch_like(device_type: str):
    """An object of a class from the module `torch` with a `device.type`, as a tensor has."""
    device = type("device", (), {"type": device_type})()
    cls = type("Tensor", (), {"__module__": "torch", "device": device})
    return cls()


def test_device_arrays_are_recognised_by_what_they_say():
    assert on_gpu.kind_of(_CudaArray()) == "cupy"
    assert on_gpu.kind_of(_DlpackArray(2)) == "cupy"  # kDLCUDA
    assert on_gpu.kind_of(_DlpackArray(13)) == "cupy"  # kDLCUDAManaged
    assert on_gpu.kind_of(_DlpackArray(1)) is None  # kDLCPU
    assert on_gpu.kind_of(_DlpackArray(3)) is None  # kDLCUDAHost: page-locked host memory
    assert on_gpu.kind_of(_torch_like("cuda")) == "torch"
    assert on_gpu.kind_of(_torch_like("cpu")) is None  # a CPU tensor takes the NumPy path
    for host_input in (np.zeros((3, 2)), [[0.0, 1.0]], 3.0):
        assert on_gpu.kind_of(host_input) is None


def test_host_arrays_pass_through_unchanged():
    centres = np.ones((3, 2), dtype=np.float32)
    assert on_gpu.host(centres) is centres


def test_gpu_input_under_a_cpu_row_is_one_clear_sentence():
    with pytest.raises(ValueError, match=r"X is a cupy array on the GPU, and impl='sklearn' runs on the CPU"):
        kmbench.KMeans(n_clusters=2, impl="sklearn").fit(_CudaArray())


@pytest.mark.parametrize("impl, data", [("gpu", np.zeros((10, 2))), ("auto", _CudaArray()),
                                        ("kmbench-gpu", _torch_like("cuda"))])
def test_a_fit_that_needs_a_gpu_says_why_there_is_none(monkeypatch, impl, data):
    monkeypatch.setattr(on_gpu, "cuda_status", lambda: (False, "no NVIDIA GPU here"))
    with pytest.raises(RuntimeError, match=rf"asked to compute on a GPU \(impl='{impl}'\), and none can run here: "
                                           r"no NVIDIA GPU here\.$"):
        kmbench.KMeans(n_clusters=2, impl=impl).fit(data)


def test_auto_sends_numpy_data_to_the_gpu_only_when_the_work_pays_for_the_copy(monkeypatch):
    monkeypatch.setattr(on_gpu, "cuda_status", lambda: (True, ""))
    n, d = 1_000_000, 100
    k = int(on_gpu.GPU_FROM_WORK // (n * d))
    large = np.broadcast_to(np.float32(0), (n, d))  # the shape and dtype alone decide: no memory
    assert on_gpu.wanted(kmbench.KMeans(n_clusters=k), large)
    assert not on_gpu.wanted(kmbench.KMeans(n_clusters=k - 1), large)
    few = on_gpu.GPU_FROM_K - 1  # too few clusters for the iterations to pay for the copy, however large
    assert not on_gpu.wanted(kmbench.KMeans(n_clusters=few), np.broadcast_to(np.float32(0), (n * k // few + 1, d)))
    assert not on_gpu.wanted(kmbench.KMeans(n_clusters=k), np.broadcast_to(np.float64(0), (n, d)))
    assert not on_gpu.wanted(kmbench.KMeans(n_clusters=k), large, sample_weight=np.ones(n))
    assert not on_gpu.wanted(kmbench.KMeans(n_clusters=k, impl="kmbench-cpu"), large)
    assert on_gpu.wanted(kmbench.KMeans(n_clusters=2, impl="gpu"), np.zeros((10, 2), np.float32))
    monkeypatch.setattr(on_gpu, "cuda_status", lambda: (False, "no NVIDIA GPU here"))
    assert not on_gpu.wanted(kmbench.KMeans(n_clusters=k), large)


def test_numpy_fits_answer_in_numpy_as_before(rng):
    X = blob_data(rng, n=3000, d=4, k=5)
    model = kmbench.KMeans(n_clusters=5, random_state=0).fit(X)
    assert model.impl_ in ("kmbench-cpu", "numpy")
    assert type(model.cluster_centers_) is np.ndarray and model.cluster_centers_.dtype == np.float32
    assert type(model.labels_) is np.ndarray and model.labels_.dtype == np.int32
    assert type(model.predict(X)) is np.ndarray and type(model.transform(X)) is np.ndarray
    np.testing.assert_array_equal(model.predict(X), model.labels_)


class _HaltingRow:
    """kmbench-gpu as the estimator sees it, in NumPy: Lloyd without relocation, stopped by the
    tolerance rule (tol 0: an iteration that changed no label, the first counting all) or before
    an iteration that would leave a cluster empty, where Problem.halt_on_empty asks."""

    name = "kmbench-gpu"

    def __init__(self):
        self.halts = 0

    def prepare(self, problem):
        self.data = np.asarray(problem.data, dtype=np.float64)

    def release(self):
        pass

    def run(self, problem):
        from kmbench.protocol import Result, stop_done
        from kmbench.protocol.reference import nearest

        centers, labels, done = np.array(problem.initial_centroids, dtype=np.float64), None, 0
        for done in range(1, problem.iterations + 1):
            new = nearest(self.data, centers)[0]
            counts = np.bincount(new, minlength=len(centers))
            if problem.halt_on_empty and (counts == 0).any():
                self.halts += 1
                return Result(centroids=centers, iterations=done - 1, emptied=True)
            changed = len(new) if labels is None else int(np.count_nonzero(new != labels))
            filled = counts > 0
            sums = np.stack([np.bincount(new, weights=self.data[:, a], minlength=len(centers))
                             for a in range(self.data.shape[1])], axis=1)
            centers[filled] = sums[filled] / counts[filled, None]
            labels = new
            if stop_done(changed, len(new), problem.tol):
                break
        return Result(centroids=centers, iterations=done, emptied=False if problem.halt_on_empty else None)


def test_a_row_that_halts_before_an_empty_hands_that_iteration_to_the_estimators_step(rng, monkeypatch):
    """on_gpu.run_row (host arrays, the GPU's relocating step replaced by the CPU's): whole calls
    of the row, its halts taken by the estimator's relocating step, give the CPU estimator's fit
    (its exact Lloyd with scikit-learn's relocation) from the same start, and say no cluster is
    left empty."""
    from kmbench.estimator import lloyd

    monkeypatch.setattr(on_gpu, "relocating_step", lambda X, w, c: (*lloyd.relocating_step(X, w, c), None, True))
    X = one_point_per_blob(rng, dtype=np.float64)
    start = X[[0, 0, 1, 2, 3, 4]]
    row = _HaltingRow()
    centers, n_iter, emptied = on_gpu.run_row(row, X, start, 0, 50, verbose=False)
    cpu = kmbench.KMeans(n_clusters=6, init=start, n_init=1, max_iter=50, tol=0, impl="numpy").fit(X)
    assert row.halts >= 1 and emptied is False
    assert n_iter == cpu.n_iter_ < 50
    np.testing.assert_allclose(centers, cpu.cluster_centers_, rtol=1e-9, atol=1e-9)


# ---------------------------------------------------------------------- on a GPU


def _cupy():
    return pytest.importorskip("cupy")


@pytest.mark.gpu
@pytest.mark.parametrize("d", [8, 64])  # kmbench-gpu's low-d kernels, and its tensor-core path
def test_cupy_in_cupy_out_on_the_same_device(rng, d):
    cupy = _cupy()
    X = cupy.asarray(blob_data(rng, n=20_000, d=d, k=6))
    model = kmbench.KMeans(n_clusters=6, random_state=0).fit(X)
    assert model.impl_ == "kmbench-gpu"
    centres, labels = model.cluster_centers_, model.labels_
    assert isinstance(centres, cupy.ndarray) and centres.dtype == cupy.float32 and centres.shape == (6, d)
    assert isinstance(labels, cupy.ndarray) and labels.dtype == cupy.int32 and labels.shape == (20_000,)
    assert centres.device.id == X.device.id
    for out in (model.predict(X), model.transform(X), model.fit_predict(X), model.fit_transform(X)):
        assert isinstance(out, cupy.ndarray) and out.device.id == X.device.id
    assert isinstance(model.score(X), float)


@pytest.mark.gpu
def test_torch_in_torch_out_on_the_same_device(rng):
    torch = pytest.importorskip("torch")
    X = torch.from_numpy(blob_data(rng, n=20_000, d=8, k=6)).cuda()
    model = kmbench.KMeans(n_clusters=6, random_state=0).fit(X)
    assert isinstance(model.cluster_centers_, torch.Tensor) and model.cluster_centers_.device == X.device
    assert model.cluster_centers_.dtype == torch.float32 and model.labels_.dtype == torch.int32
    for out in (model.predict(X), model.transform(X), model.fit_predict(X), model.fit_transform(X)):
        assert isinstance(out, torch.Tensor) and out.device == X.device
    assert torch.equal(model.predict(X), model.labels_)
    assert isinstance(model.score(X), float)


@pytest.mark.gpu
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kmeans_plusplus_picks_the_same_points_on_the_gpu_as_on_the_cpu(rng, seed):
    cupy = _cupy()
    from kmbench.protocol.seeding import kmeans_plusplus

    X = blob_data(rng, n=30_000, d=16, k=10)
    weights = rng.uniform(0.5, 2.0, size=len(X))
    for w in (None, weights):
        on_cpu = kmeans_plusplus(X, 40, seed, np, w)
        on_gpu_ = kmeans_plusplus(cupy.asarray(X), 40, seed, cupy, w)
        np.testing.assert_array_equal(cupy.asnumpy(on_gpu_), on_cpu)
    # Through the estimator: the same seeds drawn from random_state, the same starts.
    for init in ("k-means++", "random"):
        model = kmbench.KMeans(n_clusters=40, init=init, random_state=seed, n_init=2)
        given = model._starts(X, None, 2)
        taken = model._starts(cupy.asarray(X), None, 2)
        for a, b in zip(given, taken):
            np.testing.assert_array_equal(cupy.asnumpy(b), a)


@pytest.mark.gpu
@pytest.mark.parametrize("d", [8, 64])
def test_the_fits_trajectory_is_kmbench_gpus_row_from_the_same_start_and_certified(rng, d):
    cupy = _cupy()
    from bench.estimator_gpu import judged
    from impls.gpu.kmbench_gpu import KmbenchGpu
    from kmbench.protocol import Problem

    host = blob_data(rng, n=50_000, d=d, k=8)
    X, start = cupy.asarray(host), host[rng.choice(len(host), 8, replace=False)]
    model = kmbench.KMeans(n_clusters=8, init=start, n_init=1, max_iter=15, tol=0).fit(X)
    row, problem = KmbenchGpu(), Problem(data=X, initial_centroids=start, iterations=15, tol=0.0, warmup=0, repeats=1)
    row.prepare(problem)
    result = row.run(problem)
    row.release()
    assert model.impl_ == "kmbench-gpu" and model.n_iter_ == result.iterations
    # Its float64 sums add in an order of the GPU's choosing: a last bit may differ from run to run.
    np.testing.assert_allclose(cupy.asnumpy(model.cluster_centers_), result.centroids, rtol=1e-6, atol=1e-5)
    verdict, _emptied = judged(X, start, cupy.asnumpy(model.cluster_centers_), model.n_iter_, 15, 0.0)
    assert verdict.status == "ok", verdict.detail


@pytest.mark.gpu
@pytest.mark.parametrize("d", [8, 64])
def test_predict_transform_and_score_agree_with_the_cpu_estimator(rng, d):
    cupy = _cupy()
    X = blob_data(rng, n=20_000, d=d, k=6)
    model = kmbench.KMeans(n_clusters=6, random_state=0).fit(cupy.asarray(X))
    new = blob_data(np.random.default_rng(7), n=5_000, d=d, k=6)
    on_device = cupy.asarray(new)
    # The host calls run the CPU estimator's code on the same centres.
    np.testing.assert_array_equal(cupy.asnumpy(model.predict(on_device)), model.predict(new))
    np.testing.assert_array_equal(cupy.asnumpy(model.labels_), model.predict(X))
    np.testing.assert_allclose(cupy.asnumpy(model.transform(on_device)), model.transform(new), rtol=1e-5, atol=1e-5)
    assert model.score(on_device) == pytest.approx(model.score(new), rel=1e-9)
    assert model.inertia_ == pytest.approx(-model.score(X), rel=1e-9)


@pytest.mark.gpu
def test_impl_gpu_takes_numpy_data_there_and_answers_in_numpy(rng):
    _cupy()
    X = blob_data(rng, n=20_000, d=8, k=6)
    model = kmbench.KMeans(n_clusters=6, impl="gpu", random_state=0).fit(X)
    assert model.impl_ == "kmbench-gpu"
    assert type(model.cluster_centers_) is np.ndarray and type(model.labels_) is np.ndarray
    np.testing.assert_array_equal(model.predict(X), model.labels_)


def one_point_per_blob(rng, n=20_000, d=5, k=6, dtype=np.float32):
    """Unit blobs whose point i is of blob i % k, so X[:k] holds one point of each. From
    X[[0, 0, 1, ..., k - 2]] the repeated centre leaves a cluster empty in the first iteration;
    relocated to the farthest point (of the blob no centre had), the fit converges in a few
    iterations (conftest's blob_data, its blobs drawn at random, drifted on past 50 at tol=0)."""
    middles = rng.uniform(-10, 10, size=(k, d))
    return (middles[np.arange(n) % k] + rng.standard_normal((n, d))).astype(dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("weighted", [False, True])
def test_float64_and_weighted_fits_run_the_cpus_exact_lloyd_on_the_gpu(rng, weighted):
    """Float64 (kmbench-gpu computes in float32) and weighted fits run the estimator's own
    float64 Lloyd there; the start's repeated centre leaves a cluster empty, which both move to
    the farthest point, as scikit-learn does."""
    cupy = _cupy()
    X = one_point_per_blob(rng, dtype=np.float64)
    start = X[[0, 0, 1, 2, 3, 4]]
    weights = rng.uniform(0.5, 2.0, size=len(X)) if weighted else None
    gpu = kmbench.KMeans(n_clusters=6, init=start, n_init=1, max_iter=50, tol=0)
    gpu.fit(cupy.asarray(X), sample_weight=None if weights is None else cupy.asarray(weights))
    with pytest.warns(UserWarning, match="takes no sample weights") if weighted else _nothing():
        cpu = kmbench.KMeans(n_clusters=6, init=start, n_init=1, max_iter=50, tol=0, impl="numpy")
        cpu.fit(X, sample_weight=weights)
    assert gpu.impl_ == "own-cupy" and gpu.n_iter_ == cpu.n_iter_ < 50
    np.testing.assert_allclose(cupy.asnumpy(gpu.cluster_centers_), cpu.cluster_centers_, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(cupy.asnumpy(gpu.labels_), cpu.labels_)


@pytest.mark.gpu
@pytest.mark.parametrize("d", [8, 64])
def test_a_float32_fit_that_empties_a_cluster_stays_on_kmbench_gpu(rng, d):
    """kmbench-gpu halts before the iteration that would empty the repeated centre's cluster
    (Problem.halt_on_empty), the estimator's own step relocates it, the row runs on: the
    CPU's exact Lloyd with scikit-learn's relocation, from the same start."""
    cupy = _cupy()
    X = one_point_per_blob(rng, d=d)
    start = X[[0, 0, 1, 2, 3, 4]]
    gpu = kmbench.KMeans(n_clusters=6, init=start, n_init=1, max_iter=50, tol=0).fit(cupy.asarray(X))
    cpu = kmbench.KMeans(n_clusters=6, init=start, n_init=1, max_iter=50, tol=0, impl="numpy").fit(X)
    assert gpu.impl_ == "kmbench-gpu" and gpu.n_iter_ == cpu.n_iter_ < 50
    np.testing.assert_allclose(cupy.asnumpy(gpu.cluster_centers_), cpu.cluster_centers_, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(cupy.asnumpy(gpu.labels_), cpu.labels_)


def _nothing():
    from contextlib import nullcontext

    return nullcontext()


@pytest.mark.gpu
def test_the_readmes_gpu_snippet_runs_as_copied():
    _cupy()
    pytest.importorskip("torch")
    from tests.test_readme import README

    lines = README.read_text().splitlines()
    heading = "## In your own code: `kmbench.KMeans`"
    after_first = "\n".join(lines[lines.index(heading):]).split("```python", 2)[2]  # the second block
    code = after_first.split("```", 1)[0]
    assert "cupy" in code and "torch" in code
    namespace = {"__name__": "readme_gpu_snippet"}
    exec(compile(code, "README.md (In your own code, on a GPU)", "exec"), namespace)
