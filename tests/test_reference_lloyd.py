"""What the oracle's Lloyd run (kmbench.protocol.reference.lloyd) reports besides its centroids: the
iterations it ran, each one to the progress callback, the clusters some assignment left empty (the
validator's explanations name them), and its float32 model of a careful program: distances, block
sums and stored centroids in float32, checked against the slowest statement of that model."""

import numpy as np
import pytest

from kmbench.protocol import reference


def test_no_iteration_asked_is_none_run():
    start = np.array([[0.0], [5.0]])
    run = reference.lloyd(np.array([[1.0], [4.0]]), start, 0)
    assert run.iterations == 0 and np.array_equal(run.centroids, start)


def test_progress_is_told_each_iteration_done_and_the_total():
    told = []
    reference.lloyd(np.array([[0.0], [1.0], [9.0]]), np.array([[0.0], [9.0]]), 3,
                    progress=lambda done, total: told.append((done, total)))
    assert told == [(1, 3), (2, 3), (3, 3)]


def test_a_cluster_empty_at_the_first_assignment_counts_though_it_fills_later():
    """Points 0 (x4) and 10 (x2), centroids 9 and 12: first every point goes to 9 (12 is empty),
    which moves to 10/3; then both 10s go to 12. One cluster was empty at some assignment."""
    data = np.array([[0.0]] * 4 + [[10.0]] * 2)
    run = reference.lloyd(data, np.array([[9.0], [12.0]]), 3)
    assert run.labels.tolist() == [0, 0, 0, 0, 1, 1]
    assert run.emptied == 1


def test_float32_distances_put_a_point_a_hair_past_a_bisector_on_it():
    """0.5 + 1e-10 is nearer 1 than 0 in float64, but in float32 it is 0.5, an exact tie that goes
    to the lower index."""
    data = np.array([[0.5 + 1e-10], [0.0], [1.0]])
    start = np.array([[0.0], [1.0]])
    assert reference.lloyd(data, start, 1).labels[0] == 1
    assert reference.lloyd(data, start, 1, dtype=np.float32).labels[0] == 0


def test_float32_runs_store_every_centroid_in_float32_even_one_no_point_joins():
    data = np.array([[0.0], [1.0]])
    start = np.array([[0.5], [1000.1]])  # 1000.1 is not a float32
    run = reference.lloyd(data, start, 2, dtype=np.float32)
    assert run.centroids[1, 0] == float(np.float32(1000.1)) != 1000.1


def _careful_float32_step(data, labels, centroids):
    """The float32 model, one point at a time: per block of SUM_BLOCK points, each cluster's sum of
    float32 offsets from its old centroid (summed in float64 in point order, rounded once to float32),
    the block sums added in float32 in block order, the mean offset added to the old centroid."""
    old = centroids.astype(np.float32)
    shifted = np.zeros_like(old)
    for start in range(0, len(data), reference.SUM_BLOCK):
        block = np.zeros(old.shape, dtype=np.float64)
        for i in range(start, min(start + reference.SUM_BLOCK, len(data))):
            block[labels[i]] += data[i].astype(np.float32) - old[labels[i]]
        shifted += block.astype(np.float32)
    counts = np.bincount(labels, minlength=len(old)).astype(np.float32)
    new = centroids.copy()  # an empty cluster keeps its centroid
    new[counts > 0] = (old + shifted / np.maximum(counts, 1)[:, None])[counts > 0]
    return new


def test_float32_sums_are_block_sums_of_offsets_added_in_float32():
    """Three blocks of points about the origin, their centroid starting 1e4 away (a far cluster stays
    empty): the block sums of offsets near -4e7 round in float32, so the careful program's step is not
    the float64 mean rounded to float32, and the oracle's float32 step is the careful one, bit for bit."""
    rng = np.random.default_rng(2)
    data = rng.standard_normal((3 * reference.SUM_BLOCK - 7, 2)).astype(np.float32)
    start = np.array([[1e4 + 0.3, 1e4 + 0.3], [-1e6, -1e6]])  # 1e4 + 0.3 is not a float32
    run = reference.lloyd(data, start, 1, dtype=np.float32)
    want = _careful_float32_step(data, run.labels, start)
    assert np.array_equal(run.centroids, want)
    float64_rounded = reference.update(data, run.labels, start).astype(np.float32).astype(np.float64)
    assert not np.array_equal(want, float64_rounded)  # the case tells the two apart


def test_float64_means_are_sums_of_the_points_not_of_offsets_from_a_far_centroid():
    """Points 0 and 1, their old centroid 1e17 away (where float64's step is 16): their mean is 0.5,
    not what offsets of -1e17 (1 lost in each) would give."""
    new = reference.update(np.array([[0.0], [1.0]]), np.array([0, 0]), np.array([[1e17]]))
    assert new.tolist() == [[0.5]]


def test_previous_is_where_the_last_assignment_started():
    """A run's `previous` is the centroids before its last iteration: three iterations' previous is
    two iterations' result, and the run's labels are that assignment."""
    data = np.array([[0.0], [1.0], [4.0], [9.0], [10.0]])
    start = np.array([[0.0], [1.0]])
    two, three = reference.lloyd(data, start, 2), reference.lloyd(data, start, 3)
    assert not np.array_equal(two.centroids, start)  # the premise: the centroids moved
    assert np.array_equal(three.previous, two.centroids)
    assert np.array_equal(three.labels, reference.nearest(data, three.previous)[0])


@pytest.mark.parametrize("dtype", [None, np.float32])
def test_a_cluster_of_one_point_moves_onto_it_and_an_empty_one_stays(dtype):
    """One point, two clusters: the point's cluster is that point (in float32 too: its offset is one
    partial block of SUM_BLOCK rows); the other cluster keeps its centroid."""
    new = reference.update(np.array([[3.0, 4.0]]), np.array([0]), np.array([[0.0, 0.0], [9.0, 9.0]]), dtype=dtype)
    assert new.tolist() == [[3.0, 4.0], [9.0, 9.0]]
