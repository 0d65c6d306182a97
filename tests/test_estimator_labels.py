"""kmbench.KMeans's nearest centres (kmbench/estimator/labels.py): the float64 oracle's labels
and distances (reference.nearest), to the bit, from a matrix product and a margin. Where the
margin is dropped, points halfway between two centres change label, so these tests can fail.
Each test runs three times: on the extension's fused pass (impls/cpu/kmbench_cpu/oracle_nearest.hpp)
as this CPU loads it, on its portable build (no AVX2: other loops), and on the NumPy pass it
replaces where the extension is not built."""

import numpy as np
import pytest

from kmbench.estimator import inprocess
from kmbench.estimator import labels as nearest_module
from kmbench.estimator.labels import nearest
from kmbench.protocol import reference


@pytest.fixture(autouse=True, params=["extension", "portable", "numpy"])
def path(request, monkeypatch):
    if request.param != "numpy" and inprocess.MODULE is None:
        pytest.skip("the extension is not built (no compiler at install)")
    if request.param == "portable":
        from kmbench.estimator import _inproc_portable

        monkeypatch.setattr(inprocess, "MODULE", _inproc_portable)
    if request.param == "numpy":
        monkeypatch.setattr(inprocess, "MODULE", None)
    return "numpy" if request.param == "numpy" else "extension"


def _same_as_oracle(x, centers):
    labels, distances = nearest(x, centers)
    expected_labels, expected_distances = reference.nearest(x, centers)
    return np.array_equal(labels, expected_labels) and np.array_equal(distances, expected_distances)


def _halfway(rng, d, k, n, offset):
    """Points at the rounded midpoints of pairs of centres (a centre with itself too)."""
    centers = rng.standard_normal((k, d)) * 3 + offset
    first, second = rng.integers(0, k, n), rng.integers(0, k, n)
    return (centers[first] + centers[second]) / 2, centers


@pytest.mark.parametrize("seed", range(12))
def test_clusters_near_and_far_from_the_origin_get_the_oracles_bits(seed):
    rng = np.random.default_rng(seed)
    d, k = int(rng.integers(1, 33)), int(rng.integers(1, 60))
    offset, spread = 10.0 ** rng.integers(-3, 7), 10.0 ** rng.integers(-3, 3)
    centers = rng.standard_normal((k, d)) * spread + offset
    x = centers[rng.integers(0, k, 3000)] + rng.standard_normal((3000, d)) * spread
    assert _same_as_oracle(x.astype(rng.choice([np.float32, np.float64])), centers)


@pytest.mark.parametrize("d, offset", [(2, 0.0), (3, 5.0), (8, 1e3)])
def test_points_halfway_between_centres_get_the_oracles_bits(d, offset):
    x, centers = _halfway(np.random.default_rng(d), d, 6, 20_000, offset)
    assert _same_as_oracle(x, centers)


def test_the_margin_is_what_keeps_halfway_points_with_the_oracle(monkeypatch):
    x, centers = _halfway(np.random.default_rng(2), 2, 6, 20_000, 0.0)
    monkeypatch.setattr(nearest_module, "margin_factor", lambda d: 0.0)
    assert not np.array_equal(nearest(x, centers)[0], reference.nearest(x, centers)[0])


def test_exact_ties_and_repeated_centres_go_to_the_lowest_index():
    grid = np.stack(np.meshgrid(np.arange(-4, 5), np.arange(-4, 5)), axis=-1).reshape(-1, 2).astype(np.float32)
    centers = np.array([[0, 0], [2, 0], [0, 2], [2, 0], [-2, -2]], dtype=np.float64)  # centre 3 repeats 1
    labels, _ = nearest(grid, centers)
    assert 3 not in labels and _same_as_oracle(grid, centers)


def test_chunks_of_any_size_give_the_same_answer(monkeypatch):
    x, centers = _halfway(np.random.default_rng(5), 3, 7, 1001, 1.0)
    monkeypatch.setattr(nearest_module, "CHUNK_SCORES", 7 * 64)  # 64 points a chunk, the last one short
    assert _same_as_oracle(x, centers)


