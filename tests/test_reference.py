import numpy as np
import pytest

from kmbench.protocol import reference, residence
from tests.conftest import blob_data


def loop_lloyd(data, centroids, iterations):
    """The slowest possible statement of Lloyd's algorithm, to check the oracle against."""
    data = data.astype(np.float64)
    centroids = centroids.astype(np.float64).copy()
    for _ in range(iterations):
        sums = np.zeros_like(centroids)
        counts = np.zeros(len(centroids))
        for point in data:
            best = min(range(len(centroids)), key=lambda j: ((point - centroids[j]) ** 2).sum())
            sums[best] += point
            counts[best] += 1
        for j in range(len(centroids)):
            if counts[j]:
                centroids[j] = sums[j] / counts[j]
    return centroids


def test_reference_matches_loop_statement(rng):
    data = blob_data(rng, n=300, d=3, k=4)
    start = data[rng.choice(len(data), 4, replace=False)]
    run = reference.lloyd(data, start, 7)
    got, labels = run.centroids, run.labels
    np.testing.assert_allclose(got, loop_lloyd(data, start, 7), rtol=1e-12, atol=1e-12)
    assert labels.shape == (300,)


def test_empty_cluster_keeps_its_centroid(rng):
    data = blob_data(rng, n=200, d=2, k=2)
    far = np.array([[1e6, 1e6]])
    start = np.vstack([data[:2], far])
    run = reference.lloyd(data, start, 5)
    got, labels = run.centroids, run.labels
    assert not (labels == 2).any()
    np.testing.assert_array_equal(got[2], far[0])


def test_chunking_does_not_change_the_result(rng, monkeypatch):
    data = blob_data(rng, n=1000, d=2, k=5)
    start = data[:5]
    whole = reference.lloyd(data, start, 10).centroids
    monkeypatch.setattr(residence, "CHUNK_ELEMENTS", 37)  # many ragged chunks
    chunked = reference.lloyd(data, start, 10).centroids
    np.testing.assert_array_equal(whole, chunked)


def test_inertia_is_sum_of_nearest_squared_distances(rng):
    data = blob_data(rng, n=50, d=2, k=3).astype(np.float64)
    centroids = data[:3]
    expected = sum(min(((p - c) ** 2).sum() for c in centroids) for p in data)
    assert np.isclose(reference.inertia(data, centroids), expected, rtol=1e-12)


def test_float32_lloyd_keeps_float64s_labels_and_means_to_float32_rounding(rng):
    """The float32 model of a careful program (block sums of offsets from the old centroid) on clear
    blobs: the same labels as float64, means within float32 rounding of the blobs' size, and the last
    cluster, which no point joins, keeps its centroid (so it is absent from every block's sums)."""
    data = blob_data(rng, n=3 * reference.SUM_BLOCK + 5, d=3, k=4)
    start = np.vstack([data[:4], np.full((1, 3), 1e3)])
    exact, careful = reference.lloyd(data, start, 3), reference.lloyd(data, start, 3, dtype=np.float32)
    assert np.array_equal(careful.labels, exact.labels) and not (exact.labels == 4).any()
    np.testing.assert_allclose(careful.centroids, exact.centroids, rtol=0, atol=1e-5)
    np.testing.assert_array_equal(careful.centroids[4], start[4])

def test_high_d_distances_are_exact_enough_far_from_the_origin():
    """Above EXPANDED_FROM_DIM the oracle expands the distance on centred coordinates: against
    the direct sum of squared differences it stays within 1e-9 of the spread squared, even
    with the data a million spreads from the origin."""
    from kmbench.protocol.reference import EXPANDED_FROM_DIM, squared_distances

    rng = np.random.default_rng(3)
    d = EXPANDED_FROM_DIM + 7
    points = rng.standard_normal((300, d)) + 1e6
    centroids = rng.standard_normal((20, d)) + 1e6
    direct = ((points[:, None, :] - centroids[None, :, :]) ** 2).sum(axis=2)
    assert np.abs(squared_distances(points, centroids) - direct).max() <= 1e-9 * d


