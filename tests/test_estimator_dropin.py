"""kmbench.KMeans as a drop-in for scikit-learn's KMeans (issue 51): n_init, algorithm,
sample_weight, sparse input, copy_x, verbose, a callable init, scikit-learn's warnings, its
relocation of empty clusters, float64 computed in float64, and a choice of row made once.
Answers are held against scikit-learn's own KMeans from the same start, never hard-coded."""

import re
import sys
import warnings

from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.cluster import KMeans as SklearnKMeans
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning

from impls.cpu.kmbench_cpu import KmbenchCpu
import kmbench
from kmbench.estimator import choice, lloyd


def _blobs(n=600, d=3, k=4, seed=0):
    return make_blobs(n_samples=n, n_features=d, centers=k, random_state=seed)[0]


def _same_fit(ours, theirs):
    assert ours.n_iter_ == theirs.n_iter_
    np.testing.assert_array_equal(ours.labels_, theirs.labels_)
    np.testing.assert_allclose(ours.cluster_centers_, theirs.cluster_centers_, rtol=1e-7, atol=1e-9)
    assert ours.inertia_ == pytest.approx(theirs.inertia_, rel=1e-9)


def test_n_init_keeps_the_run_of_least_inertia_whichever_comes_first():
    X = _blobs(k=4)
    starts = [X[:4], X[-4:]]
    alone = [kmbench.KMeans(n_clusters=4, init=start).fit(X) for start in starts]
    best = min(alone, key=lambda model: model.inertia_)
    assert alone[0].inertia_ != pytest.approx(alone[1].inertia_)  # two different local minima
    for order in (starts, starts[::-1]):
        given = iter(order)
        model = kmbench.KMeans(n_clusters=4, init=lambda X_, k, random_state: next(given), n_init=2).fit(X)
        np.testing.assert_array_equal(model.cluster_centers_, best.cluster_centers_)
        assert model.inertia_ == best.inertia_


@pytest.mark.parametrize("init, runs", [("k-means++", 1), ("random", 10), ("callable", 10), ("array", 1)])
def test_n_init_auto_is_scikit_learns(init, runs):
    X = _blobs()
    calls = []
    given = {"callable": lambda X_, k, random_state: calls.append(1) or X_[:4], "array": X[:4]}.get(init, init)
    model = kmbench.KMeans(n_clusters=4, init=given, random_state=0).fit(X)
    assert model._n_init == runs
    if init == "callable":
        assert len(calls) == 10


def test_given_centres_make_one_run_and_say_so():
    with pytest.warns(RuntimeWarning, match="Explicit initial center position passed: performing only one init"):
        model = kmbench.KMeans(n_clusters=4, init=_blobs()[:4], n_init=5).fit(_blobs())
    assert model._n_init == 1


@pytest.mark.parametrize("tol", [1e-4, 0.0])
def test_elkan_runs_the_same_lloyd(tol):
    X = _blobs()
    lloyd_fit = kmbench.KMeans(n_clusters=4, random_state=3, tol=tol).fit(X)
    elkan_fit = kmbench.KMeans(n_clusters=4, random_state=3, tol=tol, algorithm="elkan").fit(X)
    _same_fit(elkan_fit, lloyd_fit)
    with pytest.raises(ValueError, match="algorithm must be 'lloyd' or 'elkan'"):
        kmbench.KMeans(algorithm="full").fit(X)


def test_weighted_fit_is_scikit_learns_from_the_same_start():
    X = _blobs(n=400, k=5)
    weights = np.random.default_rng(1).uniform(0.1, 3, len(X))
    start = X[:5]
    theirs = SklearnKMeans(n_clusters=5, init=start, n_init=1).fit(X, sample_weight=weights)
    for impl in ("auto", "numpy"):  # kmbench-cpu weighs the points itself; numpy leaves it to the estimator
        ours = kmbench.KMeans(n_clusters=5, init=start, impl=impl).fit(X, sample_weight=weights)
        _same_fit(ours, theirs)
        assert ours.score(X, sample_weight=weights) == pytest.approx(theirs.score(X, sample_weight=weights))
    assert ours.impl_ == lloyd.OWN
    weighed = kmbench.KMeans(n_clusters=5, init=start).fit(X, sample_weight=weights).impl_
    assert weighed == ("kmbench-cpu" if KmbenchCpu().available()[0] else lloyd.OWN)


