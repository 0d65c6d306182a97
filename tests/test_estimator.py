"""kmbench.KMeans: scikit-learn's estimator checks, pipelines, grid search, and any backend."""

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import kmbench
from kmbench.protocol import reference
from tests.conftest import blob_data


def _failing_in_sklearn_too(estimator):
    """The checks scikit-learn expects its own KMeans to fail (its _test_common's
    PER_ESTIMATOR_XFAIL_CHECKS): a seeding that draws by weight is not one that draws repeated rows."""
    reason = "sample_weight is not equivalent to removing/repeating samples (as in scikit-learn's KMeans)"
    return {"check_sample_weight_equivalence_on_dense_data": reason,
            "check_sample_weight_equivalence_on_sparse_data": reason}


@parametrize_with_checks([kmbench.KMeans(impl="numpy"), kmbench.KMeans()], expected_failed_checks=_failing_in_sklearn_too)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def _data():
    return blob_data(np.random.default_rng(31), n=900, d=3, k=4).astype(np.float64)


@pytest.mark.parametrize("impl", ["numpy", "cpp", "sklearn", "scipy"])
def test_any_cpu_implementation_backs_it_and_agrees_with_the_oracle(impl):
    X = _data()
    start = X[[0, 300, 600, 899]]
    model = kmbench.KMeans(n_clusters=4, impl=impl, init=start, max_iter=15, tol=None).fit(X)
    expected = reference.lloyd(X, start, 15).centroids
    if impl == "sklearn":  # stops when no label changes; the answer is the same fixed point
        assert model.n_iter_ <= 15
    else:
        assert model.n_iter_ == 15
    np.testing.assert_allclose(model.cluster_centers_, expected, rtol=1e-5, atol=1e-5)
    assert model.labels_.shape == (900,) and model.inertia_ == pytest.approx(-model.score(X))
    np.testing.assert_array_equal(model.predict(X), model.labels_)
    assert model.transform(X).shape == (900, 4)


@pytest.mark.parametrize("impl", ["numpy", "auto"])
@pytest.mark.parametrize("tol", [1e-4, 1e-2, 0.0])
def test_default_stop_rule_runs_the_iterations_scikit_learn_runs(impl, tol):
    """scikit-learn's rule (the centroids' squared shift against tol x the mean variance): the
    same data and start take as many iterations as sklearn's own Lloyd. Before, tol was a
    fraction of changed labels, and a fit ran 97 iterations where sklearn's ran 17."""
    from sklearn.cluster import KMeans as SklearnKMeans

    rng = np.random.default_rng(7)
    X = blob_data(rng, n=20_000, d=2, k=6).astype(np.float64)
    start = X[rng.choice(len(X), 6, replace=False)]
    ours = kmbench.KMeans(n_clusters=6, impl=impl, init=start, tol=tol).fit(X)
    theirs = SklearnKMeans(n_clusters=6, init=start, n_init=1, algorithm="lloyd", tol=tol).fit(X)
    assert 2 < theirs.n_iter_ < 300  # the rule, not max_iter, ended sklearn's fit
    assert ours.n_iter_ == theirs.n_iter_
    np.testing.assert_allclose(ours.cluster_centers_, theirs.cluster_centers_, rtol=1e-4, atol=1e-4)


def test_the_same_fit_in_one_run_without_a_tolerance():
    X = _data()
    stepped = kmbench.KMeans(n_clusters=4, impl="numpy", tol=1e-4, random_state=0).fit(X)
    whole = kmbench.KMeans(n_clusters=4, impl="numpy", tol=None, max_iter=stepped.n_iter_, random_state=0).fit(X)
    np.testing.assert_allclose(stepped.cluster_centers_, whole.cluster_centers_, rtol=1e-12)


def test_same_random_state_same_answer_for_every_backend():
    X = _data()
    fits = [kmbench.KMeans(n_clusters=4, impl=name, random_state=5, tol=0.0).fit(X) for name in ("numpy", "cpp")]
    np.testing.assert_allclose(fits[0].cluster_centers_, fits[1].cluster_centers_, rtol=1e-6)


