"""kmbench-cpu in process (kmbench/estimator/inprocess.py, impls/cpu/kmbench_cpu/inprocess.cpp):
the same answers as the program, bit for bit, from the same start; every start of a fit in one
call with no file and no process; and the thread limits a scikit-learn user sets reach it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.cluster import KMeans as SklearnKMeans
from sklearn.datasets import make_blobs
from threadpoolctl import threadpool_limits

import kmbench
from impls.cpu.kmbench_cpu import KmbenchCpu
from kmbench.estimator import fitting, inprocess
from kmbench.protocol import Options

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
built = pytest.mark.skipif(inprocess.MODULE is None, reason="the extension is not built (no compiler at install)")


def _symmetric(n: int, d: int, k: int, dtype, seed: int = 0) -> np.ndarray:
    """Blobs on a grid of 2^-8, each point with its mirror image: every sum the program forms of
    them in float64 is exact, so its mean is exactly 0 and its centring leaves the points as they
    are; the extension then reads the very points the program computes on."""
    half = make_blobs(n // 2, d, centers=k, cluster_std=1.5, random_state=seed)[0]
    half = np.round(half * 256) / 256
    return np.vstack([half, -half]).astype(dtype)


def _installed_from_here() -> bool:
    """Whether this checkout is the one pip installed (`make venv`, `make test`), rather than one
    put on PYTHONPATH without an install (the GPU machine's runs), which builds nothing."""
    from importlib import metadata

    # Every kmbench found: the install's dist-info, and the egg-info an editable build leaves here.
    urls = [json.loads(found.read_text("direct_url.json") or "{}").get("url", "")
            for found in metadata.distributions(name="kmbench")]
    return Path(ROOT).as_uri() in (url.rstrip("/") for url in urls)


def test_the_extension_is_built_where_a_compiler_is():
    """`pip install -e .` builds it quietly optional; a build that failed where a compiler is would
    leave every fit on the program without this test noticing."""
    if not KmbenchCpu().available()[0]:
        pytest.skip("no C++ compiler here: the extension is optional")
    if not _installed_from_here():
        pytest.skip("this checkout was not installed by pip (PYTHONPATH): nothing built it")
    assert inprocess.MODULE is not None, inprocess.MISSING


@built
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d, k", [(2, 5), (2, 300), (16, 20), (40, 20)])  # low d, the sorted search, 16, high d
@pytest.mark.parametrize("weighted", [False, True])
def test_the_extension_computes_the_programs_answer_bit_for_bit(dtype, d, k, weighted):
    """One thread each (a float32 run on several hands blocks out as threads come free, so its
    float64 sums are added in another order each run, the program's too). On a CPU with AVX-512
    the program's -march=native build takes its 512-bit portable low-d loop where the extension
    takes the AVX2 one; both form (x - c)^2 by FMAs in the same order."""
    X = _symmetric(4_006, d, 8, dtype)  # a last block of 38 points: part of an AVX2 group of 8 left over
    weights = np.tile(np.random.default_rng(1).uniform(0.5, 2.0, len(X) // 2), 2) if weighted else None
    start = X[np.random.default_rng(2).choice(len(X), k, replace=False)]
    program = KmbenchCpu()
    problem = replace(fitting.problem(X, start, 15, shift_tol=1e-9, weights=weights), options=Options(threads=1))
    program.prepare(problem)
    try:
        expected = program.run(problem)
    finally:
        program.release()
    row = inprocess.InProcessRow()
    row.n_threads = 1
    (got,) = row.runs(X, start[None].astype(np.float64), weights, 1e-9, 15, halt_on_empty=False)
    assert got.iterations == expected.iterations
    np.testing.assert_array_equal(got.centroids, expected.centroids)


def _fit_teams(monkeypatch, **kwargs) -> tuple[int, int]:
    """The threads the in-process row's last parallel region ran on in a fit of this process, and
    those of the fit's labels pass (labels_ and inertia_, the extension's `nearest`)."""
    teams, passes = [], []
    real, real_nearest = inprocess.InProcessRow.runs, inprocess.MODULE.nearest

    def runs(self, *args, **kw):
        out = real(self, *args, **kw)
        teams.append(self.team)
        return out

    def nearest(*args):
        passes.append(real_nearest(*args))
        return passes[-1]

    monkeypatch.setattr(inprocess.InProcessRow, "runs", runs)
    monkeypatch.setattr(inprocess.MODULE, "nearest", nearest)
    X = make_blobs(20_000, 4, centers=5, random_state=0)[0]
    model = kmbench.KMeans(n_clusters=5, random_state=0, impl="kmbench-cpu", **kwargs).fit(X)
    assert model.impl_ == "kmbench-cpu" and teams and passes
    return teams[-1], passes[-1]


@built
def test_threadpoolctl_and_the_estimators_setting_reach_the_extension(monkeypatch):
    monkeypatch.delenv("KMBENCH_THREADS", raising=False)
    with threadpool_limits(1):
        assert _fit_teams(monkeypatch) == (1, 1)
    assert _fit_teams(monkeypatch, n_threads=1) == (1, 1)
    every = inprocess.MODULE.max_threads()
    assert _fit_teams(monkeypatch) == (every, every)
    monkeypatch.setenv("KMBENCH_THREADS", "1")
    assert _fit_teams(monkeypatch) == (1, 1)


TEAM = """
import json, numpy as np
from kmbench.estimator import inprocess
row = inprocess.InProcessRow()
X = np.random.default_rng(0).standard_normal((20_000, 4))
row.runs(X, X[None, :5].copy(), None, None, 3)
print(json.dumps(row.team))
"""


@built
@pytest.mark.parametrize("environment, expected", [({}, "cores"), ({"OMP_NUM_THREADS": "1"}, 1)])
def test_omp_num_threads_reaches_the_extension(environment, expected):
    """A new process: OpenMP reads OMP_NUM_THREADS once, when its runtime loads. Unset, every core
    this process may use (one on a 1-core machine, where the two cases cannot differ)."""
    env = {key: value for key, value in os.environ.items() if key not in ("OMP_NUM_THREADS", "KMBENCH_THREADS")}
    env.update(environment, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", TEAM], capture_output=True, text=True, env=env, check=True, cwd=ROOT)
    assert json.loads(out.stdout) == (len(os.sched_getaffinity(0)) if expected == "cores" else expected)


WRITES = """
import json, sys, numpy as np
import kmbench
from kmbench.estimator import inprocess
seen, calls, watching = [], [], [False]

def audit(event, args):
    if not watching[0]:
        return
    if event == "open" and args[1] is not None and any(m in str(args[1]) for m in "wax+"):
        seen.append(str(args[0]))
    if event in ("subprocess.Popen", "os.system", "os.posix_spawn", "os.fork"):
        seen.append(event)

sys.addaudithook(audit)
real = inprocess.MODULE.lloyd
class Counting:
    max_threads = staticmethod(inprocess.MODULE.max_threads)
    nearest = staticmethod(inprocess.MODULE.nearest)  # the labels pass, not counted
    @staticmethod
    def lloyd(*args):
        calls.append(1)
        return real(*args)
inprocess.MODULE = Counting
X = np.random.default_rng(0).standard_normal((5_000, 3))
watching[0] = True
model = kmbench.KMeans(n_clusters=4, init="random", n_init=10, random_state=0).fit(X)
watching[0] = False
print(json.dumps({"writes": seen, "calls": len(calls), "impl": model.impl_}))
"""


@built
def test_ten_starts_write_no_file_start_no_process_and_run_in_one_call():
    """Each start had written the whole dataset to a temporary file and started a process (issue 63).
    A fresh process with an audit hook: every file opened for writing, every process started."""
    env = {**os.environ, "PYTHONPATH": ROOT}
    out = subprocess.run([sys.executable, "-c", WRITES], capture_output=True, text=True, env=env, check=True, cwd=ROOT)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["impl"] == "kmbench-cpu" and seen["writes"] == []
    assert 1 <= seen["calls"] <= 2  # all ten at once; a second only where a run stopped before emptying a cluster


def test_all_zero_weights_are_scikit_learns_error():
    X = make_blobs(100, 2, centers=3, random_state=0)[0]
    for model in (SklearnKMeans(n_clusters=3, n_init=1), kmbench.KMeans(n_clusters=3)):
        with pytest.raises(ValueError, match="Sample weights must contain at least one non-zero number"):
            model.fit(X, sample_weight=np.zeros(len(X)))
    fitted = kmbench.KMeans(n_clusters=3, random_state=0).fit(X)
    with pytest.raises(ValueError, match="Sample weights must contain at least one non-zero number"):
        fitted.score(X, sample_weight=0.0)


def test_a_wrong_thread_setting_is_one_sentence():
    with pytest.raises(ValueError, match="n_threads must be a positive integer or None; got 0"):
        kmbench.KMeans(n_clusters=3, n_threads=0).fit(np.zeros((10, 2)))


@built
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weighted", [False, True])
def test_csr_computed_sparse_is_the_dense_fit_from_the_same_start(dtype, weighted):
    """The sparse path scores in the data's precision without centring, the dense one on centred
    data: on separated clusters no label differs, so the centres agree to the sums' rounding."""
    X, _ = make_blobs(3_000, 20, centers=6, cluster_std=0.5, center_box=(0, 10), random_state=3)
    X[X < 4] = 0  # about half the values stored
    X = X.astype(dtype)
    weights = np.random.default_rng(4).uniform(0.5, 2.0, len(X)) if weighted else None
    start = X[np.random.default_rng(5).choice(len(X), 6, replace=False)]
    dense = kmbench.KMeans(n_clusters=6, init=start).fit(X, sample_weight=weights)
    csr = sp.csr_matrix(X)
    sparse = kmbench.KMeans(n_clusters=6, init=start).fit(csr, sample_weight=weights)
    assert sparse.impl_ == "kmbench-cpu" and sparse.n_iter_ == dense.n_iter_
    np.testing.assert_array_equal(sparse.labels_, dense.labels_)
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(sparse.cluster_centers_, dense.cluster_centers_, rtol=0, atol=tolerance * np.abs(X).max())
    assert sparse.inertia_ == pytest.approx(dense.inertia_, rel=1e-6 if dtype == np.float32 else 1e-12)
    np.testing.assert_array_equal(sparse.predict(csr), dense.predict(X))
    np.testing.assert_allclose(sparse.transform(csr), dense.transform(X), rtol=1e-5 if dtype == np.float32 else 1e-9)


@built
def test_csr_is_never_densified(monkeypatch):
    """The 200,000 x 1,000 matrix at 0.1% that was refused (1.6 GB dense) fits sparse: any toarray()
    of the whole matrix fails this test."""
    rng = np.random.default_rng(0)  # scipy.sparse.random draws its 2e5 positions out of 2e8: 44 s
    rows, columns = rng.integers(0, 200_000, 200_000), rng.integers(0, 1_000, 200_000)
    X = sp.csr_matrix((rng.random(200_000, dtype=np.float32), (rows, columns)), shape=(200_000, 1_000))
    real = sp.csr_matrix.toarray

    def toarray(self, *args, **kwargs):
        assert self.shape[0] < 1_000, f"densified a {self.shape} matrix"
        return real(self, *args, **kwargs)

    monkeypatch.setattr(sp.csr_matrix, "toarray", toarray)
    model = kmbench.KMeans(n_clusters=8, init="random", n_init=2, random_state=0).fit(X)
    assert model.cluster_centers_.shape == (8, 1_000) and model.labels_.shape == (200_000,)


WAIT = """
import ctypes, kmbench.estimator.inprocess
ctypes.CDLL("libgomp.so.1").omp_display_env(0)
"""


@built
@pytest.mark.parametrize("asked, expected", [(None, "PASSIVE"), ("active", "ACTIVE")])
def test_the_extensions_openmp_waits_passively_unless_the_user_says(asked, expected):
    """Spinning threads took 480 ms where passive ones took 8 on a busy 2-core machine (inprocess._load)."""
    env = {key: value for key, value in os.environ.items() if key != "OMP_WAIT_POLICY"}
    env.update({"PYTHONPATH": ROOT} if asked is None else {"PYTHONPATH": ROOT, "OMP_WAIT_POLICY": asked})
    out = subprocess.run([sys.executable, "-c", WAIT], capture_output=True, text=True, env=env, cwd=ROOT)
    if out.returncode != 0:
        pytest.skip(f"no libgomp to ask (another OpenMP runtime): {out.stderr.strip()[-200:]}")
    assert f"OMP_WAIT_POLICY = '{expected}'" in out.stderr


@pytest.mark.parametrize("weighted", [False, True])
def test_kmeans_plusplus_on_csr_picks_the_dense_arrays_points(weighted):
    """scikit-learn's test_dense_sparse fits both from one random_state and asks for the same
    labels; kmbench's seeding on CSR rows draws as on the dense array."""
    from kmbench.protocol import seeding

    rng = np.random.default_rng(0)
    X = rng.random((3_000, 20))
    X[X < 0.6] = 0
    weights = rng.uniform(0.5, 2.0, len(X)) if weighted else None
    dense = seeding.kmeans_plusplus(X, 10, 3, np, weights)
    np.testing.assert_array_equal(seeding.kmeans_plusplus(sp.csr_matrix(X), 10, 3, np, weights), dense)
    model = kmbench.KMeans(n_clusters=10, random_state=0).fit(sp.csr_matrix(X), sample_weight=weights)
    np.testing.assert_array_equal(model.labels_, kmbench.KMeans(n_clusters=10, random_state=0).fit(
        X, sample_weight=weights).labels_)