@pytest.mark.parametrize("case", ["float32 inputs", "far out in one coordinate", "a thousandth of the size"])
def test_high_d_distances_are_float64_and_centred_on_the_centroids_mean(case):
    """The same bound, relative to the points' size, where inputs come in float32 (computed in float64
    all the same), where the data are far out along one coordinate only (centred per coordinate, not
    by one number), and where every distance is far below 1 (clamped at 0, nowhere else)."""
    from kmbench.protocol.reference import EXPANDED_FROM_DIM, squared_distances

    rng = np.random.default_rng(4)
    d = EXPANDED_FROM_DIM + 7
    points, centroids = rng.standard_normal((300, d)), rng.standard_normal((20, d))
    size = 1.0
    if case == "float32 inputs":
        points, centroids = (points + 1e3).astype(np.float32), (centroids + 1e3).astype(np.float32)
    elif case == "far out in one coordinate":
        points[:, 0] += 1e6
        centroids[:, 0] += 1e6
    else:
        size = 1e-3
        points, centroids = points * size, centroids * size
    direct = ((points[:, None, :].astype(np.float64) - centroids[None, :, :]) ** 2).sum(axis=2)
    got = squared_distances(points, centroids)
    assert got.dtype == np.float64 and np.abs(got - direct).max() <= 1e-9 * d * size**2


def test_nearest_stays_the_direct_forms_answer_when_the_product_errs_by_all_its_bound_allows(monkeypatch):
    """Each form may err by gamma_{d+8}(u) (|x'| + max |c'|)^2 (primes: centred on the centroids' mean),
    so the product may differ from the direct form by twice that. A product pushed that far against
    the direct form's winner at every halfway point (its runner-up made nearer) must still leave every
    label the direct form's: the margin has to catch each push."""
    points, centres = _halfway_points(40, 6, 600, seed=5)
    want = reference.direct_squared_distances(points, centres).argmin(axis=1)
    middle = centres.mean(axis=0)
    reach = np.sqrt(((centres - middle) ** 2).sum(axis=1)).max()
    bound = reference.form_error(40, 2.0**-53) * (np.sqrt(((points - middle) ** 2).sum(axis=1)) + reach) ** 2
    original = reference._expanded

    def pushed(p, c, xp):
        _, norms, reach_ = original(p, c, xp)
        assert len(p) == len(points)  # one chunk
        distances = reference.direct_squared_distances(p, c, xp)
        winner = distances.argmin(axis=1)
        distances -= 2 * bound[:, None]  # every other centroid nearer by twice the bound ...
        distances[np.arange(len(p)), winner] += 4 * bound  # ... the winner farther by as much
        return distances, norms, reach_

    monkeypatch.setattr(reference, "_expanded", pushed)
    assert np.array_equal(reference.nearest(points, centres)[0], want)


def test_settle_re_decides_exactly_the_points_whose_gap_is_not_above_the_margin():
    """settle keeps the caller's winner where its gap to the runner-up is above the margin
    margin_factor(d, u) (|p'| + max |c'|)^2 + UNDERFLOW, u = eps/2 the unit roundoff (the cheap
    path: no direct pass for those points), and asks the direct form for the rest, a row whose
    margin overflowed included even when its gap overflowed too. Every winner handed in here is
    the direct form's farthest centroid, so a label shows whether its point was re-decided."""
    rng = np.random.default_rng(7)
    d = reference.EXPANDED_FROM_DIM + 7
    points, centres = rng.standard_normal((6, d)), rng.standard_normal((3, d))
    direct = reference.direct_squared_distances(points, centres)
    farthest, nearest_ = direct.argmax(axis=1), direct.argmin(axis=1)
    norms, reach = np.linalg.norm(points, axis=1), 1.5  # any |p'| and reach: the margin follows them
    norms[5] = np.inf
    margin = reference.margin_factor(d, 2.0**-53) * (norms + reach) ** 2 + reference.UNDERFLOW[8]
    gap = margin * np.array([0.5, 0.9, 1.1, 3.0, 10.0, 1.0])
    gap[5] = np.inf
    labels, best = reference.settle(points, centres, farthest.copy(), gap, norms, reach, np, np.float64)
    re_decided = [True, True, False, False, False, True]
    assert labels.tolist() == np.where(re_decided, nearest_, farthest).tolist()
    assert np.array_equal(best, direct[np.arange(len(points)), labels])


