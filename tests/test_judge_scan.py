"""kmbench.judge.scan's own facts, beside the verdicts other files test: where the arithmetic is
exact a tie has no allowance (the lowest index wins, by nothing), and pairs name their points in
the narrowest integer type that numbers them."""

import numpy as np
import pytest

from kmbench.judge import scan
from kmbench.judge.certify import Certifier
from kmbench.judge.precision import declared


@pytest.mark.parametrize("direct", [False, True])
def test_an_exact_tie_given_to_the_higher_index_is_allowed_nothing_whatever_the_distance_form(direct):
    """Integer data, centroids and mean near the origin: every distance is exact in float32, so
    no rounding allowance applies to point 2, exactly between centroids 0 and 1: the row that
    gave it to 1 is off by 0 where nothing is allowed (the float32 allowance of 0 rounded up is the
    smallest subnormal, 1.4e-45 in squared distance)."""
    data = np.array([[0.0, 0.0], [2.0, 0.0], [1.0, 0.0], [4.0, 0.0], [8.0, 0.0]])
    start = np.array([[0.0, 0.0], [2.0, 0.0], [6.0, 0.0]])
    certifier = Certifier.of(data, declared("float32"), direct=direct)
    failure = certifier.step(2, start, start, np.array([0, 1, 1, 1, 2])).failure
    nothing = np.nextafter(np.float32(0), np.float32(1))
    assert (failure.where, failure.amount) == ("point 2", 0.0) and failure.allowance < 1e-20
    assert failure.text.endswith("point 2 went to 1, its nearest is 0 (an exact tie: the lowest index wins)")
    found = certifier.scan(2, start, keep=False)
    assert (found.allowance <= nothing).all() and found.unique.all()


def test_pairs_name_their_points_in_the_narrowest_integer_type_that_numbers_them():
    """int32 while every point's index fits (13 bytes a point at a billion points), int64 past."""
    assert [scan._index_type(n) for n in (1, 1000, 2**31 - 1)] == [np.int32] * 3
    assert [scan._index_type(n) for n in (2**31 + 1, 2**33)] == [np.int64] * 2


def test_a_scan_in_small_chunks_is_the_scan_in_one():
    """Each chunk's figures go to its own points (and its pairs name them by their index in the
    data): chunks of 7 points give the assignment one chunk gives, near-ties and all."""
    from kmbench.judge import scoring
    from kmbench.judge.points import Geometry
    from kmbench.judge.precision import FLOAT32

    rng = np.random.default_rng(5)
    centres = np.array([[100.0, 100.0], [101.0, 100.0], [100.0, 103.0]])
    data = (centres[rng.integers(0, 3, 200)] + rng.normal(0, 0.6, (200, 2))).astype(np.float32)
    centroids = data[:3].astype(np.float64)
    whole = scan.assign(data, centroids, FLOAT32, Geometry.of(data))
    assert 0 < whole.near_ties < 200  # the premise: some points have more than one admissible label
    original = scoring.Scorer.rows_per_chunk
    try:
        scoring.Scorer.rows_per_chunk = lambda self, xp: 7
        chunked = scan.assign(data, centroids, FLOAT32, Geometry.of(data))
    finally:
        scoring.Scorer.rows_per_chunk = original
    for name in ("nearest", "unique", "pair_points", "pair_centroids", "allowance"):
        np.testing.assert_array_equal(getattr(chunked, name), getattr(whole, name), err_msg=name)


@pytest.mark.parametrize("moved", [0.0, 0.5])
def test_a_scan_started_from_seeds_decides_as_a_scan_from_none(moved):
    """A seed settles a point only where its carried bounds prove it clear; the points it leaves
    go to the next seed, then to the scorer. From seeds of the centroids scanned (or of centroids
    one of which has since moved half a unit, whose distances are measured again), twice over,
    every decision (near-ties included, far from the origin in float32) is the seedless scan's."""
    from kmbench.judge.points import Geometry
    from kmbench.judge.precision import FLOAT32

    rng = np.random.default_rng(6)
    centres = np.array([[1000.0, 1000.0], [1010.0, 1000.0], [1000.0, 1030.0]])
    data = (centres[rng.integers(0, 3, 300)] + rng.normal(0, 3.0, (300, 2))).astype(np.float32)
    far = np.c_[900.0 + 20 * np.arange(17), np.full(17, 1200.0)]  # k = 20: enough for a mover to stand out
    centroids = np.vstack([centres + 0.25, far])
    geometry = Geometry.of(data)
    seedless = scan.assign(data, centroids, FLOAT32, geometry)
    assert 0 < seedless.near_ties < 300  # the premise: near-ties to leave open, and clear points to settle
    before = centroids.copy()
    before[1, 0] -= moved
    seed = scan.assign(data, before, FLOAT32, geometry).seed(before)
    seeded = scan.assign(data, centroids, FLOAT32, geometry, seeds=[seed] * 2)
    for name in ("nearest", "unique", "pair_points", "pair_centroids"):
        np.testing.assert_array_equal(getattr(seeded, name), getattr(seedless, name), err_msg=name)


