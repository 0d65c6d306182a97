"""The judge's scorers (kmbench.judge.scoring) on the CPU, each route the Scorer may take (a direct
float64 scan for few centroids, a k-d tree for many, a float32 product past KD_TREE_MAX_DIM
dimensions or for a single centroid): each chosen point's two smallest squared distances and its
nearest centroid, within the factor the scorer declares, and that factor the precision the route
computes in. Points with small integer coordinates: their exact squared distances are float64's."""

import numpy as np
import pytest

from kmbench.judge.points import Geometry
from kmbench.judge.precision import FLOAT32, FLOAT64, distance_factor
from kmbench.judge.scoring import DIRECT_MAX_WORK, KD_TREE_MAX_DIM, Scorer


def _scored(d: int, k: int, n: int = 300, seed: int = 0):
    rng = np.random.default_rng(seed + 97 * d + k)
    data = rng.integers(-30, 30, (n, d)).astype(np.float32)
    centroids = rng.integers(-30, 30, (k, d)).astype(np.float64) + 0.5  # no point sits on a centroid
    geometry = Geometry.of(data)
    scorer = Scorer(centroids - geometry.mean, geometry.mean, np)
    return data.astype(np.float64), centroids, geometry, scorer


# route: (d, k), at the edges of each: the float64 scans up to KD_TREE_MAX_DIM dimensions and two
# centroids or more, the direct one up to DIRECT_MAX_WORK = k d.
ROUTES = {"direct": (2, 5), "direct of two": (KD_TREE_MAX_DIM, 2), "direct at its most": (2, DIRECT_MAX_WORK // 2),
          "k-d tree": (2, DIRECT_MAX_WORK // 2 + 1), "product of two": (KD_TREE_MAX_DIM + 1, 2),
          "product": (KD_TREE_MAX_DIM + 1, 7), "one centroid": (2, 1)}
DIRECT = ("direct", "direct of two", "direct at its most")


@pytest.mark.parametrize("route", ROUTES)
def test_each_points_two_smallest_distances_and_nearest_centroid_are_within_the_declared_error(route):
    d, k = ROUTES[route]
    x, centroids, geometry, scorer = _scored(d, k)
    assert scorer.direct == (route in DIRECT) and (scorer.tree is not False) == (route == "k-d tree")
    rows = np.array([5, 0, 299, 5, 120])  # chosen rows, a repeat among them
    d1, d2, nearest = scorer.best_two(geometry.full, rows)
    exact = ((x[rows, None, :] - centroids[None, :, :]) ** 2).sum(axis=2)
    ranked = np.sort(exact, axis=1)
    # The scorer's error: K (|x - mean| + max |c - mean|)^2 (kmbench.judge.scan's spread_term).
    reach = np.linalg.norm(centroids - geometry.mean, axis=1).max()
    error = scorer.factor * (np.linalg.norm(x[rows] - geometry.mean, axis=1) + reach) ** 2
    assert np.all(np.abs(d1 - ranked[:, 0]) <= error)
    if k == 1:
        assert np.all(np.isinf(d2))
    else:
        assert np.all(np.abs(d2 - ranked[:, 1]) <= error)
    clear = ranked[:, 1] - ranked[:, 0] > 2 * error if k > 1 else np.ones(rows.size, bool)
    assert clear.sum() >= 3  # the nearest is decided for most of them
    assert np.array_equal(nearest[clear], exact.argmin(axis=1)[clear])
    # The nearest is an index of the centroids, the one whose score was d1.
    assert np.all(np.abs(exact[np.arange(rows.size), nearest] - d1) <= error)
    whole = scorer.best_two(geometry.full, slice(0, 300))  # every row at once: the same scores
    assert np.array_equal(whole[0][rows], d1) and np.array_equal(whole[2][rows], nearest)


@pytest.mark.parametrize("tf32", [None, "1"])
def test_the_declared_error_is_float64s_for_scans_and_float32s_for_numpys_product(tf32, monkeypatch):
    """CUPY_TF32 tells CuPy's products to use TF32: NumPy's float32 product is float32 whatever it says."""
    if tf32 is None:
        monkeypatch.delenv("CUPY_TF32", raising=False)
    else:
        monkeypatch.setenv("CUPY_TF32", tf32)
    for route, (d, k) in ROUTES.items():
        scorer = _scored(d, k)[3]
        arithmetic = FLOAT64 if route in DIRECT + ("k-d tree",) else FLOAT32
        assert scorer.factor == distance_factor(arithmetic, d), route