def test_one_centre_and_high_dimensions_are_the_oracles_too():
    rng = np.random.default_rng(7)
    assert _same_as_oracle(rng.standard_normal((500, 4)), rng.standard_normal((1, 4)))
    assert _same_as_oracle(rng.standard_normal((500, 40)).astype(np.float32), rng.standard_normal((9, 40)))


def test_points_and_centres_near_the_bottom_of_float64_get_the_oracles_bits():
    """A review's case: at 1e-160 the squares are subnormal, and a margin relative to them alone
    took centre 0 where the oracle takes 2."""
    x = np.array([[3.047917812e-162]])
    centers = np.array([[7.32254498e-162], [2.25868731e-161], [6.37595230e-162]])
    assert _same_as_oracle(x, centers)
    rng = np.random.default_rng(11)
    for scale in (1e-160, 1e-157, 1e-154):
        assert _same_as_oracle(rng.random((200, 2)) * scale, rng.random((6, 2)) * scale)


@pytest.mark.parametrize("offset, d", [(0.0, 2), (1e4, 16), (1e6, 40), (-3.0, 1)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_transforms_distances_are_the_oracles_to_the_spread_and_keep_the_dtype(offset, d, dtype, monkeypatch):
    """transform's distances (labels.distances): within 1e-12 of the spread of the oracle's
    direct sums, near the origin and far from it, in X's dtype, whatever the chunk."""
    from kmbench.estimator.labels import distances

    monkeypatch.setattr(nearest_module, "CHUNK_SCORES", 64)  # chunks of a few rows
    rng = np.random.default_rng(d)
    centers = rng.standard_normal((7, d)) * 2 + offset
    x = (centers[rng.integers(0, 7, 500)] + rng.standard_normal((500, d))).astype(dtype)
    got = distances(x, centers)
    exact = np.sqrt(reference.squared_distances(x, centers))
    assert got.dtype == dtype and got.shape == (500, 7)
    spread = float(np.sqrt(((x - x.mean(axis=0, dtype=np.float64)) ** 2).sum(axis=1).mean()))
    tolerance = 1e-12 * spread if dtype == np.float64 else 1e-6 * (spread + np.abs(exact).max())
    np.testing.assert_allclose(got, exact.astype(dtype), rtol=0, atol=tolerance)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_point_that_is_a_centre_is_at_exactly_zero_from_it(dtype):
    """scikit-learn's test_transform asks transform(cluster_centers_) for a zero diagonal, exactly:
    the expanded form moved by the centres' mean left about 1e-8 there."""
    from kmbench.estimator.labels import distances

    centers = (np.random.default_rng(4).standard_normal((9, 100)) * 3 + 7).astype(dtype)
    got = distances(centers, centers.astype(np.float64))
    assert np.array_equal(np.diagonal(got), np.zeros(9, dtype=dtype))
    exact = np.sqrt(reference.squared_distances(centers, centers))  # expanded at d = 100: not 0 there
    apart = ~np.eye(9, dtype=bool)
    np.testing.assert_allclose(got[apart], exact[apart].astype(dtype), rtol=1e-6)


# ------------------------------------------------------------------ labels alone (predict)

@pytest.mark.parametrize("seed", range(8))
def test_labels_alone_are_the_oracles_in_either_precision(seed):
    """nearest_labels: a product in X's precision (float32 data: float32) and a margin covering it
    and the oracle; clusters near and far from the origin, d up to 130, both dtypes."""
    from kmbench.estimator.labels import nearest_labels

    rng = np.random.default_rng(100 + seed)
    d, k = int(rng.choice([2, 17, 40, 64, 130])), int(rng.integers(1, 60))
    offset, spread = 10.0 ** rng.integers(-3, 7), 10.0 ** rng.integers(-3, 3)
    centers = rng.standard_normal((k, d)) * spread + offset
    x = (centers[rng.integers(0, k, 3000)] + rng.standard_normal((3000, d)) * spread).astype(
        [np.float32, np.float64][seed % 2])
    assert np.array_equal(nearest_labels(x, centers), reference.nearest(x, centers)[0])


@pytest.mark.parametrize("d, dtype", [(40, np.float32), (64, np.float64), (3, np.float32)])
def test_labels_alone_keep_halfway_points_with_the_oracle_and_the_margin_is_why(d, dtype, monkeypatch, path):
    """Halfway points are where a float32 or float64 product's rounding picks the winner. predict's
    labels are the oracle's, and the oracle's are the direct form's (0 + (x_0 - c_0)^2 + ..., in
    that order, lowest index on a tie): a function of point and centres, so the same on any CPU and
    BLAS kernel. Without the margin the product's own rounding shows through (the extension's
    product is float64's, which float32 points, no longer halfway once rounded, do not trouble)."""
    from kmbench.estimator.labels import nearest_labels

    x, centers = _halfway(np.random.default_rng(d), d, 6, 20_000, 1.0)
    x = x.astype(dtype)
    expected = reference.nearest(x, centers)[0]
    assert np.array_equal(expected, reference.direct_squared_distances(x, centers).argmin(axis=1))
    assert np.array_equal(nearest_labels(x, centers), expected)
    if path == "extension" and dtype == np.float32:
        return
    monkeypatch.setattr(nearest_module, "margin_factor", lambda d, unit=None: 0.0)
    monkeypatch.setattr(nearest_module, "UNDERFLOW32", 0.0)
    monkeypatch.setattr(nearest_module, "UNDERFLOW", 0.0)
    assert not np.array_equal(nearest_labels(x, centers), expected)


def test_labels_alone_of_centres_too_far_for_a_float32_product_are_the_oracles():
    """Centres 1e19 from their mean: |c'|^2 / 2 would pass float32's range, so the product is
    float64's; tiny data (1e-25) leaves every float32 label to the oracle."""
    from kmbench.estimator.labels import nearest_labels

    rng = np.random.default_rng(3)
    for scale in (1e19, 1e-25):
        centers = rng.standard_normal((5, 40)) * scale
        x = (centers[rng.integers(0, 5, 500)] + rng.standard_normal((500, 40)) * scale / 10).astype(np.float32)
        assert np.array_equal(nearest_labels(x, centers), reference.nearest(x, centers)[0])


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_the_extensions_pass_is_the_oracles_on_any_thread_count(threads, path):
    """Points halfway between centres at d = 16 and 64 (the benchmark's), float32 and float64
    data, a last block of 16 rows left short: the oracle's labels and distances whatever the
    threads. The distances are its two roundings a term, (x - c)^2 then the add: one FMA would
    change last bits here."""
    rng = np.random.default_rng(threads)
    for d, dtype in ((16, np.float64), (64, np.float32), (7, np.float64)):
        x, centers = _halfway(rng, d, 37, 3_001, 2.0)
        labels, distances = nearest(x.astype(dtype), centers, threads)
        expected_labels, expected_distances = reference.nearest(x.astype(dtype), centers)
        assert np.array_equal(labels, expected_labels) and np.array_equal(distances, expected_distances)


def test_a_margin_whose_square_overflows_sends_the_point_to_the_direct_form():
    """|x'| + max |c'| near 2.6e154: its square overflows, so the oracle's margin is inf and the
    direct form decides (every distance inf: index 0). A margin taken as factor * s * s stays
    finite there and would certify the product's winner, centre 1 (found by review)."""
    centres = np.array([[1.3e154, 0.0], [-6.5e153, 1e150], [-6.5e153, -1e150]])
    x = np.array([[0.0, 1.3e154]])
    want_labels, want_distances = reference.nearest(x, centres)
    labels, distances = nearest(x, centres)
    np.testing.assert_array_equal(labels, want_labels)
    np.testing.assert_array_equal(distances, want_distances)