def test_pipeline_and_grid_search():
    X = _data()
    pipeline = make_pipeline(StandardScaler(), kmbench.KMeans(impl="numpy", random_state=0))
    search = GridSearchCV(pipeline, {"kmeans__n_clusters": [2, 4, 6]}, cv=3).fit(X)
    assert search.best_params_["kmeans__n_clusters"] == 6  # score is -inertia: more clusters, higher
    assert search.predict(X).shape == (900,)


def test_the_default_backend_is_the_fastest_that_runs_here_in_the_datas_precision():
    """Before, the default was kmbench-gpu, and KMeans() failed on every machine without a GPU;
    and float64 data were computed in float32 by kmbench-cpu (issue 51), then by numpy's
    row only (3.5x scikit-learn's time), until kmbench-cpu computed float64 in float64. A small
    float32 fit stays on the CPU even where a GPU runs (the copy there would cost more than it
    saves: on_gpu.GPU_FROM_WORK)."""
    from impls.cpu.kmbench_cpu import KmbenchCpu

    model = kmbench.KMeans(n_clusters=4, random_state=0).fit(_data().astype(np.float32))
    on_cpu = "kmbench-cpu" if KmbenchCpu().available()[0] else "numpy"
    assert model.impl_ == on_cpu
    # float64: kmbench-cpu computes in it; kmbench-gpu (float32) is passed over.
    assert kmbench.KMeans(n_clusters=4, random_state=0).fit(_data()).impl_ == on_cpu


def test_unknown_or_unavailable_backend_is_a_clear_error():
    X = _data()
    with pytest.raises(ValueError, match="Unknown implementation 'nope'"):
        kmbench.KMeans(n_clusters=2, impl="nope").fit(X)
    with pytest.raises(ValueError, match="serves the batched task"):
        kmbench.KMeans(n_clusters=2, impl="batched-numpy").fit(X)
    from impls.gpu.cuda import cuda_status

    if not cuda_status()[0]:
        with pytest.raises(RuntimeError, match="cannot run here"):
            kmbench.KMeans(n_clusters=2, impl="cuda-v3").fit(X)


@pytest.mark.gpu
def test_gpu_backend():
    X = _data().astype(np.float32)
    model = kmbench.KMeans(n_clusters=4, impl="kmbench-gpu", random_state=0, tol=0.0).fit(X)
    cpu = kmbench.KMeans(n_clusters=4, impl="numpy", random_state=0, tol=0.0).fit(X)
    np.testing.assert_allclose(model.cluster_centers_, cpu.cluster_centers_, rtol=1e-4, atol=1e-4)


def test_the_docstrings_example_gives_what_it_shows():
    import doctest

    import kmbench.estimator

    ran = doctest.testmod(kmbench.estimator, verbose=False)
    assert ran.attempted > 0 and ran.failed == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_tolerance_is_scikit_learns_number(dtype):
    """The stop rule compares the centres' shift with scikit-learn's own absolute tolerance, to the
    bit, in either precision (computed in float64 it differed for float32 data)."""
    from sklearn.cluster._kmeans import _tolerance

    from kmbench.estimator import lloyd

    X = (np.random.default_rng(3).standard_normal((5_000, 7)) * 3 + 11).astype(dtype)
    assert lloyd.tolerance(X, 1e-4) == float(_tolerance(X, 1e-4))
    assert lloyd.tolerance(X, None) is None and lloyd.tolerance(X, 0) == 0


@pytest.mark.parametrize("copy_x", [True, False])
def test_labels_and_inertia_are_those_of_the_samples_as_given(copy_x):
    """fit centres the data and adds the mean back, which can move a float32 sample's last bit; the
    labels and inertia it keeps are those of the samples as given, so labels_ is predict(X)'s and
    inertia_ is -score(X) to the bit (a new user saw 19596.243759 against -19596.243659)."""
    rng = np.random.default_rng(5)
    X = (rng.standard_normal((20_000, 16)) * 0.01 + rng.integers(0, 6, (20_000, 1)) * 300.0).astype(np.float32)
    given = X.copy()
    model = kmbench.KMeans(n_clusters=6, random_state=0, copy_x=copy_x, impl="numpy").fit(X)
    if copy_x:
        assert np.array_equal(X, given)  # the caller's array untouched
    assert np.array_equal(model.labels_, model.predict(X))
    assert model.inertia_ == -model.score(X)