# ---------------------------------------------------------------- host data in blocks
# Data larger than the GPU stay in host memory and reach the oracle a block at a time. On the
# CPU the same path is taken by telling the reference that NumPy cannot compute on the data in
# place, with blocks and chunks small enough that their edges fall inside one another.

def _in_blocks(monkeypatch, block_rows: int, chunk_elements: int, d: int):
    monkeypatch.setattr(residence, "_computes_in_place", lambda data, xp: False)
    monkeypatch.setattr(residence, "_free_bytes", lambda xp: 0)
    monkeypatch.setattr(residence, "BLOCK_BYTES", block_rows * d * 4)
    monkeypatch.setattr(residence, "CHUNK_ELEMENTS", chunk_elements)


def _blob_problem(seed=3, n=10_000, d=3, k=7):
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-20, 20, size=(k, d))
    data = (centers[rng.integers(0, k, n)] + rng.standard_normal((n, d))).astype(np.float32)
    return data, data[rng.choice(n, k, replace=False)].astype(np.float64)


def test_blocks_cover_every_row_once_in_whole_multiples(monkeypatch):
    data, _ = _blob_problem(n=1000)
    _in_blocks(monkeypatch, block_rows=300, chunk_elements=1 << 23, d=3)
    pieces = list(reference.blocks(data, np, multiple=128))
    assert [first for first, _ in pieces] == [0, 256, 512, 768]  # 300 rows rounded down to 2 x 128
    assert np.array_equal(np.concatenate([block for _, block in pieces]), data)


def test_block_edges_inside_chunks_change_nothing(monkeypatch):
    """The oracle's every measure on data in blocks of 250 rows (chunks of 100 for the distances,
    4096 for the float32 sums) equals the same on the data whole."""
    data, start = _blob_problem()
    k = start.shape[0]
    whole = reference.lloyd(data, start, 4)
    whole32 = reference.lloyd(data, start, 4, dtype=np.float32)
    expected = (reference.inertia(data, whole.centroids), reference.mean(data), reference.spread(data))
    _in_blocks(monkeypatch, block_rows=250, chunk_elements=100 * k, d=data.shape[1])
    assert reference._chunk_rows(k) == 100
    blocked = reference.lloyd(data, start, 4)
    np.testing.assert_array_equal(blocked.labels, whole.labels)
    np.testing.assert_allclose(blocked.centroids, whole.centroids, rtol=1e-13)
    blocked32 = reference.lloyd(data, start, 4, dtype=np.float32)
    np.testing.assert_allclose(blocked32.centroids, whole32.centroids, rtol=1e-6)
    got = (reference.inertia(data, whole.centroids), reference.mean(data), reference.spread(data))
    for value, want in zip(got, expected):
        np.testing.assert_allclose(value, want, rtol=1e-12)
    nearest_by_rows = np.empty(len(data), dtype=np.int64)
    for rows, first, *_ in reference.two_nearest(data, whole.centroids):
        nearest_by_rows[rows] = first
    np.testing.assert_array_equal(nearest_by_rows, reference.nearest(data, whole.centroids)[0])


# ------------------------------------------------------- the oracle is a function of its inputs

def _halfway_points(d: int, k: int, n: int, seed: int = 0):
    """Points at the rounded midpoints of pairs of centres: the ties a product's rounding decides."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((k, d)) * 3 + 1.0
    return (centres[rng.integers(0, k, n)] + centres[rng.integers(0, k, n)]) / 2, centres


@pytest.mark.parametrize("d", [8, 40, 64])
def test_nearest_is_the_direct_forms_answer_whatever_the_rows_it_is_called_with(d):
    """Labels and distances are the direct form's (lowest index on a tie) for halfway points, called
    on all rows at once, a row at a time and in slices of 7: the same bits every way. Before the
    near-ties were re-decided, 11,051 of 20,000 such labels changed between the first two at d = 64,
    and 3,340 between OpenBLAS's Haswell and Sandybridge kernels."""
    points, centres = _halfway_points(d, 6, 700)
    direct = reference.direct_squared_distances(points, centres)
    want_labels = direct.argmin(axis=1)
    want_best = direct[np.arange(len(points)), want_labels]
    calls = {"all rows": [slice(0, len(points))],
             "one row a call": [slice(i, i + 1) for i in range(len(points))],
             "slices of 7": [slice(i, i + 7) for i in range(0, len(points), 7)]}
    for how, slices in calls.items():
        labels = np.concatenate([reference.nearest(points[s], centres)[0] for s in slices])
        best = np.concatenate([reference.nearest(points[s], centres)[1] for s in slices])
        assert np.array_equal(labels, want_labels), how
        assert np.array_equal(best, want_best), how


