"""The harness's k-means++ seeding (kmbench.protocol.seeding): the same greedy algorithm on NumPy and
CuPy, from the same host draws."""

import numpy as np
import pytest

from kmbench.protocol import runner, seeding


def _separated(n_per=400, centers=12, d=3, offset=0.0, seed=0):
    rng = np.random.default_rng(seed)
    middle = rng.uniform(-100, 100, (centers, d))
    labels = np.repeat(np.arange(centers), n_per)
    data = middle[labels] + rng.standard_normal((labels.size, d)) + offset
    return data.astype(np.float32), labels


def test_picks_distinct_rows_reproducibly_without_touching_the_data():
    data, _ = _separated()
    before = data.copy()
    first = seeding.kmeans_plusplus(data, 12, seed=3)
    np.testing.assert_array_equal(data, before)
    assert first.dtype == data.dtype and first.shape == (12, 3)
    assert len({tuple(row) for row in first}) == 12
    assert all((row == data).all(axis=1).any() for row in first)
    np.testing.assert_array_equal(first, seeding.kmeans_plusplus(data, 12, seed=3))
    assert not np.array_equal(first, seeding.kmeans_plusplus(data, 12, seed=4))


@pytest.mark.parametrize("offset", [0.0, 1e6])
def test_one_centre_per_separated_blob_even_far_from_the_origin(offset):
    # Blobs 100 standard deviations apart: D^2 sampling leaves a covered blob almost no mass.
    data, labels = _separated(offset=offset)
    picked = seeding.kmeans_plusplus(data, 12, seed=0)
    rows = [int(np.flatnonzero((row == data).all(axis=1))[0]) for row in picked]
    assert sorted(labels[rows]) == list(range(12))


def test_problems_record_how_they_were_seeded():
    data, _ = _separated()
    _, how = runner.choose_start(data, 12, "kmeans++", 0)
    assert how["method"] == "kmeans++" and how["device"] in ("cpu (numpy)", "gpu (cupy)")
    assert how["seconds"] >= 0
    _, how = runner.choose_start(data, 12, "random", 0)
    assert how["method"] == "random"


@pytest.mark.gpu
def test_gpu_seeding_picks_what_the_cpu_picks():
    import cupy

    data, _ = _separated(n_per=5000, centers=40, d=16)
    on_cpu = seeding.kmeans_plusplus(data, 40, seed=1, xp=np)
    on_gpu = seeding.kmeans_plusplus(data, 40, seed=1, xp=cupy)
    np.testing.assert_array_equal(on_cpu, on_gpu)


@pytest.mark.parametrize("method", ["kmeans++", "random"])
def test_weighted_draws_never_pick_a_point_of_no_weight(method):
    """kmbench.KMeans's sample weights weigh the draws, as scikit-learn's do; the benchmark's
    seeding (no weights) draws as it did."""
    data, _ = _separated(n_per=50)
    weights = np.random.default_rng(1).uniform(0.5, 2, len(data))
    weights[::2] = 0
    for seed in range(5):
        picked = runner.initial_centroids(data, 10, method, seed, weights)
        rows = [int(np.flatnonzero((data == centre).all(axis=1))[0]) for centre in picked]
        assert all(weights[row] > 0 for row in rows)
    unweighted = runner.initial_centroids(data, 10, method, 3)
    assert np.array_equal(unweighted, runner.initial_centroids(data, 10, method, 3, None))
