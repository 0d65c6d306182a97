"""The certifier of one Lloyd step (kmbench.judge.certify), on problems small enough to check by
hand: what it decides with and without labels, what its failures say, the figures a step
reports (near-ties by the way they went, the share of labels not admissible, whether the step
is float64's), and the float64 reference it walks (the check without labels:
test_judge_certify_labelless.py). Each case is one a slip in certify.py would
decide differently (mutmut's survivors, `make mutate-judge-generated`)."""

import numpy as np
import pytest

from kmbench.judge import certify
from kmbench.judge.certify import Certifier, Failure
from kmbench.judge.precision import declared

# Problem A (float32): two clusters a unit apart and a point on their bisector (a near-tie: not
# integers, so no exact-tie rule), and a third cluster far off. Scaled by 0.02, so that its spread
# is below 1 (a failure's figures are in spreads).
A_DATA = 0.02 * np.array([[0.5, 2.5], [1.5, 3.5], [10.5, 2.0], [12.0, 4.0], [6.0, 3.0], [51.0, 56.0], [53.0, 58.0]])
A_START = 0.02 * np.array([[1.0, 3.0], [11.0, 3.0], [52.0, 57.0]])
A_TIE = 4  # the point on the bisector of centroids 0 and 1


def means_of(data, labels, previous):
    """The exact means (float64 rounding only) of the labelled points; empty clusters kept."""
    out = np.array(previous, dtype=np.float64)
    for j in range(out.shape[0]):
        if (labels == j).any():
            out[j] = data[labels == j].mean(axis=0)
    return out


@pytest.fixture
def a_problem():
    certifier = Certifier.of(A_DATA, declared("float32"))
    found = certifier.scan(1, A_START)
    assert not found.unique[A_TIE] and found.unique.sum() == A_DATA.shape[0] - 1  # one near-tie, as built
    assert certifier.spread < 1
    return certifier, found.nearest.astype(np.int64)


# --- with labels: what is checked, and what a step reports ---

@pytest.mark.parametrize("wrong", ["shape", "minus one", "k"])
def test_labels_of_the_wrong_shape_or_out_of_range_are_one_assignment_failure(a_problem, wrong):
    certifier, nearest = a_problem
    labels = {"shape": nearest[:-1], "minus one": np.r_[nearest[:-1], -1], "k": np.r_[nearest[:-1], 3]}[wrong]
    result = certifier.step(5, A_START, means_of(A_DATA, nearest, A_START), labels)
    assert result.failure == Failure(5, "assignment", text=f"labels of shape {labels.shape} or out of range 0..2")


def test_a_near_tie_with_labels_is_counted_by_the_way_it_went(a_problem):
    certifier, nearest = a_problem
    same = certifier.step(2, A_START, means_of(A_DATA, nearest, A_START), nearest)
    assert same.failure is None and same.as_float64 is True
    assert (same.near_ties, same.ties_as_float64, same.ties_other_way, same.inadmissible) == (1, 1, 0, 0.0)
    assert same.unbounded == 0
    other = nearest.copy()
    other[A_TIE] = 1 - nearest[A_TIE]  # the other admissible label
    away = certifier.step(2, A_START, means_of(A_DATA, other, A_START), other)
    assert away.failure is None and away.as_float64 is False
    assert (away.near_ties, away.ties_as_float64, away.ties_other_way, away.inadmissible) == (1, 0, 1, 0.0)


def test_a_mean_off_by_more_than_its_rounding_fails_and_is_not_the_float64_step(a_problem):
    certifier, nearest = a_problem
    new = means_of(A_DATA, nearest, A_START)
    new[2, 1] += 0.01
    result = certifier.step(4, A_START, new, nearest)
    assert result.as_float64 is False
    failure = result.failure
    assert (failure.iteration, failure.check, failure.where) == (4, "means", "centroid 2")
    assert failure.amount == pytest.approx(0.01 / certifier.spread, rel=1e-6)
    assert 0 < failure.allowance < 1e-4
    assert failure.text == "it is not the mean of the points it labelled to the rounding of a float32 sum"


