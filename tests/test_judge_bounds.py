"""The judge's bounds at their edges: a step just outside a bound fails, one just inside passes,
so a bound made looser (or tighter) than NOTES.md derives is a failing test; and the judge's
float64 reference is the plain float64 Lloyd of kmbench.protocol.reference."""

import numpy as np
import pytest

from kmbench.judge import certify, precision
from kmbench.judge.certify import Certifier
from kmbench.judge.sums import group, kept_bound, rounding_bound
from kmbench.judge.scan import assign
from kmbench.protocol import reference
from tests.conftest import blob_data


def test_gamma_is_higham_gamma():
    u = 2.0 ** -24
    assert precision.gamma(10, u) == pytest.approx(10 * u / (1 - 10 * u), rel=1e-15)
    assert precision.gamma(2 ** 23, u) == float("inf")  # no bound where m u >= 1/2


def test_the_distance_bound_covers_float32_rounding_in_every_form():
    rng = np.random.default_rng(0)
    for d in (1, 3, 64, 777):
        x = (rng.standard_normal((300, d)) * 10 + rng.uniform(-50, 50)).astype(np.float32)
        c = (rng.standard_normal((7, d)) * 10).astype(np.float32)
        exact = ((x.astype(np.float64)[:, None] - c.astype(np.float64)[None]) ** 2).sum(axis=2)
        direct = ((x[:, None] - c[None]) ** 2).sum(axis=2, dtype=np.float32)
        expanded = (x * x).sum(axis=1)[:, None] - 2 * (x @ c.T) + (c * c).sum(axis=1)[None]
        scale = (np.linalg.norm(x.astype(np.float64), axis=1)[:, None] + np.linalg.norm(c, axis=1)[None]) ** 2
        bound = precision.distance_factor(precision.FLOAT32, d) * scale
        assert (np.abs(direct - exact) <= bound).all()
        assert (np.abs(expanded - exact) <= bound).all()


def test_the_mean_bound_covers_a_sequential_float32_sum():
    rng = np.random.default_rng(1)
    for n in (10, 1000, 100_000):
        x = (rng.standard_normal((n, 3)) + 100).astype(np.float32)
        sequential = np.add.accumulate(x, axis=0, dtype=np.float32)[-1] / np.float32(n)
        exact = x.astype(np.float64).mean(axis=0)
        bound = precision.sum_factor(precision.FLOAT32, n) * np.linalg.norm(x.astype(np.float64), axis=1).sum() / n
        assert np.linalg.norm(sequential - exact) <= bound + 3 * 2.0 ** -24 * np.linalg.norm(exact)


U32, U64 = 2.0 ** -24, 2.0 ** -53


def documented_gamma(m, u):
    return m * u / (1 - m * u)


def documented_mean_bound(counts, weights, means):
    """NOTES.md, "Means", for float32, written out here rather than taken from the judge."""
    n = np.maximum(counts, 1)
    factor = np.array([documented_gamma(c + 2, U32) + U32 + documented_gamma(c + 2, U64) for c in n])
    return factor * weights / n + 3 * U32 * np.linalg.norm(means, axis=1)


def documented_allowance(x, centroids, mean):
    """NOTES.md, "Distances", for float32: twice the row's E(x) plus twice the judge's float64 error."""
    d = x.shape[0]
    k32 = 2 * U32 + U32 ** 2 + documented_gamma(d + 8, U32) + 2 * U32
    k64 = 2 * U64 + U64 ** 2 + documented_gamma(d + 8, U64) + 2 * U64
    raw = np.linalg.norm(x) + np.linalg.norm(centroids, axis=1).max()
    centred = np.linalg.norm(x - mean) + np.linalg.norm(centroids - mean, axis=1).max()
    return 2 * k32 * max(raw, centred) ** 2 + 2 * k64 * centred ** 2


def _a_step(k=6, n=3000, d=3):
    data = blob_data(np.random.default_rng(4), n=n, d=d, k=k)
    previous = data[:k].astype(np.float64)
    certifier = Certifier.of(data, precision.FLOAT32)
    found = assign(certifier.data, previous, precision.FLOAT32, certifier.geometry)
    groups = group(certifier.data, found.nearest, previous, certifier.geometry, np)
    means, _ = groups.means(previous, np)
    assert found.unique.all()  # every label is fixed, so the bound is the documented one alone
    return certifier, previous, found.nearest, means, documented_mean_bound(groups.counts, groups.weights, means)


def test_the_judge_uses_the_documented_mean_bound():
    certifier, previous, labels, means, documented = _a_step()
    groups = group(certifier.data, labels, previous, certifier.geometry, np)
    np.testing.assert_allclose(rounding_bound(groups, means, precision.FLOAT32, np), documented, rtol=1e-12)


