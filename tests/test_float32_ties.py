"""Which points `kmbench.protocol.reference.two_nearest` calls float32 ties: the width the assign
task (kmbench.tasks.assign) allows a label to go to its other nearest centroid. Too wide a width
passes a wrong kernel, too narrow a one fails a right kernel, so each term of both widths (the
direct form's and the expanded form's, on coordinates moved by `center`) is pinned by a point just
inside the width and one just outside it: the widths below are worked out by hand from the rule in
two_nearest's docstring, and the points' gaps d2 - d1 are 0.1% either side of them."""

import numpy as np

from kmbench.protocol import reference, residence
from kmbench.tasks.assign import AssignOracle, AssignProblem, AssignResult, judge

EPS = float(np.finfo(np.float32).eps)
INSIDE, OUTSIDE = 0.999, 1.001


def _ties(data, centroids, center=None):
    """(nearest, second nearest, tie) of every point, over two_nearest's chunks."""
    parts = [(first, second, near) for _, first, second, _, _, near in
             reference.two_nearest(np.asarray(data, dtype=np.float64), np.asarray(centroids), center=center)]
    return tuple(np.concatenate(column) for column in zip(*parts))


def test_the_direct_width_near_the_origin():
    """Centroids at -2 and 2, a point at t: d1, d2 ~ 4, gap 8t. Direct width:
    eps ((|x - a| + |x - b|) max(|x|, |a|, |b|) + 2 (d1 + d2)) = eps (4 * 2 + 2 * 8) = 24 eps; the
    expanded one (centred on the origin): eps (|a|^2 + |b|^2 + 2 |x| (|a| + |b|)) ~ 8 eps. A far point
    (100) in the same chunk must not widen the others' width."""
    width = 24 * EPS
    t = np.array([INSIDE, OUTSIDE]) * width / 8
    first, second, tie = _ties(np.array([[t[0]], [t[1]], [100.0]]), np.array([[-2.0], [2.0]]))
    assert first.tolist() == [1, 1, 1] and second.tolist() == [0, 0, 0]
    assert tie.tolist() == [True, False, False]


def test_the_direct_width_of_a_point_farther_out_than_the_centroids():
    """Centroids at (-2, 0) and (2, 0), a point at (t, 10): |x| = 10 sets the scale, d1, d2 ~ 104,
    gap 8t. Direct width eps (2 sqrt(104) * 10 + 4 * 104); expanded eps (4 + 4 + 2 * 10 * 4) is less."""
    width = EPS * (2 * np.sqrt(104) * 10 + 4 * 104)
    t = np.array([INSIDE, OUTSIDE]) * width / 8
    _, _, tie = _ties(np.array([[t[0], 10.0], [t[1], 10.0]]), np.array([[-2.0, 0.0], [2.0, 0.0]]))
    assert tie.tolist() == [True, False]


def test_the_expanded_width_far_from_the_centre():
    """Centroids at 99 and 101, a point at 100 + t: gap 4t. Centred on the origin (no `center`), the
    expanded width eps (99^2 + 101^2 + 2 * 100 * (99 + 101)) = 60002 eps outweighs the direct one
    (eps (2 * 101 + 2 * 2) = 206 eps)."""
    width = 60002 * EPS
    t = np.array([INSIDE, OUTSIDE]) * width / 4
    _, _, tie = _ties(100 + t[:, None], np.array([[99.0], [101.0]]))
    assert tie.tolist() == [True, False]


def test_the_expanded_width_is_measured_from_the_centre_given():
    """The same centroids and points centred on 50 (as the assign task centres on the data's mean):
    eps (49^2 + 51^2 + 2 * 50 * (49 + 51)) = 15002 eps, a quarter of the width about the origin."""
    width = 15002 * EPS
    t = np.array([INSIDE, OUTSIDE]) * width / 4
    _, _, tie = _ties(100 + t[:, None], np.array([[99.0], [101.0]]), center=np.array([50.0]))
    assert tie.tolist() == [True, False]


def test_float32_centroids_far_out_leave_clear_points_clear():
    """Centroids stored in float32 at +-1e20 (|c|^2 = 1e40 overflows float32, not float64): a point
    on a centroid is 4e40 nearer it than the other, far outside any float32 rounding; the point
    halfway is an exact tie."""
    centroids = np.array([[-1e20], [1e20]], dtype=np.float32)
    _, _, tie = _ties(np.array([[-1e20], [1e20], [0.0]], dtype=np.float32), centroids)
    assert tie.tolist() == [False, False, True]


def test_a_point_on_two_equal_centroids_may_take_either():
    """Two equal centroids, the points on them, centred on the data's mean: both distances are 0 and so
    is every width; the gap (0) is within it, so a row may answer either index."""
    data = np.array([[3.0, 4.0], [3.0, 4.0]], dtype=np.float32)
    problem = AssignProblem(data, data.copy(), np.full(2, -1))
    oracle = AssignOracle.compute(problem)
    assert oracle.tie.all() and oracle.labels.tolist() == [0, 0]
    assert judge(AssignResult(np.array([1, 1]), True), oracle) == ("ok", "")


def test_chunks_hold_the_distances_of_chunk_elements(monkeypatch):
    """A chunk is as many points as leave its n x k distances within chunk_elements (8 centroids,
    80 elements: 10 points), whatever the dimension, so k = 5,000 centroids stay in bounded memory."""
    monkeypatch.setattr(residence, "CHUNK_ELEMENTS", 80)
    rng = np.random.default_rng(0)
    data, centroids = rng.standard_normal((95, 2)), rng.standard_normal((8, 2))
    sizes = [rows.stop - rows.start for rows, *_ in reference.two_nearest(data, centroids)]
    assert sizes == [10] * 9 + [5]