def test_without_the_margin_the_product_decides_halfway_points_and_they_differ(monkeypatch):
    """The margin is what re-decides near-ties: with it set to nothing, the product's rounding picks
    many halfway points' labels, which then differ from the direct form's."""
    points, centres = _halfway_points(64, 6, 5000)
    want = reference.direct_squared_distances(points, centres).argmin(axis=1)
    assert np.array_equal(reference.nearest(points, centres)[0], want)
    monkeypatch.setattr(reference, "margin_factor", lambda d, unit: -np.inf)
    monkeypatch.setattr(reference, "UNDERFLOW", {8: -np.inf, 4: -np.inf})
    assert not np.array_equal(reference.nearest(points, centres)[0], want)


def test_nearest_in_float32_is_the_direct_forms_answer_in_float32():
    points, centres = _halfway_points(48, 5, 2000, seed=4)
    direct = reference.direct_squared_distances(points, centres, dtype=np.float32)
    labels, best = reference.nearest(points, centres, dtype=np.float32)
    assert np.array_equal(labels, direct.argmin(axis=1))
    assert best.dtype == np.float32 and np.array_equal(best, direct[np.arange(len(points)), labels])


def test_points_whose_squares_overflow_are_decided_by_the_direct_form():
    """Coordinates of 1e200: every product overflows, so no label is certified by the margin; the
    direct form then decides (its infinities tie, lowest index) instead of the product's NaNs."""
    rng = np.random.default_rng(9)
    centres = rng.standard_normal((4, 40)) * 1e200
    points = centres[rng.integers(0, 4, 50)]
    with np.errstate(over="ignore", invalid="ignore"):
        labels, _ = reference.nearest(points, centres)
        want = reference.direct_squared_distances(points, centres).argmin(axis=1)
    assert np.array_equal(labels, want)


@pytest.mark.parametrize("block_rows", [1000, 2 * reference.SUM_BLOCK])
@pytest.mark.parametrize("source", [np.float32, np.float64])
def test_the_float32_models_sums_are_the_same_in_blocks_as_whole(monkeypatch, source, block_rows):
    """The float32 update model on data read in blocks (a block a whole number of SUM_BLOCK rows,
    so that every SUM_BLOCK-row sum is the same rows in the same order; one or two such sums a
    block) gives the bits it gives on the data whole; and float64 data modelled in float32 are
    first rounded to float32, as a float32 program holds them."""
    data, start = _blob_problem(n=3 * reference.SUM_BLOCK + 517)
    labels = reference.nearest(data, start)[0]
    rounded = reference.update(data, labels, start, dtype=np.float32)
    data = data.astype(source)
    whole = reference.update(data, labels, start, dtype=np.float32)
    np.testing.assert_array_equal(whole, rounded)
    _in_blocks(monkeypatch, block_rows=block_rows, chunk_elements=reference.SUM_BLOCK * start.shape[0],
               d=data.shape[1])
    assert len(list(reference.blocks(data, np))) > 1  # the premise: the data are read in several blocks
    np.testing.assert_array_equal(reference.update(data, labels, start, dtype=np.float32), whole)


