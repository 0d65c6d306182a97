import numpy as np

from kmbench.protocol import reference
from tests.conftest import blob_data


def loop_lloyd(data, centroids, iterations):
    """The slowest possible statement of Lloyd's algorithm, to check the oracle against."""
    data = data.astype(np.float64)
    centroids = centroids.astype(np.float64).copy()
    for _ in range(iterations):
        sums = np.zeros_like(centroids)
        counts = np.zeros(len(centroids))
        for point in data:
            best = min(range(len(centroids)), key=lambda j: ((point - centroids[j]) ** 2).sum())
            sums[best] += point
            counts[best] += 1
        for j in range(len(centroids)):
            if counts[j]:
                centroids[j] = sums[j] / counts[j]
    return centroids


def test_reference_matches_loop_statement(rng):
    data = blob_data(rng, n=300, d=3, k=4)
    start = data[rng.choice(len(data), 4, replace=False)]
    run = reference.lloyd(data, start, 7)
    got, labels = run.centroids, run.labels
    np.testing.assert_allclose(got, loop_lloyd(data, start, 7), rtol=1e-12, atol=1e-12)
    assert labels.shape == (300,)


def test_empty_cluster_keeps_its_centroid(rng):
    data = blob_data(rng, n=200, d=2, k=2)
    far = np.array([[1e6, 1e6]])
    start = np.vstack([data[:2], far])
    run = reference.lloyd(data, start, 5)
    got, labels = run.centroids, run.labels
    assert not (labels == 2).any()
    np.testing.assert_array_equal(got[2], far[0])


def test_chunking_does_not_change_the_result(rng, monkeypatch):
    data = blob_data(rng, n=1000, d=2, k=5)
    start = data[:5]
    whole = reference.lloyd(data, start, 10).centroids
    monkeypatch.setattr(reference, "CHUNK_ELEMENTS", 37)  # many ragged chunks
    chunked = reference.lloyd(data, start, 10).centroids
    np.testing.assert_array_equal(whole, chunked)


def test_inertia_is_sum_of_nearest_squared_distances(rng):
    data = blob_data(rng, n=50, d=2, k=3).astype(np.float64)
    centroids = data[:3]
    expected = sum(min(((p - c) ** 2).sum() for c in centroids) for p in data)
    assert np.isclose(reference.inertia(data, centroids), expected, rtol=1e-12)


def test_high_d_distances_are_exact_enough_far_from_the_origin():
    """Above EXPANDED_FROM_DIM the oracle expands the distance on centred coordinates: against
    the direct sum of squared differences it stays within 1e-9 of the spread squared, even
    with the data a million spreads from the origin."""
    from kmbench.protocol.reference import EXPANDED_FROM_DIM, squared_distances

    rng = np.random.default_rng(3)
    d = EXPANDED_FROM_DIM + 7
    points = rng.standard_normal((300, d)) + 1e6
    centroids = rng.standard_normal((20, d)) + 1e6
    direct = ((points[:, None, :] - centroids[None, :, :]) ** 2).sum(axis=2)
    assert np.abs(squared_distances(points, centroids) - direct).max() <= 1e-9 * d
