"""The certifier's check of a step whose row reports no labels (kmbench.judge.certify,
NOTES.md "Without labels"), on a problem small enough to check by hand: the clear points fix each
mean to within the reach of the ambiguous points that may join it, and the new mean lies in the
box of the clear mean and those points; both pair by pair and bounded at large, at their edges."""

import numpy as np
import pytest

from kmbench.judge import certify
from kmbench.judge.certify import Certifier, Failure
from kmbench.judge.precision import declared
from tests.test_judge_certify import means_of

# Problem W (float32): twelve clear points around centroid 0, three on the bisector of centroids 0
# and 1 (near-ties: each may join either), four clear points around centroid 1, two around 2.
W_CLEAR0 = [[0.0, 0.1], [0.2, 0.1], [0.1, 0.0], [0.1, 0.2]] * 3
W_TIED = [[0.6, 0.1], [0.6, 0.3], [0.6, -0.2]]
W_DATA = 0.1 * np.array(W_CLEAR0 + W_TIED + [[1.0, 0.1], [1.2, 0.1], [1.1, 0.0], [1.1, 0.2], [3.0, 3.1], [3.2, 3.1]])
W_START = 0.1 * np.array([[0.1, 0.1], [1.1, 0.1], [3.1, 3.1]])
W_FIXED0 = W_START[0]  # the mean of centroid 0's clear points
W_AMBIGUOUS = np.arange(12, 15)


def w_step(centroid0=None, ambiguous_to=0, iteration=1):
    """The step of a row that gives the ambiguous points to `ambiguous_to`, its centroid 0 moved
    to `centroid0` where given; certified without labels."""
    certifier = Certifier.of(W_DATA, declared("float32"))
    found = certifier.scan(iteration, W_START)
    assert np.array_equal(np.nonzero(~found.unique)[0], W_AMBIGUOUS)  # as built
    labels = found.nearest.astype(np.int64)
    labels[W_AMBIGUOUS] = ambiguous_to
    new = means_of(W_DATA, labels, W_START)
    if centroid0 is not None:
        new[0] = centroid0
    return certifier.step(iteration, W_START, new).failure


def reach_of_the_pairs():
    """NOTES.md, "Without labels": the ambiguous points' summed distance from the clear mean,
    over the clear points' count (the rounding terms are 1e-7 of it)."""
    return np.sqrt(((W_DATA[W_AMBIGUOUS] - W_FIXED0) ** 2).sum(axis=1)).sum() / 12


def reach_at_large():
    """The same bounded at large: |A_j| (R + |mean(F_j) - m|) / |F_j|, R the ambiguous points'
    largest distance from the data's mean m."""
    m = W_DATA.mean(axis=0)
    radius = np.sqrt(((W_DATA[W_AMBIGUOUS] - m) ** 2).sum(axis=1)).max()
    return 3 * (radius + np.sqrt(((W_FIXED0 - m) ** 2).sum())) / 12


BOX_FAILURE = "it lies outside the box of its clear points' mean and the ambiguous points that may join it"
REACH_FAILURE = "it is not within reach of the mean of its clear points to the rounding of a float32 sum"


@pytest.mark.parametrize("at_large", [False, True])
def test_without_labels_rows_that_take_the_ambiguous_points_either_way_pass(monkeypatch, at_large):
    if at_large:
        monkeypatch.setattr(certify, "PAIR_ELEMENTS", 0)
    assert w_step(ambiguous_to=0) is None and w_step(ambiguous_to=1) is None


@pytest.mark.parametrize("at_large", [False, True])
def test_without_labels_a_centroid_beyond_the_ambiguous_points_reach_fails(monkeypatch, at_large):
    """Inside the box, but farther from the clear mean than the ambiguous points could pull it."""
    if at_large:
        monkeypatch.setattr(certify, "PAIR_ELEMENTS", 0)
    reach = reach_at_large() if at_large else reach_of_the_pairs()
    assert w_step(W_FIXED0 + [0.98 * reach, 0.0]) is None
    failure = w_step(W_FIXED0 + [1.02 * reach, 0.0], iteration=3)
    assert (failure.iteration, failure.check, failure.where, failure.text) == (3, "means", "centroid 0", REACH_FAILURE)


@pytest.mark.parametrize("at_large, outside", [(False, "below x"), (True, "below x"), (True, "above y")])
def test_without_labels_a_centroid_within_reach_but_outside_the_box_fails(monkeypatch, at_large, outside):
    """The box of the clear mean (0.01, 0.01) and the ambiguous points (x = 0.06, y from -0.02
    to 0.03): a centroid left of x = 0.01, or above y = 0.03, is no mean of them (the tight
    reach, 0.0135, leaves no room above y = 0.03: only the reach at large does)."""
    if at_large:
        monkeypatch.setattr(certify, "PAIR_ELEMENTS", 0)
    centroid = np.array({"below x": [0.01 - 0.005, 0.01], "above y": [0.01, 0.035]}[outside])
    reach = reach_at_large() if at_large else reach_of_the_pairs()
    assert np.sqrt(((centroid - W_FIXED0) ** 2).sum()) < 0.98 * reach  # within reach, as built
    failure = w_step(centroid, iteration=2)
    assert failure == Failure(2, "means", "centroid 0", text=BOX_FAILURE)