def _notes_factor(u: float, d: int) -> float:
    """K(d) of NOTES.md "Distances" for a precision whose three units are u, written out again."""
    return 4 * u + u * u + (d + 8) * u / (1 - (d + 8) * u)


def _norm(a):
    return np.sqrt((np.asarray(a, dtype=np.float64) ** 2).sum(axis=-1))


@pytest.mark.parametrize("centred_on", [0.0, 40.0])
def test_the_allowance_a_point_gets_is_twice_the_rows_error_plus_twice_the_judges(centred_on):
    """A float64 row (the judge's own error as large as the row's): each point's reported allowance is
    2 E(x) + 2 Ej(x), E(x) = K(d) max_a (|x - a| + max_j |c_j - a|)^2 over a in {0, mean} and
    Ej(x) = K_64(d) (|x - mean| + max_j |c_j - mean|)^2 (NOTES.md "Distances", "The judge's own
    scan"), from spreads of about 10, on data centred on the origin or 40 off it."""
    from kmbench.judge.points import Geometry
    from kmbench.judge.precision import FLOAT64

    rng = np.random.default_rng(11)
    data = rng.normal(0.0, 6.0, (60, 2)) + centred_on
    centroids = data[:4] + 0.37
    found = scan.assign(data, centroids, FLOAT64, Geometry.of(data))
    mean = data.mean(axis=0)
    raw = _norm(data) + _norm(centroids).max()
    centred = _norm(data - mean) + _norm(centroids - mean).max()
    k64 = _notes_factor(2.0 ** -53, 2)
    expected = 2 * k64 * np.maximum(raw, centred) ** 2 + 2 * k64 * centred ** 2
    np.testing.assert_allclose(found.allowance, expected, rtol=1e-6)  # float32, rounded up


def test_a_direct_rows_allowance_is_the_direct_bound_of_its_two_nearest_plus_twice_the_judges():
    """A float32 row that declares direct distances: the allowance is E(x, c_1) + E(x, c_2) + 2 Ej(x)
    for its two nearest centroids, E(x, c) = gamma_{d+2}(u) |x - c|^2 + 4 u |x - c| S + 4 u^2 S^2 with
    S = max_a (|x - a| + max_j |c_j - a|) (NOTES.md "Direct distances"). Points on both sides of
    the origin with the data's mean at 4: for some S is the anchor at the mean, for others the origin."""
    from kmbench.judge.points import Geometry
    from kmbench.judge.precision import FLOAT32

    rng = np.random.default_rng(12)
    data = np.r_[rng.normal(-1.0, 0.4, 40), rng.normal(9.0, 0.4, 60)][:, None] + 0.01
    centroids = np.array([[-1.1], [8.9], [3.3]])
    found = scan.assign(data, centroids, FLOAT32, Geometry.of(data), direct=True)
    u, d = 2.0 ** -24, 1
    mean = data.mean(axis=0)
    raw = _norm(data) + _norm(centroids).max()
    centred = _norm(data - mean) + _norm(centroids - mean).max()
    assert (centred > raw).any() and (raw > centred).any()  # the premise: each anchor is the larger somewhere
    reach = np.maximum(raw, centred)
    two = np.sort(((data[:, None, :] - centroids[None]) ** 2).sum(axis=2), axis=1)[:, :2]
    gamma = (d + 2) * u / (1 - (d + 2) * u)
    direct = (gamma * two + 4 * u * np.sqrt(two) * reach[:, None] + 4 * u * u * reach[:, None] ** 2).sum(axis=1)
    expected = direct + 2 * _notes_factor(2.0 ** -53, d) * centred ** 2
    np.testing.assert_allclose(found.allowance, expected, rtol=1e-6)