def test_integer_weights_are_repeated_rows():
    X = _blobs(n=200)
    weights = np.random.default_rng(2).integers(1, 4, len(X))
    weighted = kmbench.KMeans(n_clusters=4, init=X[:4]).fit(X, sample_weight=weights)
    repeated = kmbench.KMeans(n_clusters=4, init=X[:4]).fit(np.repeat(X, weights, axis=0))
    np.testing.assert_array_equal(np.repeat(weighted.labels_, weights), repeated.labels_)
    np.testing.assert_allclose(weighted.cluster_centers_, repeated.cluster_centers_)
    assert weighted.inertia_ == pytest.approx(repeated.inertia_)


def test_a_named_row_that_cannot_weight_falls_back_and_says_so():
    X = _blobs()
    with pytest.warns(UserWarning, match="impl='numpy' takes no sample weights"):
        model = kmbench.KMeans(n_clusters=4, impl="numpy", random_state=0).fit(X, sample_weight=np.arange(len(X)) + 1.0)
    assert model.impl_ == lloyd.OWN
    equal = kmbench.KMeans(n_clusters=4, impl="numpy", random_state=0).fit(X, sample_weight=np.full(len(X), 2.0))
    assert equal.impl_ == "numpy"  # equal weights change nothing: the row runs


@pytest.mark.parametrize("weights, message", [
    (np.ones(5), r"sample_weight has shape \(5,\); expected \(600,\)"),
    (-np.ones(600), "sample_weight must be finite and non-negative"),
    (np.zeros(600), "Sample weights must contain at least one non-zero number"),  # scikit-learn 1.9's words
])
def test_bad_weights_are_one_sentence(weights, message):
    with pytest.raises(ValueError, match=message):
        kmbench.KMeans(n_clusters=4).fit(_blobs(), sample_weight=weights)


@pytest.mark.parametrize("impl", ["auto", "numpy"])  # computed sparse by the extension (where built); densified
def test_sparse_input_fits_as_the_dense_from_the_same_start(impl):
    X = _blobs()
    X[X < 0] = 0
    start = X[[0, 150, 300, 450]]
    dense = kmbench.KMeans(n_clusters=4, init=start).fit(X)
    sparse = kmbench.KMeans(n_clusters=4, init=start, impl=impl).fit(sp.csr_matrix(X))
    _same_fit(sparse, dense)
    np.testing.assert_array_equal(sparse.predict(sp.csc_matrix(X)), dense.labels_)


def test_sparse_input_is_densified_only_up_to_a_limit(monkeypatch):
    X = _blobs()
    monkeypatch.setattr(kmbench.estimator, "DENSE_LIMIT", X.size * 8 - 1)
    with pytest.raises(ValueError, match=r"X is a sparse matrix of 600 x 3, .* densifies sparse input only up to"):
        kmbench.KMeans(n_clusters=4, impl="numpy").fit(sp.csr_matrix(X))


@pytest.mark.parametrize("copy_x", [True, False])
def test_copy_x_leaves_the_callers_data_as_they_were(copy_x):
    X = _blobs() + 100.0
    given = X.copy()
    model = kmbench.KMeans(n_clusters=4, random_state=0, copy_x=copy_x).fit(given)
    if copy_x:
        np.testing.assert_array_equal(given, X)
    else:  # centred in place, as scikit-learn's, and put back (to rounding)
        np.testing.assert_allclose(given, X, rtol=1e-12)
    np.testing.assert_array_equal(model.predict(given), model.labels_)