def _bisector_points(d: int, n: int, scale: float, dtype, seed: int = 1):
    """Points on the plane halfway between two centres (k = 2, so each point's runner-up is the other
    centre), both scaled by `scale` and stored in `dtype`: near-ties in every coordinate."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((2, d)) * 3 + 1.0
    across = (centres[1] - centres[0]) / np.linalg.norm(centres[1] - centres[0])
    along = rng.standard_normal((n, d))
    along -= (along @ across)[:, None] * across
    return ((centres.mean(axis=0) + along) * scale).astype(dtype), (centres * scale).astype(dtype)


@pytest.mark.parametrize("dtype, scale", [(np.float64, 1.0), (np.float64, 1e-6), (np.float32, 1e-22)])
def test_nearest_between_two_centroids_is_the_direct_forms_answer_at_any_size(dtype, scale):
    """The product's rounding decides many points on a bisector its own way; the margin (which grows
    with the size squared, and in float32 below 1e-19 or so, where squares are subnormal, no longer
    shrinks with it) must send each of them to the direct form, with two centroids as with many."""
    points, centres = _bisector_points(40, 2000, scale, dtype)
    direct = reference.direct_squared_distances(points, centres, dtype=dtype)
    want = direct.argmin(axis=1)
    with np.errstate(under="ignore"):
        assert (reference._expanded(points, centres, np)[0].argmin(axis=1) != want).any()  # the premise
        labels, best = reference.nearest(points, centres, dtype=dtype)
    assert np.array_equal(labels, want)
    assert np.array_equal(best, direct[np.arange(len(points)), want])


def test_nearest_with_one_centroid_gives_every_point_to_it_above_the_expanded_dimension():
    rng = np.random.default_rng(2)
    points, centre = rng.standard_normal((50, 40)), rng.standard_normal((1, 40))
    labels, best = reference.nearest(points, centre)
    assert not labels.any()
    assert np.array_equal(best, reference.direct_squared_distances(points, centre)[:, 0])


def test_nearest_in_float32_computes_in_float32_below_the_expanded_dimension():
    """(0, 0) is 1 + 2^-26 from (1, 2^-13) and 1 from (1, 0): float64 tells them apart, float32 rounds
    the first to 1 too, a tie that goes to the lower index."""
    point, centres = np.zeros((1, 2)), np.array([[1.0, 2.0**-13], [1.0, 0.0]])
    assert reference.nearest(point, centres)[0].tolist() == [1]
    labels, best = reference.nearest(point, centres, dtype=np.float32)
    assert labels.tolist() == [0] and best.dtype == np.float32 and best.tolist() == [1.0]


def test_nearest_holds_one_chunk_of_distances_at_a_time_whatever_k_and_d(monkeypatch):
    """CHUNK_ELEMENTS bounds a chunk's point x centroid distances (rows = elements // k), so that
    1e7 points fit: with chunks of 1,000 distances, 5,000 points and 100 centroids hold, beyond the
    labels and distances they return, a few chunks' worth of bytes, not a (5,000 x 100) matrix."""
    import tracemalloc

    monkeypatch.setattr(residence, "CHUNK_ELEMENTS", 1000)
    rng = np.random.default_rng(3)
    points, centres = rng.standard_normal((5000, 2)), rng.standard_normal((100, 2))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        reference.nearest(points, centres)
        held = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    returned = 5000 * (8 + 8)  # int64 labels, float64 distances
    assert held - returned <= 16 * 1000 * 8  # 16 chunks of float64 distances


def test_mean_and_spread_are_float64_over_ragged_chunks_and_hold_one_chunk(monkeypatch):
    """float32 points 2^24, 1, 1 and 2 (a float32 sum loses the 1s): mean (2^24 + 4) / 4 in float64,
    spread the RMS distance from it, in chunks of two rows (the last ragged); and the float64 copy of
    100,000 float32 rows is made a chunk at a time, not whole."""
    import tracemalloc

    monkeypatch.setattr(residence, "CHUNK_ELEMENTS", 4)  # two rows of two
    data = np.array([[2.0**24, 0.0], [1.0, 0.0], [1.0, 0.0], [2.0, 6.0]], dtype=np.float32)
    mean = (2.0**24 + 4) / 4
    assert reference.mean(data).tolist() == [mean, 1.5]
    squares = [(x - mean) ** 2 + (y - 1.5) ** 2 for x, y in [(2.0**24, 0.0), (1.0, 0.0), (1.0, 0.0), (2.0, 6.0)]]
    assert reference.spread(data) == pytest.approx(np.sqrt(sum(squares) / 4), rel=1e-15)
    monkeypatch.setattr(residence, "CHUNK_ELEMENTS", 2000)
    many = np.ones((100_000, 2), dtype=np.float32)
    tracemalloc.start()
    try:
        reference.spread(many)
        held = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert held < 100_000 * 2 * 8 / 4  # a quarter of the float64 copy: a few chunks of 1,000 rows