@pytest.mark.parametrize("with_labels", [True, False])
@pytest.mark.parametrize("times, certified", [(0.5, True), (1.5, False), (3.0, False)])
def test_a_mean_moved_past_its_rounding_bound_fails_and_one_within_passes(with_labels, times, certified):
    certifier, previous, labels, means, bound = _a_step()
    moved = means.copy()
    moved[2, 0] += times * bound[2]
    step = certifier.step(1, previous, moved, labels if with_labels else None)
    assert (step.failure is None) == certified, step.failure and step.failure.sentence()
    if not certified:
        assert step.failure.where == "centroid 2" and step.failure.check == "means"


@pytest.mark.parametrize("times, admissible", [(0.5, True), (3.0, False)])
def test_a_label_past_the_distance_bound_fails_and_one_within_passes(times, admissible):
    """One point between two centroids, nearer to centroid 0 by `times` its allowance, labelled 1."""
    rng = np.random.default_rng(5)
    others = (rng.standard_normal((400, 4)) * 0.1 + 40).astype(np.float32)  # far from both: clear
    c = np.array([[1.0, 2.0, 3.0, 1.0], [3.0, 2.0, 1.0, 1.0], [40, 40, 40, 40]], dtype=np.float64)
    axis = (c[0] - c[1]) / np.linalg.norm(c[0] - c[1])
    middle = (c[0] + c[1]) / 2
    probe = np.vstack([others, middle.astype(np.float32)[None]]).astype(np.float64)
    allowance = documented_allowance(probe[-1], c, probe.mean(axis=0))
    point = (middle + axis * times * allowance / (2 * np.linalg.norm(c[0] - c[1]))).astype(np.float32)
    data = np.vstack([others, point[None]])
    certifier = Certifier.of(data, precision.FLOAT32)
    judged = assign(certifier.data, c, precision.FLOAT32, certifier.geometry).allowance[-1]
    assert judged == pytest.approx(documented_allowance(data[-1].astype(np.float64), c, data.mean(axis=0, dtype=np.float64)), rel=1e-6)
    labels = np.r_[np.full(len(others), 2), 1]
    gap = ((point - c[1]) ** 2).sum() - ((point - c[0]) ** 2).sum()
    assert gap == pytest.approx(times * allowance, rel=0.05)
    groups = group(certifier.data, labels, c, certifier.geometry, np)
    means, _ = groups.means(c, np)
    step = certifier.step(1, c, means, labels)
    assert (step.failure is None) == admissible, step.failure and step.failure.sentence()
    if not admissible:
        assert step.failure.check == "assignment" and step.failure.where == f"point {len(others)}"


@pytest.mark.parametrize("seed, k, d", [(0, 5, 2), (1, 40, 3), (2, 12, 50)])
def test_the_float64_reference_is_the_plain_float64_lloyd(seed, k, d):
    data = blob_data(np.random.default_rng(seed), n=4000, d=d, k=k)
    start = data[:k]
    fast, done, _, labels, _ = certify.float64_lloyd(data, start, 12)
    plain = reference.lloyd(data, start, 12)
    assert done == plain.iterations == 12
    np.testing.assert_array_equal(labels, plain.labels)
    np.testing.assert_allclose(fast, plain.centroids, rtol=0, atol=1e-12)
    assert certify.inertia(data, fast) == pytest.approx(reference.inertia(data, plain.centroids), rel=1e-12)


def test_a_cluster_without_a_bound_hides_no_other():
    """A precision coarse enough that a 200-point sum has no worst-case bound (gamma_n >= 1/2):
    that cluster goes unchecked and is counted, and a centroid 50 spreads off elsewhere still fails."""
    coarse = precision.Precision("coarse", 2.0 ** -8, 2.0 ** -8, 2.0 ** -8, 2.0 ** 8)
    rng = np.random.default_rng(8)
    data = np.vstack([rng.standard_normal((200, 2)), rng.standard_normal((50, 2)) + 30]).astype(np.float32)
    previous = np.array([[0.0, 0.0], [30.0, 30.0]])
    certifier = Certifier.of(data, coarse)
    labels = np.r_[np.zeros(200, int), np.ones(50, int)]
    means, _ = group(certifier.data, labels, previous, certifier.geometry, np).means(previous, np)
    step = certifier.step(1, previous, means, labels)
    assert step.failure is None and step.unbounded == 1
    moved = means.copy()
    moved[1] += 50 * certifier.spread
    for given in (labels, None):
        failure = certifier.step(1, previous, moved, given).failure
        assert failure is not None and failure.where == "centroid 1"


