"""The means side of the judge (kmbench.judge.sums) on points small enough to add up by hand: the
groups' counts, float64 sums, weights (each point's largest summand norm over the anchors a row may
sum from: origin, data mean, old centroid) and squares, the same whichever way the clusters are
summed (a bincount a column up to BINCOUNT_MAX_COLUMNS, a sparse product past it) and for chosen
rows; the means (an empty cluster keeps its centroid), the kept-centroid bound and the boxes."""

import numpy as np
import pytest

from kmbench.judge.points import Geometry
from kmbench.judge.precision import FLOAT32, gamma
from kmbench.judge.sums import (BINCOUNT_MAX_COLUMNS, Groups, chosen_chunks, cluster_sum_factors, group, kept_bound,
                                rounding_bound, widen_boxes)


def _by_hand(data, labels, previous, mean):
    """counts, sums, weights and squares, one point at a time."""
    k = previous.shape[0]
    counts, sums, weights, squares = np.zeros(k), np.zeros((k, data.shape[1])), np.zeros(k), np.zeros(k)
    for x, j in zip(data, labels):
        counts[j] += 1
        sums[j] += x
        weights[j] += max(np.linalg.norm(x), np.linalg.norm(x - mean), np.linalg.norm(x - previous[j]))
        squares[j] += ((x - previous[j]) ** 2).sum()
    return counts, sums, weights, squares


@pytest.mark.parametrize("d, k", [(2, 4), (BINCOUNT_MAX_COLUMNS + 1, 4), (2, 70)])
def test_groups_are_the_points_added_up_by_label(d, k):
    rng = np.random.default_rng(d)
    data = rng.integers(-20, 20, (40, d)).astype(np.float64)
    data[:, 0] += 100  # far from the origin, so each anchor wins for some point
    previous = np.vstack([data[:3] + 0.5, np.full((k - 3, d), -50.0)])  # clusters from 3 on get no point
    labels = rng.integers(0, 3, 40)
    groups = group(data, labels, previous, Geometry.of(data), np)
    for got, want in zip((groups.counts, groups.sums, groups.weights, groups.squares), _by_hand(data, labels, previous, data.mean(axis=0))):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    assert groups.inertia() == pytest.approx(groups.squares.sum(), rel=1e-15)
    means, filled = groups.means(previous, np)
    assert filled.tolist() == [True, True, True] + [False] * (k - 3)
    np.testing.assert_allclose(means[:3], groups.sums[:3] / groups.counts[:3, None], rtol=1e-15)
    assert np.array_equal(means[3:], previous[3:])  # an empty cluster keeps its centroid
    rows, own = np.array([5, 1, 5, 30]), np.array([3, 0, 2, 3])  # chosen rows (a repeat), labels of their own
    chosen = group(data, own, previous, Geometry.of(data), np, rows=rows)
    for got, want in zip((chosen.counts, chosen.sums, chosen.weights, chosen.squares),
                         _by_hand(data[rows], own, previous, data.mean(axis=0))):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_means_are_float64_a_lone_point_is_its_own_mean_and_the_centroids_given_stay_as_they_were():
    data = np.array([[1.0, 2.0], [3.0, 5.0], [10.0, 10.0]])
    previous = np.array([[0.0, 0.0], [9.0, 9.0], [-7.0, 1.0]], dtype=np.float32)
    before = previous.copy()
    groups = group(data, np.array([0, 0, 1]), previous.astype(np.float64), Geometry.of(data), np)
    for given in (previous, previous.astype(np.float64)):
        means, filled = groups.means(given, np)
        assert means.dtype == np.float64 and filled.tolist() == [True, True, False]
        assert means.tolist() == [[2.0, 3.5], [10.0, 10.0], [-7.0, 1.0]]
        assert np.array_equal(given, before)


def test_a_kept_centroid_may_move_twice_its_stored_rounding():
    previous = np.array([[3.0, 4.0], [0.0, 0.0]])
    np.testing.assert_allclose(kept_bound(previous, FLOAT32, np), [2 * 2.0 ** -24 * 5, 0.0], rtol=1e-15)