def test_a_scan_from_seeds_in_small_chunks_is_the_scan_from_seeds_in_one(monkeypatch):
    """Each chunk takes its own rows of every seed: chunks of 7 points, two seeds of the centroids
    scanned (the first settles every point of most chunks: the second then has none left), give
    the assignment one chunk gives, which is the seedless one."""
    from kmbench.judge import scoring
    from kmbench.judge.points import Geometry
    from kmbench.judge.precision import FLOAT32

    rng = np.random.default_rng(7)
    centres = np.array([[0.0, 0.0], [40.0, 0.0], [0.0, 40.0]])
    data = (centres[rng.integers(0, 3, 120)] + rng.normal(0, 1.0, (120, 2))).astype(np.float32)
    data[:2] = [[20.1, 3.0], [20.1, -5.0]]  # on the bisector of 0 and 1: near-ties no seed settles
    geometry = Geometry.of(data)
    centroids = centres + 0.1
    seed = scan.assign(data, centroids, FLOAT32, geometry).seed(centroids)
    whole = scan.assign(data, centroids, FLOAT32, geometry, seeds=[seed, seed])
    monkeypatch.setattr(scoring.Scorer, "rows_per_chunk", lambda self, xp: 7)
    chunked = scan.assign(data, centroids, FLOAT32, geometry, seeds=[seed, seed])
    plain = scan.assign(data, centroids, FLOAT32, geometry)
    assert plain.near_ties == 2
    for name in ("nearest", "unique", "pair_points", "pair_centroids", "allowance"):
        np.testing.assert_array_equal(getattr(chunked, name), getattr(whole, name), err_msg=name)
        np.testing.assert_array_equal(getattr(whole, name), getattr(plain, name), err_msg=name)


@pytest.mark.parametrize("direct", [False, True])
def test_an_exact_tie_among_more_centroids_than_the_tree_offers_goes_to_the_lowest_index(direct):
    """Integer points, centroids and mean (exact in float64): at k = 150, d = 2 the judge's float64
    re-check first takes each near-tie's 8 nearest from a k-d tree. A point 5 from 12 centroids
    (the lattice points of a circle, numbered in a different order for each point) has more
    exact ties than the tree hands over, so the lowest index may be among those left out: it is
    still the decision. A point exactly between two (and 6 candidates farther) goes to the lower."""
    from kmbench.judge import scoring
    from kmbench.judge.points import Geometry
    from kmbench.judge.precision import FLOAT64

    circle = np.array([[5, 0], [-5, 0], [0, 5], [0, -5], [3, 4], [3, -4], [-3, 4], [-3, -4],
                       [4, 3], [4, -3], [-4, 3], [-4, -3]])
    rng = np.random.default_rng(3)
    points, centroids, lowest = [], [], []
    for g in range(8):
        centre = np.array([40 * g, 0])
        lowest.append(len(centroids))
        centroids.extend(centre + circle[rng.permutation(12)])
        points.append(centre)
    pair = np.array([0, 200])
    lowest.append(len(centroids) + 1)
    centroids.extend([pair + [7, 3], pair + [-1, 0], pair + [1, 0], pair + [0, 9]])
    points.append(pair)
    centroids.extend(np.c_[np.arange(150 - len(centroids)) * 3, np.full(150 - len(centroids), -300)])
    data = np.array(points, dtype=np.float64)
    data = np.vstack([data, -data.sum(axis=0)])  # the mean: 0
    centroids = np.array(centroids, dtype=np.float64)
    assert len(centroids) == 150 and scoring.Scorer(centroids, np.zeros(2), np).tree is not False
    found = scan.assign(data, centroids, FLOAT64, Geometry.of(data), direct=direct)
    assert found.nearest[: len(lowest)].tolist() == lowest and found.unique.all()


def test_a_point_the_float32_scores_leave_open_and_float64_settles_has_one_label():
    """At d = 9 the judge first scores in float32, whose own error Ej32 is as large as a float32
    row's E: a point is clear past 2 E + 2 Ej32 = 4 E. Points 3 E from a bisector are not clear
    there; scored again in float64 (allowance 2 E + 2 Ej64) they have one admissible label, so
    they are unique, not near-ties (the count a certificate reports)."""
    from kmbench.judge.points import Geometry
    from kmbench.judge.precision import FLOAT32

    d, a = 9, 3.0
    centroids = np.zeros((2, d))
    centroids[:, 0] = [a, -a]
    rng = np.random.default_rng(9)
    half = np.c_[np.zeros(6), rng.uniform(-4, 4, (6, d - 1))]
    far = np.c_[np.full(4, 2.5), rng.uniform(-2, 2, (4, d - 1))]  # clear points
    size = np.sqrt((half ** 2).sum(axis=1)) + a  # |x| + max |c|, the mean being 0 (x at t ~ 1e-4 from the bisector)
    e = _notes_factor(2.0 ** -24, d) * size ** 2  # E(x) of a float32 row
    half[:, 0] = 3 * e / (4 * a)  # |x - c_1|^2 - |x - c_0|^2 = 4 a t = 3 E
    data = np.vstack([half, -half, far, -far])  # mirrored: the mean is exactly 0
    found = scan.assign(data, centroids, FLOAT32, Geometry.of(data))
    assert found.near_ties == 0 and found.unique.all() and found.pair_points.size == 0
    assert found.nearest.tolist() == [0] * 6 + [1] * 6 + [0] * 4 + [1] * 4