@pytest.mark.parametrize("impl", ["numpy", lloyd.OWN])
@pytest.mark.parametrize("tol, end", [(0.0, "strict convergence"), (1e-2, r"center shift .* within tolerance")])
def test_verbose_prints_scikit_learns_lines(impl, tol, end, capsys):
    weights = None if impl == "numpy" else np.arange(600) + 1.0
    kmbench.KMeans(n_clusters=4, impl="auto", random_state=0, tol=tol, verbose=1).fit(_blobs(), sample_weight=weights)
    out = capsys.readouterr().out
    assert "Initialization complete" in out and re.search(r"Iteration 0, inertia [0-9.e+]+\.", out)
    assert re.search(f"Converged at iteration [0-9]+: {end}", out)


def test_a_callable_init_gets_the_data_and_random_state_and_its_centres_are_used():
    X = _blobs()
    seen = []

    def init(data, k, random_state):
        seen.append((data.shape, k, type(random_state)))
        return data[:k]

    by_callable = kmbench.KMeans(n_clusters=4, init=init, n_init=1).fit(X)
    by_array = kmbench.KMeans(n_clusters=4, init=X[:4]).fit(X)
    assert seen == [((600, 3), 4, np.random.RandomState)]
    _same_fit(by_callable, by_array)
    with pytest.raises(ValueError, match=r"The shape of the initial centers \(2, 3\) does not match the number of clusters"):
        kmbench.KMeans(n_clusters=4, init=lambda data, k, random_state: data[:2], n_init=1).fit(X)


def test_fewer_distinct_points_than_clusters_warn_as_scikit_learn_does():
    X = np.array([[0, 0], [1, 1], [1, 1], [1, 0], [0, 1]], dtype=float)
    with pytest.warns(ConvergenceWarning, match=r"Number of distinct clusters \(4\) found smaller than n_clusters \(5\)"):
        model = kmbench.KMeans(n_clusters=5, init=X).fit(X)
    with pytest.warns(ConvergenceWarning):
        assert model.n_iter_ == SklearnKMeans(n_clusters=5, init=X, n_init=1).fit(X).n_iter_


def test_an_empty_cluster_is_relocated_as_scikit_learn_does():
    """Issue 51: from the same start, kmbench kept an empty cluster's centroid and ended with 49
    of 50 clusters in use (blobs 20,000 x 64); here the same on 2,000 x 8, k = 20. The protocol
    keeps it; the estimator relocates it, stepping numpy or kmbench-cpu (float32 or float64, its
    whole run redone a step at a time: the run stays on the row, only the emptying steps are the
    estimator's own)."""
    X = make_blobs(n_samples=2_000, n_features=8, centers=20, random_state=0)[0]
    start = X[np.random.default_rng(0).choice(len(X), 20, replace=False)]
    from kmbench.protocol import reference

    kept = reference.lloyd(X, start, 30).centroids
    assert np.unique(reference.nearest(X, kept)[0]).size < 20  # this start does leave one empty
    theirs = SklearnKMeans(n_clusters=20, init=start, n_init=1).fit(X)
    for impl in ("numpy", "auto"):
        for dtype in (np.float64, np.float32):
            ours = kmbench.KMeans(n_clusters=20, impl=impl, init=start).fit(X.astype(dtype))
            assert np.unique(ours.labels_).size == 20 and ours.n_iter_ == theirs.n_iter_
            assert ours.inertia_ == pytest.approx(theirs.inertia_, rel=1e-6)
            assert ours.impl_ != lloyd.OWN  # stepped on its row, not redone whole in NumPy


@pytest.mark.parametrize("impl, dtype", [("numpy", np.float64), ("auto", np.float64), ("auto", np.float32)])
def test_the_smallest_relocation_matches_scikit_learns(impl, dtype):
    """float32 under "auto" is kmbench-cpu's whole run, halted before its first iteration."""
    X = np.array([[0, 0], [0.5, 0], [0.5, 1], [1, 1]], dtype=dtype)
    start = np.array([[0.5, 0.5], [3, 3]], dtype=dtype)  # the second centre wins no point at first
    ours = kmbench.KMeans(n_clusters=2, impl=impl, init=start).fit(X)
    theirs = SklearnKMeans(n_clusters=2, init=start, n_init=1).fit(X)
    assert ours.n_iter_ == theirs.n_iter_ and ours.inertia_ == pytest.approx(theirs.inertia_)
    assert sorted(map(tuple, ours.cluster_centers_)) == sorted(map(tuple, theirs.cluster_centers_))