def test_of_several_centroids_off_the_failure_names_the_one_farthest_past_its_own_bound(a_problem):
    """Centroid 0 (near the origin: a bound of about 1.8e-7) off by 1e-5 is 55 bounds past it;
    centroid 2 (0.07 from the origin: about 7.4e-7) off by 3e-5 is 40: centroid 0 is named."""
    certifier, nearest = a_problem
    new = means_of(A_DATA, nearest, A_START)
    new[0, 0] += 1e-5
    new[2, 0] += 3e-5
    failure = certifier.step(1, A_START, new, nearest).failure
    assert failure.where == "centroid 0" and failure.amount == pytest.approx(1e-5 / certifier.spread, rel=1e-6)


def test_a_cluster_too_large_for_a_sum_bound_is_counted_and_hides_no_other_centroid():
    """A precision of 8-bit units has no worst-case sum bound from 126 points a cluster on
    (gamma_128 = 1/2): cluster 0's 130 points are not checked, and counted; cluster 1's mean is."""
    from kmbench.judge.precision import Precision

    coarse = Precision("coarse", 2.0 ** -8, 2.0 ** -8, 2.0 ** -8, 2.0 ** 8)
    data = np.vstack([np.linspace(-0.5, 0.5, 130)[:, None], [[9.5], [10.0], [10.5]]])
    start = np.array([[0.2], [9.0]])
    certifier = Certifier.of(data, coarse)
    labels = np.r_[np.zeros(130, np.int64), np.ones(3, np.int64)]
    new = np.array([[0.25], [10.0]])  # centroid 0 anywhere: unchecked
    passed = certifier.step(1, start, new, labels)
    assert passed.failure is None and passed.unbounded == 1
    new[1] = 11.0
    failed = certifier.step(1, start, new, labels)
    assert failed.unbounded == 1 and (failed.failure.check, failed.failure.where) == ("means", "centroid 1")


def test_the_share_of_labels_not_admissible_is_reported():
    """Of seven labels one is not admissible: 1/7; of a single point's one label: all of it."""
    certifier = Certifier.of(A_DATA, declared("float32"))
    labels = certifier.scan(1, A_START).nearest.astype(np.int64)
    labels[0] = 2
    result = certifier.step(3, A_START, means_of(A_DATA, labels, A_START), labels)
    assert result.failure.iteration == 3 and result.failure.check == "assignment"
    assert result.inadmissible == pytest.approx(1 / 7, rel=1e-12)
    one = Certifier.of(A_DATA[:1], declared("float32"))
    assert one.step(1, A_START, A_START, np.array([2])).inadmissible == 1.0


def test_an_assignment_failure_names_the_worst_label_and_how_far_it_is_in_spreads(a_problem):
    certifier, nearest = a_problem
    labels = nearest.copy()
    labels[0], labels[5] = 1, 0  # both inadmissible; point 5 (of the far cluster) is the farther off
    result = certifier.step(6, A_START, means_of(A_DATA, labels, A_START), labels)
    x = A_DATA[5]
    excess = ((x - A_START[0]) ** 2).sum() - ((x - A_START[2]) ** 2).sum()
    failure = result.failure
    assert (failure.iteration, failure.check, failure.where) == (6, "assignment", "point 5")
    assert failure.amount == pytest.approx(np.sqrt(excess) / certifier.spread, rel=1e-12)
    assert 0 < failure.allowance < 0.01 * failure.amount
    assert failure.text == "2 label(s) not admissible; point 5 went to 0, its nearest is 2"