def test_without_labels_the_pairs_are_visited_up_to_the_limit_and_bounded_at_large_past_it(monkeypatch):
    """Six (point, centroid) pairs of two coordinates: 12 pair-coordinates. At a limit of 12 they
    are visited (the tight reach); at 11 they are bounded at large, which lets a centroid at 1.02
    times the tight reach through."""
    beyond = W_FIXED0 + [1.02 * reach_of_the_pairs(), 0.0]
    monkeypatch.setattr(certify, "PAIR_ELEMENTS", 12)
    assert w_step(beyond).text == REACH_FAILURE
    monkeypatch.setattr(certify, "PAIR_ELEMENTS", 11)
    assert w_step(beyond) is None


@pytest.mark.parametrize("at_large", [False, True])
def test_without_labels_the_verdict_does_not_depend_on_the_chunk_or_the_points_cache(monkeypatch, at_large):
    """One pair a chunk, and no cached copy of the points (the judge reads the data): a row that
    gives every ambiguous point to centroid 0 still passes, and one beyond their reach fails."""
    from kmbench.judge import points
    from kmbench.protocol import residence

    if at_large:
        monkeypatch.setattr(certify, "PAIR_ELEMENTS", 0)
    monkeypatch.setattr(residence, "CHUNK_ELEMENTS", 2)
    monkeypatch.setattr(points, "CACHE_BYTES", 0)
    assert w_step(ambiguous_to=0) is None
    reach = reach_at_large() if at_large else reach_of_the_pairs()
    assert w_step(W_FIXED0 + [1.02 * reach, 0.0]).text == REACH_FAILURE


def test_without_labels_a_cluster_of_ambiguous_points_alone_keeps_its_centroid_or_takes_some_of_them():
    """Centroid 1 at the origin has no clear point, one point on its bisector with centroid 0.
    Kept exactly where it was (a kept centroid at the origin may move by nothing), or moved to
    that point, it passes; moved anywhere else it fails, and the sentence says it was not kept."""
    data = np.array([[0.04, 0.0], [0.05, 0.0], [0.015, 0.005]])
    start = np.array([[0.03, 0.0], [0.0, 0.0]])
    certifier = Certifier.of(data, declared("float32"))
    found = certifier.scan(1, start)
    assert list(found.unique) == [True, True, False]  # as built
    without = np.array([[0.045, 0.0], [0.0, 0.0]])
    assert certifier.step(1, start, without).failure is None
    assert certifier.step(1, start, np.array([[0.045, 0.0], [0.015, 0.005]])).failure is None
    failure = certifier.step(4, start, np.array([[0.045, 0.0], [0.0, 0.001]])).failure
    assert failure == Failure(4, "means", "centroid 1", text=BOX_FAILURE + ", and it was not kept")


@pytest.mark.parametrize("edge", ["reach", "box"])
@pytest.mark.parametrize("share", [0.999, 1.001])
def test_without_labels_in_bfloat16_the_reach_and_the_box_end_where_the_exact_oracle_puts_them(edge, share):
    """bfloat16 stores to 2^-8, so the bound's rounding terms (3 u_store of the clear mean and of
    the ambiguous points' reach, the sum's factor over the clear count) are percents of it: a
    centroid 0.1% inside the exact oracle's ball or box passes, 0.1% outside fails."""
    from tests import exact_oracle

    oracle = exact_oracle.Step(W_DATA, W_START, "bfloat16")
    region = oracle.region(0)
    assert oracle.partition_is_certain() and region["fixed"] and region["open"]
    new = means_of(W_DATA, Certifier.of(W_DATA, declared("float64")).scan(1, W_START).nearest, W_START)
    if edge == "reach":  # along +x, inside the box
        new[0] = W_FIXED0 + [share * float(region["radius"]), 0.0]
    else:  # left of the box, well within reach
        new[0] = W_FIXED0 - [share * float(region["margin"]), 0.0]
    assert oracle.labelless_verdict(new) == ("within" if share < 1 else "outside")
    failure = Certifier.of(W_DATA, declared("bfloat16")).step(1, W_START, new).failure
    if share < 1:
        assert failure is None
    else:
        assert failure.text == (REACH_FAILURE.replace("float32", "bfloat16") if edge == "reach" else BOX_FAILURE)
