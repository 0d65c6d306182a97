"""The work a seeded scan does (kmbench.judge.scan.assign, NOTES.md "Carried bounds"): which
points each seed's carried bounds are tried on, which the scorer scores, and the lower bounds a
scan keeps for later ones. The judge is meant to cost about the work it judges, so how much it
does is behaviour: a seed first tried on a sample of a large chunk and passed over when it settles
almost none of it, a seed not read once every point is settled, a kept bound as tight as the
scores allow (a looser one is still a bound, but a later seed settles fewer points with it).

A far centroid that moves far makes every seed's first bound give up (every other centroid may
have come 2,000 closer), so every point a seed is tried on has the far mover's distance measured
(`measured_lower`): what it is given is exactly the points the seed is tried on."""

import numpy as np
import pytest

from kmbench.judge import scan
from kmbench.judge.precision import FLOAT32, FLOAT64
from kmbench.judge.scan import Geometry, assign
from kmbench.judge.seeds import Seed
from tests.test_judge_seeds import scored_rows


def tried_points(monkeypatch, data):
    """Per carry of a seed, the indices (into data) of the points it was tried on."""
    index_of = {row.tobytes(): i for i, row in enumerate(data)}
    tried = []
    original = scan.measured_lower

    def recording(below, was, x, c64, movers, xp):
        tried.append([index_of[np.asarray(row, dtype=data.dtype).tobytes()] for row in x])
        return original(below, was, x, c64, movers, xp)

    monkeypatch.setattr(scan, "measured_lower", recording)
    return tried


def grid_problem(n, seed=5):
    """n points within 3 of their own of 20 centroids on a grid 10 apart (clear by far), a 21st
    centroid far away that moves 2,000 since the seed; the seed's bounds (a float64 scan)."""
    rng = np.random.default_rng(seed)
    centres = np.array([[10.0 * i, 10.0 * j] for i in range(5) for j in range(4)] + [[1000.0, 1000.0]])
    data = (centres[rng.integers(0, 20, n)] + rng.uniform(-3, 3, (n, 2))).astype(np.float32)
    assert len({row.tobytes() for row in data}) == n  # every point known by its coordinates
    geometry = Geometry.of(data)
    after = centres.copy()
    after[20] += 2000.0
    good = assign(data, centres, FLOAT64, geometry).seed(centres)
    return data, geometry, after, good


def knowing(good, which):
    """The seed with its lower bounds kept only where `which` (0, a bound that proves nothing, elsewhere)."""
    return Seed(good.centroids, good.nearest, np.where(which, good.lower, 0).astype(np.float32))


@pytest.mark.parametrize("past", [0, 1])
def test_a_seed_is_tried_on_a_sample_of_a_chunk_past_probe_from_and_passed_over_if_it_settles_none(monkeypatch, past):
    """A chunk of PROBE_FROM points is tried whole; one point more, and a seed is first tried on
    every (n // PROBE_POINTS)th point from the first. A seed that knows no point's bound settles
    none of the sample and is not tried on the rest: every point is scored, once."""
    n = scan.PROBE_FROM + past
    data, geometry, after, good = grid_problem(n)
    tried = tried_points(monkeypatch, data)
    counted = scored_rows(monkeypatch)
    assign(data, after, FLOAT32, geometry, seeds=[knowing(good, np.zeros(n, dtype=bool))])
    sample = list(range(0, n, n // scan.PROBE_POINTS))
    assert tried == ([sample] if past else [list(range(n))])
    assert sum(counted) == n


def test_a_seed_that_settles_enough_of_its_sample_is_tried_on_the_chunk_and_the_next_on_what_it_left(monkeypatch):
    """70,000 points: a seed that knows 40% of the bounds settles that share of its sample and is
    tried on the whole chunk; the 42,000 points it leaves (past PROBE_FROM still) give the next
    seed its sample, every (42,000 // PROBE_POINTS)th of them, and that seed, knowing every bound,
    is tried on all of them and settles them: nothing is scored."""
    n = 70_000
    data, geometry, after, good = grid_problem(n)
    partial = np.arange(n) % 5 >= 3
    tried = tried_points(monkeypatch, data)
    counted = scored_rows(monkeypatch)
    found = assign(data, after, FLOAT32, geometry, seeds=[knowing(good, partial), good])
    left = np.nonzero(~partial)[0]
    assert left.size > scan.PROBE_FROM
    assert tried == [list(range(0, n, n // scan.PROBE_POINTS)), list(range(n)),
                     left[:: left.size // scan.PROBE_POINTS].tolist(), left.tolist()]
    assert sum(counted) == 0 and found.unique.all()
    np.testing.assert_array_equal(found.nearest, good.nearest)


def test_a_seed_that_settles_exactly_probe_settled_of_its_sample_is_tried_on_the_chunk(monkeypatch):
    """32,960 points, a sample of 2,060 (every 16th); the seed knows the bounds of 103 sampled
    points, 5% of the sample exactly (PROBE_SETTLED, not less): it is tried on the whole chunk,
    settles those 103 and the scorer scores the others."""
    n = 32_960
    step = n // scan.PROBE_POINTS
    sample = np.arange(0, n, step)
    assert sample.size * scan.PROBE_SETTLED == 103 and n > scan.PROBE_FROM
    data, geometry, after, good = grid_problem(n)
    known = np.zeros(n, dtype=bool)
    known[sample[:103]] = True
    tried = tried_points(monkeypatch, data)
    counted = scored_rows(monkeypatch)
    assign(data, after, FLOAT32, geometry, seeds=[knowing(good, known)])
    assert tried == [sample.tolist(), list(range(n))]
    assert sum(counted) == n - 103


def test_seeds_after_every_point_is_settled_are_not_tried_and_nothing_is_scored(monkeypatch):
    """A first seed that knows every bound but point 7's settles all the others; the second settles
    point 7, the last open one; the third is not tried (no point left) and the scorer is not
    called at all."""
    n = 2000
    data, geometry, after, good = grid_problem(n)
    tried = tried_points(monkeypatch, data)
    counted = scored_rows(monkeypatch)
    found = assign(data, after, FLOAT32, geometry, seeds=[knowing(good, np.arange(n) != 7), good, good])
    assert tried == [list(range(n)), [7]]
    assert counted == [] and found.unique.all()
    np.testing.assert_array_equal(found.nearest, good.nearest)


@pytest.mark.parametrize("k", [5, 300])  # few centroids: every one scored in float64; many: a k-d tree's nearest few
def test_a_near_tie_keeps_its_second_nearest_distance_as_its_lower_bound(k):
    """A float32 row 1,000 from the origin, a point between each two neighbouring centroids (2
    apart), 1 + 0.01..0.05 from the lower one: every point is a near-tie, scored again in float64.
    The lower bound it keeps for a later scan is its own second-nearest distance less the judge's
    float64 error (about 1e-11 here), not the batch's smallest or its nearest's: a weaker one would
    still be a bound, but a later seed would settle fewer points with it."""
    centres = 1000.0 + 2.0 * np.arange(k, dtype=np.float64)[:, None]
    offset = 1 + 0.01 * (1 + np.arange(k - 1) % 5)
    data = (centres[:-1] + offset[:, None]).astype(np.float32)
    found = assign(data, centres, FLOAT32, Geometry.of(data))
    assert not found.unique.any()  # the premise: each a near-tie, decided by the float64 re-check
    distances = np.abs(data.astype(np.float64) - centres[:, 0][None, :])
    second = np.sort(distances, axis=1)[:, 1]
    assert (found.lower <= second).all()
    np.testing.assert_allclose(found.lower, second, rtol=1e-6)