def test_an_exact_tie_given_to_the_higher_index_is_named_as_one_and_off_by_nothing():
    """Integer data, centroids and mean: point 2 lies exactly between centroids 0 and 1, and the
    lowest index must win; the row gave it to 1. It is off by 0, and the sentence says why."""
    data = np.array([[0.0, 0.0], [2.0, 0.0], [1.0, 0.0], [4.0, 0.0], [8.0, 0.0]])
    start = np.array([[0.0, 0.0], [2.0, 0.0], [6.0, 0.0]])
    certifier = Certifier.of(data, declared("float32"))
    failure = certifier.step(2, start, start, np.array([0, 1, 1, 1, 2])).failure
    assert (failure.iteration, failure.check, failure.where, failure.amount) == (2, "assignment", "point 2", 0.0)
    assert failure.text == "1 label(s) not admissible; point 2 went to 1, its nearest is 0 " \
                           "(an exact tie: the lowest index wins)"


def test_an_empty_cluster_that_moved_fails_with_its_reason():
    start = np.vstack([A_START, [[-3.0, 4.0]]])  # a fourth centroid no point is near
    certifier = Certifier.of(A_DATA, declared("float32"))
    labels = certifier.scan(1, start).nearest.astype(np.int64)
    new = means_of(A_DATA, labels, start)
    assert certifier.step(7, start, new, labels).failure is None
    new[3, 0] += 1e-3
    failure = certifier.step(7, start, new, labels).failure
    assert (failure.iteration, failure.check, failure.where) == (7, "empty cluster", "centroid 3")
    assert failure.amount == pytest.approx(1e-3 / certifier.spread, rel=1e-6)
    assert failure.text == "no point may join it, so it keeps its centroid; the row moved it"


def test_an_empty_cluster_kept_at_the_origin_passes():
    """A kept centroid may move by its stored rounding, 2 u |c|: none at the origin, where it
    moved by none either."""
    data = np.array([[5.0, 5.0], [5.2, 5.0]])
    start = np.array([[5.0, 5.0], [0.0, 0.0]])
    certifier = Certifier.of(data, declared("float32"))
    labels = np.array([0, 0])
    assert certifier.step(1, start, means_of(data, labels, start), labels).failure is None
    assert certifier.step(1, start, means_of(data, labels, start)).failure is None


def test_only_a_timed_end_may_move_an_empty_cluster_by_the_steps_largest_mean_bound(a_problem):
    """An end checked from the trajectory's last-but-one centroids (`end`) gives a frozen empty
    cluster the step's largest mean bound (7.4e-7 here, centroid 2's); a step, only its kept
    bound (1.2e-8 at 0.1 from the origin). Moved by 3e-7, it passes the one and fails the other."""
    certifier, nearest = a_problem
    start = np.vstack([A_START, [[-0.06, 0.08]]])
    new = means_of(A_DATA, nearest, start)
    new[3, 0] += 3e-7
    assert certifier.step(1, start, new, nearest, end=True).failure is None
    assert certifier.step(1, start, new, end=True).failure is None
    assert certifier.step(1, start, new, nearest).failure.check == "empty cluster"
    assert certifier.step(1, start, new).failure.check == "empty cluster"


def test_a_certifier_holds_rows_to_the_expanded_bound_unless_they_declare_direct_distances():
    """Near 1000 in float32 the expanded form's error (about 3 squared units) makes 1000.6 a
    near-tie of 1000 and 1001; the direct form's (about 2e-4) does not. Undeclared, a row may
    give it to 1000, the farther; declared direct, it may not."""
    data = np.array([[999.9], [1000.6], [1001.1]])
    start = np.array([[1000.0], [1001.0]])
    labels = np.array([0, 0, 1])
    new = means_of(data, labels, start)
    assert Certifier.of(data, declared("float32")).step(1, start, new, labels).failure is None
    failure = Certifier.of(data, declared("float32"), direct=True).step(1, start, new, labels).failure
    assert (failure.check, failure.where) == ("assignment", "point 1")


# --- Failure.sentence: what a record's reader sees ---

