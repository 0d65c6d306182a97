"""Carried bounds (kmbench.judge.seeds, NOTES.md "Carried bounds"): a scan started from an earlier
scan's bounds decides every point as a scan from nothing does, its lower bounds are lower bounds,
and the bank keeps what it promises. The speed they buy is a benchmark's business; here, that
the settled points were really not scored again is checked, so a bound that settles nothing
cannot pass for one that works."""

from types import SimpleNamespace

import numpy as np
import pytest

from kmbench.judge import scoring
from kmbench.judge.carried import (
    carried_bounds,
    largest_but_own,
    measured_lower,
    rows_of_seed,
)
from kmbench.judge.precision import FLOAT32, FLOAT64
from kmbench.judge.scan import Geometry, assign
from kmbench.judge.seeds import Bank, Seed, bound_slack, closest_first

CASES = [  # (kind, n, d, k)
    ("clustered", 4000, 2, 40), ("clustered", 3000, 2, 5), ("clustered", 3000, 16, 60),
    ("integer", 3000, 2, 12), ("far", 3000, 3, 20), ("clustered", 2000, 5, 1),
]


def data_of(kind, n, d, rng, clusters=8):
    """Points of a kind: integers (exact ties), far from the origin, or clustered."""
    if kind == "integer":
        return rng.integers(-6, 7, (n, d)).astype(np.float32)
    if kind == "far":
        return (rng.standard_normal((n, d)) + 1000).astype(np.float32)
    centres = rng.uniform(-10, 10, (clusters, d))
    return (centres[rng.integers(0, clusters, n)] + rng.standard_normal((n, d))).astype(np.float32)


def as_pairs(found):
    return set(zip(found.pair_points.tolist(), found.pair_centroids.tolist()))


def scored_rows(monkeypatch):
    """Counts the points the scorer scores (those no carried bound settled)."""
    counted = []
    original = scoring.Scorer.best_two

    def counting(self, points, rows):
        # A slice is every point of the chunk it spans (np.size would call it one).
        counted.append(len(range(*rows.indices(points.x.shape[0]))) if isinstance(rows, slice) else int(np.size(rows)))
        return original(self, points, rows)

    monkeypatch.setattr(scoring.Scorer, "best_two", counting)
    return counted


@pytest.mark.parametrize("kind, n, d, k", CASES)
@pytest.mark.parametrize("precision, direct", [(FLOAT32, False), (FLOAT32, True), (FLOAT64, False)])
def test_a_scan_from_carried_bounds_decides_as_a_scan_from_nothing(kind, n, d, k, precision, direct, monkeypatch):
    rng = np.random.default_rng(n + d + k)
    data = data_of(kind, n, d, rng)
    geometry = Geometry.of(data)
    before = data[rng.choice(n, k, replace=False)].astype(np.float64)
    if kind == "integer":
        before = np.round(before)
    after = before + rng.standard_normal(before.shape) * 1e-3  # a step that moved every centroid a little
    after[0] += 2.0  # and one a lot: the bounds must give it up for every point
    seed = assign(data, before, FLOAT64, geometry).seed(before)
    plain = assign(data, after, precision, geometry, direct=direct)
    counted = scored_rows(monkeypatch)
    carried = assign(data, after, precision, geometry, direct=direct, seeds=[seed])
    # With direct distances the reported allowance is made of the two distances as each way knows
    # them (scores, or carried bounds): it words a failure and decides nothing.
    for field in ("nearest", "unique") + (() if direct else ("allowance",)):
        np.testing.assert_array_equal(getattr(carried, field), getattr(plain, field), err_msg=field)
    assert as_pairs(carried) == as_pairs(plain)
    assert list(carried.pair_points) == sorted(carried.pair_points)
    if plain.unique.mean() > 0.5:  # far from the origin in float32 few points are clear, settled or not
        assert sum(counted) < n  # some points were settled by the carried bounds alone


@pytest.mark.parametrize("kind, n, d, k", CASES)
def test_lower_bounds_are_below_every_other_centroid(kind, n, d, k):
    rng = np.random.default_rng(k)
    data = data_of(kind, n, d, rng)
    geometry = Geometry.of(data)
    first = data[rng.choice(n, k, replace=False)].astype(np.float64)
    second = first + rng.standard_normal(first.shape) * 0.05
    found = assign(data, second, FLOAT32, geometry, seeds=[assign(data, first, FLOAT32, geometry).seed(first)])
    distances = np.sqrt(((data.astype(np.float64)[:, None, :] - second[None]) ** 2).sum(axis=2))
    distances[np.arange(n), found.nearest] = np.inf
    assert (found.lower.astype(np.float64) <= distances.min(axis=1)).all()
    assert found.lower.dtype == np.float32 and (found.lower > 0).mean() > 0.5  # bounds that say something