def _far_from_the_origin(n=3000, d=16, k=40, seed=11):
    """Data 1,000 from the origin: in float32 nearly every point may take nearly any centroid."""
    rng = np.random.default_rng(seed)
    data = (rng.standard_normal((n, d)) + 1000).astype(np.float32)
    certifier = Certifier.of(data, precision.FLOAT32)
    previous = data[:k].astype(np.float64)
    found = assign(certifier.data, previous, precision.FLOAT32, certifier.geometry)
    assert found.pair_points.size > n * k // 2  # the case the bounds at large are for
    return certifier, previous, found


def test_bounds_at_large_contain_the_pairwise_ones():
    certifier, previous, found = _far_from_the_origin()
    tied = np.nonzero(~found.unique)[0]
    fixed_means = previous + 0.1  # any centroids serve: both bound the same distances from them
    exact, away, low, high = certifier._candidates(found, previous, fixed_means)
    large, away_large, low_large, high_large = certifier._candidates_at_large(found, tied, previous, fixed_means)
    np.testing.assert_array_equal(large.counts, exact.counts)
    assert (large.weights >= exact.weights).all() and (away_large >= away).all()
    joined = exact.counts > 0
    assert (low_large[joined] <= low[joined]).all() and (high_large[joined] >= high[joined]).all()
    assert (large.weights[joined] < 3 * exact.weights[joined]).all()  # wider, not limitless


@pytest.mark.parametrize("pairwise", [True, False])
def test_without_labels_far_from_the_origin_a_step_passes_and_a_stray_centroid_fails(monkeypatch, pairwise):
    monkeypatch.setattr(certify, "PAIR_ELEMENTS", 1 << 40 if pairwise else 0)
    certifier, previous, found = _far_from_the_origin()
    means, _ = group(certifier.data, found.nearest, previous, certifier.geometry, np).means(previous, np)
    assert certifier.step(1, previous, means).failure is None
    stray = means.copy()
    # Outside every point's box by more than a worst-case float32 sum of 3,000 points near
    # |x| = 4,000 may be off (the margin is that large: this precision decides little here).
    stray[7] += 1000 * certifier.spread
    failure = certifier.step(1, previous, stray).failure
    assert failure is not None and failure.where == "centroid 7", failure and failure.sentence()


@pytest.mark.parametrize("with_labels", [True, False])
def test_a_frozen_empty_cluster_gets_the_end_slack_with_or_without_labels(with_labels):
    """A timed end is checked with one step's largest mean bound for clusters no point joins
    (NOTES.md, "Nondeterminism"); without it the same move fails."""
    rng = np.random.default_rng(12)
    data = rng.standard_normal((2000, 3)).astype(np.float32)
    previous = np.array([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0], [20.0, 20.0, 20.0]])  # the last stays empty
    certifier = Certifier.of(data, precision.FLOAT32)
    found = assign(certifier.data, previous, precision.FLOAT32, certifier.geometry)
    groups = group(certifier.data, found.nearest, previous, certifier.geometry, np)
    means, filled = groups.means(previous, np)
    assert not filled[2]
    slack = rounding_bound(groups, means, precision.FLOAT32, np)[filled].max()
    assert slack > 10 * kept_bound(previous, precision.FLOAT32, np)[2]
    moved = means.copy()
    moved[2, 0] += slack / 2
    labels = found.nearest if with_labels else None
    assert certifier.step(1, previous, moved, labels, end=True).failure is None
    failure = certifier.step(1, previous, moved, labels).failure
    assert failure is not None and failure.check == "empty cluster"


def test_a_cluster_with_a_few_clear_points_stays_in_their_mean_and_the_ambiguous_box():
    """300 from the origin a handful of points are clear: their mean alone bounds a centroid too
    loosely (most of its points may be elsewhere), the box of that mean and its candidates does not."""
    rng = np.random.default_rng(11)
    data = (rng.standard_normal((3000, 16)) + 300).astype(np.float32)
    certifier = Certifier.of(data, precision.FLOAT32)
    previous = data[:40].astype(np.float64)
    found = assign(certifier.data, previous, precision.FLOAT32, certifier.geometry)
    means, _ = group(certifier.data, found.nearest, previous, certifier.geometry, np).means(previous, np)
    assert found.unique[found.nearest == 1].any()  # centroid 1 has a clear point
    stray = means.copy()
    stray[1] += 100 * certifier.spread
    failure = certifier.step(1, previous, stray).failure
    assert failure is not None and failure.where == "centroid 1" and "box" in failure.text
    assert "not kept" not in failure.text