@pytest.mark.parametrize("failure, sentence", [
    (Failure(3, "means", "centroid 1", 0.5, 0.25, "why"),
     "iteration 3, means, centroid 1: off by 0.5 spreads where 0.25 is allowed; why"),
    (Failure(0, "end point", text="timed run 1 ended elsewhere"), "end point; timed run 1 ended elsewhere"),
    (Failure(2, "iterations"), "iteration 2, iterations"),
    (Failure(1, "assignment", "point 4", 0.0, 2.0), "iteration 1, assignment, point 4: off by 0 spreads where 2 is allowed"),
])
def test_a_failure_is_one_sentence_with_only_the_parts_it_has(failure, sentence):
    assert failure.sentence() == sentence


# --- digest: the key the judge's inertias are kept under ---

def test_a_digest_is_of_the_centroids_float64_values_and_shape():
    centroids = np.arange(6, dtype=np.float64).reshape(2, 3)
    key = certify.digest(centroids)
    assert certify.digest(centroids.astype(np.float32)) == key  # the same values, whatever their type
    assert certify.digest(centroids.T.copy()) != key and certify.digest(centroids.reshape(3, 2)) != key
    moved = centroids.copy()
    moved[1, 2] = np.nextafter(5.0, 6.0)
    assert certify.digest(moved) != key


# --- the float64 reference the judge walks ---

def test_the_float64_reference_keeps_each_steps_scan_and_its_inertias_scan_for_the_rows():
    """More than 32 centroids: the scans are kept by step (1 to 3), and the scan of the end (for
    its inertia) as step 4, where the rows' steps and inertias start from them."""
    from kmbench.judge.seeds import Bank

    rng = np.random.default_rng(5)
    data = rng.normal(size=(400, 2))
    start = data[:40].copy()
    bank = Bank()
    end, done, _, labels, value = certify.float64_lloyd(data, start, 3, bank=bank)
    assert done == 3 and sorted(bank.by_step) == [1, 2, 3, 4]
    assert all(seed.nearest.shape == (400,) for seed in bank.by_step.values())
    assert certify.inertia(data, end, bank=bank) == value == certify.inertia(data, end)


def test_the_float64_reference_of_no_iteration_is_its_start_in_float64():
    data = np.array([[0.0], [1.0], [5.0]])
    start = np.array([[0.5], [4.0]], dtype=np.float32)
    end, done, emptied, labels, value = certify.float64_lloyd(data, start, 0)
    assert (done, emptied, labels) == (0, 0, None) and np.array_equal(end, start) and end.dtype == np.float64
    assert value == pytest.approx(0.25 + 0.25 + 1.0, rel=1e-15)


def test_the_float64_reference_counts_a_cluster_empty_at_any_step_not_only_the_last():
    """Points 1, 5, 6, 8, 9 from centroids 6, 9, 7: centroid 2 loses every point at the first
    step and wins some back at the second."""
    data = np.array([[1.0], [8.0], [6.0], [9.0], [5.0]])
    start = np.array([[6.0], [9.0], [7.0]])
    first, _, empty_first, _, _ = certify.float64_lloyd(data, start, 1)
    assert empty_first == 1
    assert certify.float64_lloyd(data, first, 1)[2] == 0  # none empty at the second step
    assert certify.float64_lloyd(data, start, 2)[2] == 1


def test_a_step_keeps_its_scan_as_the_trajectorys_last_and_the_banks_unless_told_not_to():
    """More than 32 centroids: step t's scan is kept in the bank under t, and as the
    trajectory's last (where the next step starts from), but not by a check off the trajectory."""
    rng = np.random.default_rng(6)
    data = rng.normal(size=(300, 2))
    start = data[:40].copy()
    certifier = Certifier.of(data, declared("float32"))
    certifier.step(2, start, start)
    assert np.array_equal(certifier.last.centroids, start) and sorted(certifier.bank.by_step) == [2]
    moved = start + 0.01
    certifier.step(3, moved, moved, keep=False)
    assert np.array_equal(certifier.last.centroids, start) and sorted(certifier.bank.by_step) == [2, 3]
