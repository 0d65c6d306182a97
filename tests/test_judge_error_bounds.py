"""The per-point error bounds of one scan (kmbench.judge.error_bounds) on small numbers worked out by
hand from judge/NOTES.md: where a row's arithmetic is exact ("Exact ties": integer points whose
every sum of products stays below the precision's exact-integer limit), the bound E(x) over both
anchors ("Distances"), the direct form's E(x, c_a) + E(x, c_b) term by term ("Direct distances"),
and float64 bounds rounded to a float32 on the safe side, not much past it."""

import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from kmbench.judge.error_bounds import (direct_error, exact_points, integer_anchors, round_down, round_up,
                                        row_error_bound)
from kmbench.judge.precision import FLOAT32, distance_factor


def test_a_point_is_exact_while_4_d_largest_squared_stays_below_the_limit():
    """float32: 2^24 = 16,777,216. d = 2, no anchor: 8 * 1448^2 = 16,773,632 is below, 8 * 1449^2 is
    not; with anchors of 1, 1447 is the last. A point off the integers is never exact."""
    x = np.array([[1448.0, 0.0], [-1449.0, 0.0], [3.5, 1.0], [0.0, -1447.0], [0.0, 1448.0]])
    assert exact_points(x, 0.0, FLOAT32, np).tolist() == [True, False, False, True, True]
    assert exact_points(x, 1.0, FLOAT32, np).tolist() == [False, False, False, True, False]
    assert exact_points(np.array([[2048.0], [2047.0]]), 0.0, FLOAT32, np).tolist() == [False, True]  # 4 * 2048^2 = 2^24: not below


def test_anchors_are_integer_only_where_centroids_and_mean_both_are():
    centroids, mean = np.array([[1.0, -7.0], [3.0, 2.0]]), np.array([0.0, 5.0])
    assert integer_anchors(centroids, mean, np) == 12.0  # |-7| + |5|
    assert integer_anchors(centroids + [[0.5, 0.0], [0.0, 0.0]], mean, np) is None
    assert integer_anchors(centroids, mean + [0.0, 0.25], np) is None


def test_the_row_error_bound_takes_the_worse_anchor():
    """E(x) = K (|x - a| + max |c - a|)^2 over a in {origin, mean}: point 0 is worse about the origin
    ((3 + 1)^2 = 16 against (1 + 2)^2 = 9), point 1 about the mean ((4 + 2)^2 = 36 against 25)."""
    points = SimpleNamespace(x=np.zeros((2, 5)), norm=np.array([3.0, 4.0]), centred_norm=np.array([1.0, 4.0]))
    got = row_error_bound(points, 1.0, 2.0, FLOAT32, np)  # max |c| = 1, max |c - mean| = 2
    np.testing.assert_allclose(got, distance_factor(FLOAT32, 5) * np.array([16.0, 36.0]), rtol=1e-15)


def test_the_direct_forms_error_term_by_term():
    """factor (d_a + d_b) + 4 u S (|x - c_a| + |x - c_b|) + 8 u^2 S^2 with S = 10, factor 1e-3, u 1e-2:
    d_a = 16, d_b = 9 give 25e-3 + 4e-2 * 10 * (4 + 3) + 8e-4 * 100; d_b = 1/4 gives a root of 1/2.
    A slightly negative distance (cancellation) counts as 0 under the root, on either side."""
    d_a, d_b = np.array([16.0, 16.0, -1e-9, 16.0]), np.array([9.0, 0.25, 9.0, -1e-9])
    got = direct_error(d_a, d_b, np.full(4, 10.0), 1e-3, 1e-2)
    roots = np.array([4 + 3, 4 + 0.5, 0 + 3, 4 + 0])
    np.testing.assert_allclose(got, 1e-3 * (d_a + d_b) + 0.4 * roots + 0.08, rtol=1e-12)


VALUES = np.array([0.0, 1e-45, 1e-40, 3e-39, 1.0, 1.0 + 2.0 ** -30, np.pi * 1e10, 3.0e38])


def test_rounding_up_lands_at_or_above_within_two_float32_steps():
    up = round_up(VALUES, np)
    assert up.dtype == np.float32 and (up.astype(np.float64) >= VALUES).all()
    assert (up.astype(np.float64) <= VALUES * (1 + 2.0 ** -21) + 2.0 ** -148).all()
    assert up[0] > 0  # a bound of 0 would make a zero-width allowance out of a rounding
    assert round_up(np.array([1.0]), np)[0] == 1 + 2.0 ** -22  # the documented widening: two float32 steps at 1


def test_rounding_down_lands_at_or_below_within_two_float32_steps():
    down = round_down(VALUES, np)
    assert down.dtype == np.float32 and (down.astype(np.float64) <= VALUES).all() and (down >= 0).all()
    assert round_down(np.array([1.0]), np)[0] == 1 - 2.0 ** -22
    assert (down.astype(np.float64) >= VALUES * (1 - 2.0 ** -21) - 2.0 ** -148).all()


def test_past_float32s_largest_up_is_inf_and_down_is_the_largest_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert round_up(np.array([1e39]), np)[0] == np.inf
        assert round_down(np.array([1e39]), np)[0] == np.finfo(np.float32).max