def test_a_seed_is_trusted_only_within_how_far_the_centroids_moved():
    """A seed whose lower bounds claim too much (here: twice the truth) would settle points the
    new centroids put elsewhere: the scan from it differs from the plain scan. This is what the
    test above rules out for the bounds the judge makes."""
    rng = np.random.default_rng(1)
    data = data_of("clustered", 3000, 2, rng)
    geometry = Geometry.of(data)
    before = data[:30].astype(np.float64)
    after = before + rng.standard_normal(before.shape) * 0.5
    seed = assign(data, before, FLOAT64, geometry).seed(before)
    boasting = Seed(seed.centroids, seed.nearest, seed.lower * 2)
    plain = assign(data, after, FLOAT64, geometry)
    assert (assign(data, after, FLOAT64, geometry, seeds=[boasting]).nearest != plain.nearest).any()
    np.testing.assert_array_equal(assign(data, after, FLOAT64, geometry, seeds=[seed]).nearest, plain.nearest)


def test_the_bank_keeps_the_first_scan_of_each_step_within_its_budget():
    rng = np.random.default_rng(2)
    data = data_of("clustered", 1000, 2, rng)
    geometry = Geometry.of(data)
    centroids = data[:10].astype(np.float64)
    seed = assign(data, centroids, FLOAT64, geometry).seed(centroids)
    bank = Bank(budget=2 * seed.nbytes)
    bank.keep(1, seed)
    bank.keep(1, Seed(centroids + 1, seed.nearest, seed.lower))  # a later scan of step 1: not kept
    bank.keep(2, seed)
    bank.keep(3, seed)  # past the budget
    assert sorted(bank.by_step) == [1, 2] and np.array_equal(bank.get(1).centroids, centroids)
    assert bank.get(3) is None and bank.nbytes <= bank.budget


def test_the_closest_seeds_come_first_and_foreign_ones_are_left_out():
    rng = np.random.default_rng(3)
    data = data_of("clustered", 500, 2, rng)
    geometry = Geometry.of(data)
    centroids = data[:6].astype(np.float64)
    near = assign(data, centroids + 1e-6, FLOAT64, geometry).seed(centroids + 1e-6)
    far = assign(data, centroids + 1.0, FLOAT64, geometry).seed(centroids + 1.0)
    other_k = assign(data, centroids[:5], FLOAT64, geometry).seed(centroids[:5])
    assert closest_first([far, None, other_k, near], centroids, 500, np, most=2) == [near, far]
    assert closest_first([far, near], centroids, 500, np) == [near]
    assert closest_first([far, near], centroids, 499, np) == []  # made for other data


@pytest.mark.parametrize("k", [1, 2, 5, 31])
def test_the_direct_scan_finds_the_two_nearest_and_the_lowest_index_of_ties(k):
    from kmbench.judge.scoring import direct_best_two

    rng = np.random.default_rng(k)
    x = rng.integers(-3, 4, (20_000, 3)).astype(np.float64)  # integers: exact ties, across several blocks
    c = rng.integers(-3, 4, (k, 3)).astype(np.float64)
    first, second, nearest = direct_best_two(x, c)
    exact = ((x[:, None, :] - c[None]) ** 2).sum(axis=2)
    order = np.sort(exact, axis=1)
    np.testing.assert_array_equal(first, order[:, 0])
    np.testing.assert_array_equal(second, order[:, 1] if k > 1 else np.full(len(x), np.inf))
    np.testing.assert_array_equal(nearest, exact.argmin(axis=1))  # argmin: the first of equal smallest