def test_float64_data_are_computed_in_float64():
    """Issue 51: kmbench-cpu computed float64 data in float32 (-2.4e-8 where 0 is exact)."""
    X = np.array([[0.1, 0.3], [-0.1, -0.3], [10.1, 10.3], [9.9, 10.7], [10.0, 9.0]])
    ours = kmbench.KMeans(n_clusters=2, init=X[[0, 2]]).fit(X)
    theirs = SklearnKMeans(n_clusters=2, init=X[[0, 2]], n_init=1).fit(X)
    assert ours.cluster_centers_.dtype == np.float64 and ours.impl_ in ("kmbench-cpu", "numpy")
    assert ours.impl_ == ("kmbench-cpu" if KmbenchCpu().available()[0] else "numpy")
    assert (ours.cluster_centers_[0] == 0).all()
    _same_fit(ours, theirs)


def test_the_row_is_chosen_once_a_process(monkeypatch):
    """Issue 51: every fit ran discovery twice (0.4 s of a 0.6 s first fit, 0.12 s later)."""
    X = _blobs()
    kmbench.KMeans(n_clusters=4, random_state=0).fit(X)

    def looked_up(*args):
        raise AssertionError("the registry was asked again")

    monkeypatch.setattr(choice.registry, "find", looked_up)
    monkeypatch.setattr(choice.registry, "discover", looked_up)
    again = kmbench.KMeans(n_clusters=4, random_state=0).fit(X)
    fresh = choice.choose("auto", X.dtype)
    assert fresh.name == again.impl_ and fresh is not choice.choose("auto", X.dtype)  # no shared state


def test_scikit_learns_parameter_errors_are_one_sentence():
    X = _blobs()
    for params, message in [({"n_init": 0}, "n_init must be 'auto' or a positive integer"),
                            ({"copy_x": "yes"}, "copy_x must be True or False"),
                            ({"init": "kmeans"}, "init must be one of k-means\\+\\+, random, an array or a callable")]:
        with pytest.raises(ValueError, match=message):
            kmbench.KMeans(**params).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(RuntimeWarning, match="algorithm='elkan' doesn't make sense for a single cluster"):
            kmbench.KMeans(n_clusters=1, algorithm="elkan").fit(X)


def test_kmbench_cpu_halts_before_an_iteration_that_empties_a_cluster():
    """Problem.halt_on_empty, which kmbench.KMeans sets for a whole run: the run ends with the
    centroids it had before that iteration, and says a cluster would have emptied."""
    from impls.cpu.kmbench_cpu import KmbenchCpu
    from kmbench.protocol import Problem, usable

    row = KmbenchCpu()
    if not usable(row)[0]:
        pytest.skip(f"kmbench-cpu cannot run here: {usable(row)[1]}")
    X = make_blobs(n_samples=2_000, n_features=8, centers=20, random_state=0)[0].astype(np.float32)
    start = X[np.random.default_rng(0).choice(len(X), 20, replace=False)]
    whole = Problem(data=X, initial_centroids=start, iterations=30, warmup=0, repeats=1)
    row.prepare(whole)
    try:
        full = row.run(whole)
        halted = row.run(replace(whole, halt_on_empty=True))
        again = row.run(replace(whole, iterations=halted.iterations))
    finally:
        row.release()
    assert full.emptied and full.iterations == 30
    assert halted.emptied and halted.iterations < 30
    np.testing.assert_array_equal(halted.centroids, again.centroids)  # where it stopped: the iterations before
    assert not again.emptied