def test_the_sum_factor_adds_the_judges_own_float64_sum_and_an_empty_cluster_counts_as_one():
    counts = np.array([0.0, 1.0, 1000.0])
    want = [gamma(m + 2, 2.0 ** -24) + 2.0 ** -24 + gamma(m + 2, 2.0 ** -53) for m in (1, 1, 1000)]
    np.testing.assert_allclose(cluster_sum_factors(counts, FLOAT32, np), want, rtol=1e-15)


def test_a_lone_points_mean_is_bounded_by_its_own_weight_not_half_of_it():
    """NOTES.md, "Means": G(count) * weights / count + 3 store |mean|, per cluster; a cluster of one
    point divides by 1, an empty one (no weight) keeps only the stored rounding of its centroid."""
    groups = Groups(counts=np.array([1.0, 4.0, 0.0]), sums=None, weights=np.array([5.0, 8.0, 0.0]))
    means = np.array([[3.0, 4.0], [0.0, 1.0], [6.0, 8.0]])
    factors = cluster_sum_factors(groups.counts, FLOAT32, np)
    want = factors * np.array([5.0, 2.0, 0.0]) + 3 * 2.0 ** -24 * np.array([5.0, 1.0, 10.0])
    np.testing.assert_allclose(rounding_bound(groups, means, FLOAT32, np), want, rtol=1e-15)


def test_boxes_widen_to_hold_every_row_of_their_cluster():
    low, high = np.full((3, 2), np.inf), np.full((3, 2), -np.inf)
    low[2], high[2] = [0.0, 0.0], [1.0, 1.0]
    x = np.array([[1.0, 5.0], [-2.0, 3.0], [4.0, 4.0], [0.5, 7.0]])
    widen_boxes(low, high, np.array([1, 1, 2, 1]), x, np)  # cluster 0 has no row here
    assert low.tolist() == [[np.inf, np.inf], [-2.0, 3.0], [0.0, 0.0]]
    assert high.tolist() == [[-np.inf, -np.inf], [1.0, 7.0], [4.0, 4.0]]


def test_chosen_rows_come_in_float64_with_their_labels_a_bounded_chunk_at_a_time(monkeypatch):
    """With no geometry, one that holds every row, and one that holds nothing (over its cache)."""
    from kmbench.judge import points
    from kmbench.protocol import residence

    monkeypatch.setattr(residence, "CHUNK_ELEMENTS", 6)  # 3 rows of d = 2 a chunk
    data = np.arange(20, dtype=np.float32).reshape(10, 2)
    rows, labels = np.array([9, 0, 9, 4, 7]), np.array([1, 2, 3, 4, 5])
    holding = Geometry.of(data)
    monkeypatch.setattr(points, "CACHE_BYTES", 0)
    empty = Geometry.of(data)
    assert holding.full is not None and empty.full is None and empty.norms is None
    for geometry in (None, holding, empty):
        chunks = list(chosen_chunks(data, rows, labels, np, geometry))
        assert [len(own) for _, own in chunks] == [3, 2]
        x = np.concatenate([x for x, _ in chunks])
        assert x.dtype == np.float64 and np.array_equal(x, data[rows])
        assert np.concatenate([own for _, own in chunks]).tolist() == [1, 2, 3, 4, 5]


def test_groups_in_small_chunks_from_a_geometry_that_holds_nothing_are_the_same(monkeypatch):
    """Chunks of 3 rows (the labels sliced with them) and points made from the data as they come."""
    from kmbench.judge import points
    from kmbench.protocol import residence

    rng = np.random.default_rng(7)
    data = rng.integers(-9, 9, (20, 2)).astype(np.float64)
    previous, labels = data[:3] + 0.25, rng.integers(0, 3, 20)
    want = group(data, labels, previous, Geometry.of(data), np)
    monkeypatch.setattr(residence, "CHUNK_ELEMENTS", 6)
    monkeypatch.setattr(points, "CACHE_BYTES", 0)
    for rows in (None, np.arange(20)):
        got = group(data, labels, previous, Geometry.of(data), np, rows=rows)
        for name in ("counts", "sums", "weights", "squares"):
            np.testing.assert_allclose(getattr(got, name), getattr(want, name), rtol=1e-12, err_msg=name)