def test_the_geometry_keeps_the_norms_not_the_float64_rows(monkeypatch):
    """Where only the norms fit the judge's cache, only the norms are kept, chunk by chunk: keeping
    each chunk's float64 rows until the last was made took twice the data's bytes of a GPU at its
    peak (1e8 x 128 on an H200 ran out of memory)."""
    import tracemalloc

    from kmbench.judge import points
    from kmbench.protocol import residence

    n, d = 100_000, 16
    data = np.random.default_rng(0).standard_normal((n, d)).astype(np.float32)
    monkeypatch.setattr(points, "CACHE_BYTES", 4 * n * 8)  # the norms fit; the float64 rows do not
    monkeypatch.setattr(residence, "CHUNK_ELEMENTS", n * d // 10)  # ten chunks
    tracemalloc.start()
    try:
        geometry = Geometry.of(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert geometry.full is None and geometry.norms is not None
    assert peak < n * d * 8 / 2  # the norms and a chunk or two at a time, not n x d float64 (13 MB)
    assert np.allclose(geometry.norms[1], np.linalg.norm(data - data.mean(axis=0, dtype=np.float64), axis=1))


# ------------------------------------------------ the arithmetic of carried bounds, by hand

def _moved(values):
    return SimpleNamespace(moved=lambda centroids, xp: np.array(values, dtype=np.float64))


def test_the_largest_move_of_every_other_centroid():
    assert largest_but_own(np.array([1.0, 5.0, 3.0])).tolist() == [5.0, 3.0, 5.0]
    assert largest_but_own(np.array([2.0, 7.0])).tolist() == [7.0, 2.0]
    assert largest_but_own(np.array([4.0])).tolist() == [0.0]  # no other centroid: nothing to give up


def test_movers_are_the_few_that_moved_more_than_twice_the_seventeenth():
    """19 centroids: two moved 5 and 3, one 0.2 (exactly twice the 17th largest, 0.1: not more), the
    rest 0.1. The two are measured; every other bound gives up at most 0.2 once they are left out."""
    moved = [0.1] * 19
    moved[4], moved[9], moved[11] = 5.0, 3.0, 0.2
    other, movers, rest = carried_bounds(_moved(moved), np.zeros((19, 2)), np)
    assert sorted(movers.tolist()) == [4, 9]
    assert other.tolist() == [5.0 if j != 4 else 3.0 for j in range(19)]
    assert rest.tolist() == [0.2 if j != 11 else 0.1 for j in range(19)]


def test_with_eighteen_centroids_or_fewer_none_is_a_mover():
    """A seed's 18 centroids moved by 0.125, the first by 50 (each move rounded up by the slack)."""
    before = np.zeros((18, 2))
    after = before + [0.125, 0.0]
    after[0, 0] = 50.0
    seed = Seed(before, np.zeros(3, dtype=np.int32), np.zeros(3, dtype=np.float32))
    _, movers, rest = carried_bounds(seed, after, np)
    up = 1 + bound_slack(2)
    assert movers.size == 0 and rest.tolist() == [0.125 * up] + [50.0 * up] * 17


def test_a_movers_distance_is_measured_except_for_the_points_it_was_nearest_to():
    """Points (0, 4) and (3, 4), mover 1 at (6, 12): the first point's bound drops to 10 (less the
    slack), the second was nearest to the mover and keeps its bound."""
    x, centroids = np.array([[0.0, 4.0], [3.0, 4.0]]), np.array([[0.0, 1.0], [6.0, 12.0]])
    got = measured_lower(np.array([20.0, 20.0]), np.array([0, 1]), x, centroids, np.array([1]), np)
    assert got.tolist() == [10.0 * (1 - bound_slack(2)), 20.0]
    assert measured_lower(np.array([7.0, 20.0]), np.array([0, 1]), x, centroids, np.array([1]), np)[0] == 7.0


def test_a_seeds_rows_are_taken_where_the_scan_computes():
    assert rows_of_seed(np.arange(10), 3, 6, np).tolist() == [3, 4, 5]


def test_seeds_tried_on_a_sample_first_decide_a_large_chunk_as_a_scan_from_nothing(monkeypatch):
    """70,000 points in one chunk (past PROBE_FROM): each seed is first tried on a sample. One that
    knows no point's bound (lower bounds 0) settles none of it and is passed over, not the seeds
    after it; one that knows 40% of them is tried on the whole chunk, and the points it leaves
    (more than PROBE_FROM, an index array now) go to the sample of the next. Whatever settles
    them, every decision is the seedless scan's, and so is the allowance of every near-tie (a
    direct float32 row, 1,000 from the origin: no seed settles a near-tie, so its two nearest
    are scored as they would be without seeds). One centroid moved far: it is measured."""
    from kmbench.judge import scan

    rng = np.random.default_rng(21)
    n = 70_000
    assert n // 2 > scan.PROBE_FROM
    centres = 1000 + rng.uniform(-30, 30, (20, 2))
    data = (centres[rng.integers(0, 20, n)] + rng.normal(0, 3.0, (n, 2))).astype(np.float32)
    geometry = Geometry.of(data)
    before = centres.copy()
    after = before + rng.standard_normal(before.shape) * 1e-3
    after[0] += 2.0
    good = assign(data, before, FLOAT64, geometry).seed(before)
    partial = Seed(good.centroids, good.nearest, np.where(np.arange(n) % 5 < 3, 0, good.lower).astype(np.float32))
    useless = Seed(good.centroids, good.nearest, np.zeros(n, dtype=np.float32))
    plain = assign(data, after, FLOAT32, geometry, direct=True)
    counted = scored_rows(monkeypatch)
    seeded = assign(data, after, FLOAT32, geometry, direct=True, seeds=[useless, partial, good])
    for field in ("nearest", "unique"):
        np.testing.assert_array_equal(getattr(seeded, field), getattr(plain, field), err_msg=field)
    assert as_pairs(seeded) == as_pairs(plain)
    ties = ~plain.unique
    assert 0 < ties.sum() < n // 100  # the premise: near-ties, and clear points to settle
    np.testing.assert_array_equal(seeded.allowance[ties], plain.allowance[ties])
    assert sum(counted) < n // 2  # the useless seed passed over, the others settled most points


def test_a_seed_settles_every_point_its_bounds_prove_and_scores_only_the_rest(monkeypatch):
    """20 centroids on a grid 10 apart, each point within 3 of its own along each axis (its
    nearest 4.3 away at most, every other 7 at least). Since the seed, centroid 3 moved 0.1 and
    centroid 17 moved 1,000 away: both are movers (the others stayed), measured rather than
    bounded by their move. Then every point whose nearest was not 17 is proved clear by the seed
    (NOTES.md "Carried bounds": L' - rest > |x - C_a|, by far), a point nearest the small mover
    included (its own distance to it is not a bound on the others), and only 17's points are
    scored; the decisions are the seedless scan's."""
    rng = np.random.default_rng(17)
    centres = np.array([[10.0 * i, 10.0 * j] for i in range(5) for j in range(4)])
    own = rng.integers(0, 20, 2000)
    data = (centres[own] + rng.uniform(-3, 3, (2000, 2))).astype(np.float32)
    geometry = Geometry.of(data)
    seed = assign(data, centres, FLOAT32, geometry).seed(centres)
    after = centres.copy()
    after[3, 0] += 0.1
    after[17, 1] += 1000.0
    assert sorted(carried_bounds(seed, after, np)[1].tolist()) == [3, 17]
    plain = assign(data, after, FLOAT32, geometry)
    counted = scored_rows(monkeypatch)
    seeded = assign(data, after, FLOAT32, geometry, seeds=[seed])
    for field in ("nearest", "unique", "allowance"):
        np.testing.assert_array_equal(getattr(seeded, field), getattr(plain, field), err_msg=field)
    assert sum(counted) == (own == 17).sum() and (seed.nearest == own).all()


def _notes_factor64(d: int) -> float:
    u = 2.0 ** -53
    return 4 * u + u * u + (d + 8) * u / (1 - (d + 8) * u)


@pytest.mark.parametrize("mover", [False, True])
@pytest.mark.parametrize("past, scored", [("-Ej", 1), ("+Ej", 0), ("+slack", 1)])
def test_a_seed_settles_a_point_exactly_past_the_carried_margin(monkeypatch, mover, past, scored):
    """NOTES.md "Carried bounds": a point is settled by a seed where L^2 - U^2 exceeds the row's share
    2 E(x) plus twice the judge's float64 error twice (4 Ej), with U widened and L narrowed by the
    slack s = bound_slack(d). A float64 row, one point, its nearest centroid U from it, the next L
    (a float32, the seed's bound: exactly the distance, an honest bound), centroids 1e5 away making
    Ej large: at L^2 - U^2 = 2 E + 4 Ej - Ej the point is scored, at + Ej it is settled, and at
    + s (L^2 + U^2), short of what the slack takes off, it is scored. With a far centroid moved
    since the seed (a mover) the first bound gives up 50 and the measured one decides, the same
    way. Each time the decision is the seedless one (the point is clear)."""
    x = 0.25
    bound = np.float32(1.0001)
    far = x + 1e5 + 10.0 * np.arange(18)
    before = np.r_[[x - 1.0, x + float(bound)], far][:, None]
    after = before.copy()
    if mover:
        after[-1, 0] += 50.0
    assert x + float(bound) - x == float(bound)  # the seed's bound is the distance itself
    k64 = _notes_factor64(1)
    reach = max(abs(x) + np.abs(after).max(), np.abs(after - x).max())  # the data's mean is x
    row, judge = k64 * reach ** 2, k64 * np.abs(after - x).max() ** 2
    margin = 2 * row + 4 * judge
    s = bound_slack(1)
    past = {"-Ej": -judge, "+Ej": judge, "+slack": s * 2.0}[past]  # s (L^2 + U^2), L and U about 1
    near = np.sqrt(float(bound) ** 2 - margin - past)
    after[0, 0] = before[0, 0] = x - near
    data = np.array([[x]])
    geometry = Geometry.of(data)
    seed = Seed(before, np.zeros(1, dtype=np.int32), np.array([bound], dtype=np.float32))
    assert carried_bounds(seed, after, np)[1].tolist() == ([19] if mover else [])
    counted = scored_rows(monkeypatch)
    found = assign(data, after, FLOAT64, geometry, seeds=[seed])
    assert sum(counted) == scored and found.nearest.tolist() == [0] and found.unique.all()