def test_a_cluster_with_nowhere_to_go_ends_the_whole_runs_at_max_iter(monkeypatch):
    """Points exactly at three of five centres and tol=None: the relocating step moves nothing,
    so every later iteration is the same one. kmbench-cpu's whole runs end there, counting
    max_iter iterations as stepping would, without a process an iteration (a review's case)."""
    from impls.cpu.kmbench_cpu import KmbenchCpu

    runs = []
    real_run = KmbenchCpu.run
    monkeypatch.setattr(KmbenchCpu, "run", lambda self, problem: runs.append(1) or real_run(self, problem))
    X = np.repeat(np.array([[0, 0], [1, 0], [0, 1]], dtype=np.float32), 20, axis=0)
    start = np.array([[0, 0], [1, 0], [0, 1], [5, 5], [6, 6]], dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = kmbench.KMeans(n_clusters=5, impl="kmbench-cpu", init=start, tol=None, max_iter=300).fit(X)
    assert model.n_iter_ == 300 and model.impl_ == "kmbench-cpu" and len(runs) <= 2
    np.testing.assert_array_equal(model.cluster_centers_, start)


def test_auto_says_once_why_kmbench_cpu_cannot_run(monkeypatch):
    """A user whose $CXX is wrong got the numpy row, 3.7x scikit-learn's time, without a word.
    Where the compiled extension is missing too (an install without a compiler), both are said."""
    from kmbench.estimator import inprocess

    monkeypatch.setenv("CXX", "/nonexistent/g++")
    monkeypatch.setattr(choice, "_WARNED", set())
    monkeypatch.setitem(sys.modules, "kmbench.estimator._inproc_portable", None)  # its import fails, as unbuilt
    monkeypatch.delattr(sys.modules["kmbench.estimator"], "_inproc_portable", raising=False)
    monkeypatch.setattr(inprocess, "MODULE", inprocess._load()[0])
    monkeypatch.setattr(inprocess, "MISSING", inprocess._load()[1])
    monkeypatch.setattr(inprocess, "_SAID", set())
    choice._row_class.cache_clear()
    try:
        with pytest.warns(UserWarning) as said:
            model = kmbench.KMeans(n_clusters=3, random_state=0).fit(_blobs())
        said = " ".join(str(warning.message) for warning in said)
        assert "kmbench's compiled extension is not built" in said
        assert re.search(r"kmbench-cpu cannot run here \(CXX=/nonexistent/g\+\+ is not an", said)
        assert model.impl_ == "numpy"
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # said once a process: not for weighted fits, nor float32
            kmbench.KMeans(n_clusters=3, random_state=0).fit(_blobs())
            weighted = kmbench.KMeans(n_clusters=3, random_state=0).fit(_blobs(), sample_weight=np.arange(600) + 1.0)
            kmbench.KMeans(n_clusters=3, random_state=0).fit(_blobs().astype(np.float32))
        assert weighted.impl_ == lloyd.OWN
    finally:
        choice._row_class.cache_clear()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_cluster_of_weight_zero_is_empty_as_scikit_learn_counts_it(dtype):
    """Five points of weight 0 far away, a starting centre on them: the cluster has points but no
    weight, so scikit-learn relocates it. kmbench-cpu counted it empty by its points, kept the
    centre there, and ended after 2 iterations where scikit-learn ran 10 (found in review)."""
    rng = np.random.default_rng(0)
    X = np.vstack([rng.standard_normal((300, 2)), rng.standard_normal((300, 2)) + 8,
                   rng.standard_normal((5, 2)) * 0.1 + [40, -40]]).astype(dtype)
    weights = rng.uniform(0.5, 2, len(X))
    weights[-5:] = 0.0
    start = np.array([[0.0, 0.0], [8.0, 8.0], [40.0, -40.0]], dtype=dtype)
    theirs = SklearnKMeans(n_clusters=3, init=start, n_init=1).fit(X, sample_weight=weights)
    ours = kmbench.KMeans(n_clusters=3, init=start, impl="kmbench-cpu").fit(X, sample_weight=weights)
    assert ours.impl_ == "kmbench-cpu" and ours.n_iter_ == theirs.n_iter_
    np.testing.assert_array_equal(ours.labels_, theirs.labels_)
    np.testing.assert_allclose(ours.cluster_centers_, theirs.cluster_centers_, atol=1e-5 if dtype == np.float32 else 1e-9)