@pytest.mark.parametrize("share, admitted", [(1.5, True), (2.5, False)])
def test_a_direct_float64_rows_third_label_is_admitted_within_twice_the_judges_error(share, admitted):
    """A float64 row that declares direct distances, one point exactly between centroids 0 and 1
    (a near-tie: both admissible) and centroid 2 a little farther, a centroid 1,000 away making
    the judge's own error Ej = K_64 (|x - m| + max |c - m|)^2 a thousand times the direct bound
    E(x, c_2) + E(x, c_0): label 2 is admissible while its gap is within that bound plus 2 Ej
    (1.5 Ej past the bound), not 2.5 Ej past it."""
    from kmbench.judge.points import Geometry
    from kmbench.judge.precision import FLOAT64

    u, x = 2.0 ** -53, 0.25
    judge = _notes_factor(u, 1) * 1000.0 ** 2
    reach = x + 1000.25  # |x| + max |c| (the mean is x itself)
    gamma = 3 * u / (1 - 3 * u)
    bound = gamma * 2 + 4 * u * reach * 2 + 8 * u * u * reach ** 2  # E(x, c_2) + E(x, c_0), both about 1 away
    offset = np.sqrt(1 + bound + share * judge)  # |x - c_2|^2 - |x - c_0|^2 = bound + share Ej
    centroids = np.array([[x - 1], [x + 1], [x + offset], [x + 1000]])
    data = np.array([[x]])
    found = scan.assign(data, centroids, FLOAT64, Geometry.of(data), direct=True)
    assert scan.admissible(found, np.array([1]), 4).tolist() == [True]
    assert scan.admissible(found, np.array([2]), 4).tolist() == [admitted]


@pytest.mark.parametrize("share, rescored", [(1.5, 1), (2.5, 0)])
def test_only_the_points_the_first_scores_leave_open_are_scored_again_in_float64(monkeypatch, share, rescored):
    """A float64 row, one point 1 from centroid 0 and a little farther from centroid 1, a centroid
    1,000 away making the judge's own error Ej large: the first (float64) scores call it clear
    past 2 E + 2 Ej, so at 2 E + 2.5 Ej it is not scored again; at 2 E + 1.5 Ej it is (and has two
    labels). NOTES.md, "The judge's own scan": only the other points are scored again."""
    from kmbench.judge.points import Geometry, Points
    from kmbench.judge.precision import FLOAT64

    again = []
    original = Points.centred

    def counting(self, index=None):
        if isinstance(index, np.ndarray):
            again.append(index.size)
        return original(self, index)

    monkeypatch.setattr(Points, "centred", counting)
    x = 0.25
    k64 = _notes_factor(2.0 ** -53, 1)
    row, judge = k64 * (x + 1000.25) ** 2, k64 * 1000.0 ** 2  # E(x) (origin anchor), Ej(x)
    centroids = np.array([[x - 1], [x + np.sqrt(1 + 2 * row + share * judge)], [x + 1000]])
    data = np.array([[x]])
    found = scan.assign(data, centroids, FLOAT64, Geometry.of(data))
    assert sum(again) == rescored and found.near_ties == rescored
    assert found.pair_points.dtype == found.pair_centroids.dtype == np.int32  # none re-checked: still the types


def test_a_point_exactly_at_the_clear_margin_is_not_clear():
    """NOTES.md, "The judge's own scan": a point is clear when its two best scores differ by *more*
    than 2 Ej + 2 E. A float64 row, one point at the origin on centroid 0 (so d1 = 0 and
    d2 = c_1^2), a centroid F away setting E and Ej: F is chosen so that some float64 c_1 has
    c_1^2 exactly the margin, as the judge computes it. That point is not clear: scored again in
    float64, label 1 is admissible (a near-tie)."""
    from kmbench.judge.points import Geometry
    from kmbench.judge.precision import FLOAT64, distance_factor

    factor = distance_factor(FLOAT64, 1)
    for far in 1000.0 + 0.013 * np.arange(200):
        reach = float(np.sqrt(np.array([far * far])).max())  # max |c| = max |c - mean|: the mean is 0
        margin = 2 * (factor * (reach * reach)) + 2 * (factor * max(reach * reach, reach * reach))  # 2 Ej + 2 E
        root = np.sqrt(margin)
        near = [v for v in (np.nextafter(root, 0.0), root, np.nextafter(root, 1.0)) if v * v == margin]
        if near:
            break
    assert near, "no float64 square lands on the margin"  # the premise (found within a few tries)
    centroids = np.array([[0.0], [near[0]], [far]])
    data = np.zeros((1, 1))
    found = scan.assign(data, centroids, FLOAT64, Geometry.of(data))
    assert found.near_ties == 1 and scan.admissible(found, np.array([1]), 3).tolist() == [True]
