"""What the judge keeps of the points (kmbench.judge.points): the chosen rows picked from streamed
blocks (the rows an index names, in its order and with its repeats, whichever blocks hold them),
the chosen rows of host data for a device, a run's and the chosen points and the spread the same
whether the cache holds every row, only the norms or nothing, and which of those it holds for a
budget. The GPU path that streams host data is in tests/test_judge_gpu.py."""

from types import SimpleNamespace

import numpy as np
import pytest

from kmbench.judge.points import Geometry, picked
from kmbench.protocol import reference


def blocks_of(data, rows: int):
    return [(first, data[first : first + rows]) for first in range(0, data.shape[0], rows)]


# First in the file: a slip in how the norms are chunked can make every later Geometry.of crawl.
def test_where_only_the_norms_fit_they_are_made_a_chunk_of_rows_at_a_time(monkeypatch):
    """Where only the norms fit the cache, Geometry.of makes them chunk_elements // d rows at a
    time (n / that chunks, not a Python pass a row) and holds the norms and one chunk's float64
    and centred rows at once: never a float64 copy of the whole data, which is what did not fit.
    Measured with tracemalloc (NumPy reports its buffers to it)."""
    import tracemalloc

    from kmbench.judge import points
    from kmbench.protocol import residence

    n, d, chunk_rows = 20_000, 8, 100
    data = np.random.default_rng(9).standard_normal((n, d)).astype(np.float32)
    monkeypatch.setattr(points, "CACHE_BYTES", 2 * n * 8)
    monkeypatch.setattr(residence, "CHUNK_ELEMENTS", chunk_rows * d)
    made, original = [], Geometry._made

    def counted(self, x, *args, **kwargs):
        made.append(len(x))
        return original(self, x, *args, **kwargs)

    monkeypatch.setattr(Geometry, "_made", counted)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        geometry = Geometry.of(data)
        most = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert geometry.full is None and geometry.norms is not None
    assert made == [chunk_rows] * (n // chunk_rows)
    assert most < 2 * n * 8 + n * d * 8 / 4, most  # the norms and far less than a float64 copy


@pytest.mark.parametrize("rows", [1, 7, 64, 1000])
def test_picked_rows_are_the_indexed_rows_in_float64(rows):
    rng = np.random.default_rng(rows)
    data = rng.standard_normal((1000, 3)).astype(np.float32)
    for index in (np.arange(1000), np.sort(rng.choice(1000, 300, replace=False)), rng.integers(0, 1000, 500),
                  np.array([999, 0, 999, 5]), np.array([], dtype=np.int64)):
        out = picked(blocks_of(data, rows), index, 3, np)
        assert out.dtype == np.float64
        np.testing.assert_array_equal(out, data[index].astype(np.float64))



def _caches(monkeypatch, data):
    """Geometry.of(data) holding everything, only the norms, and nothing (CACHE_BYTES shrunk)."""
    from kmbench.judge import points

    n = data.shape[0]
    made = []
    for budget in (points.CACHE_BYTES, 2 * n * 8, 0):
        monkeypatch.setattr(points, "CACHE_BYTES", budget)
        made.append(Geometry.of(data))
    assert made[0].full is not None and made[1].full is None and made[1].norms is not None
    assert made[2].full is None and made[2].norms is None
    return made


def test_the_spread_is_the_rms_distance_from_the_mean_whatever_the_cache_holds(monkeypatch):
    rng = np.random.default_rng(3)
    data = (rng.standard_normal((300, 4)) * [1.0, 2.0, 3.0, 4.0] + 50.0).astype(np.float32)
    want = np.sqrt(((data.astype(np.float64) - data.astype(np.float64).mean(axis=0)) ** 2).sum() / data.shape[0])
    for geometry in _caches(monkeypatch, data):
        assert geometry.spread(data, np) == pytest.approx(want, rel=1e-12)
        assert geometry.spread(data, np) == pytest.approx(reference.spread(data, np), rel=1e-12)


def test_chosen_points_are_the_rows_their_norms_and_the_mean_whatever_the_cache_holds(monkeypatch):
    """Far from the origin, so |x| and |x - mean| differ: each must be the right one."""
    rng = np.random.default_rng(4)
    data = (rng.standard_normal((200, 3)) + [100.0, -40.0, 7.0]).astype(np.float32)
    x64 = data.astype(np.float64)
    mean = x64.mean(axis=0)
    index = np.array([199, 0, 17, 17, 64])
    for geometry in _caches(monkeypatch, data):
        chosen = geometry.chosen(data, index, np)
        np.testing.assert_array_equal(chosen.x, data[index])
        np.testing.assert_array_equal(chosen.mean, geometry.mean)
        np.testing.assert_allclose(geometry.mean, mean, rtol=1e-14)
        assert chosen.float64().dtype == np.float64
        np.testing.assert_array_equal(chosen.float64(), x64[index])
        np.testing.assert_allclose(chosen.norm, np.linalg.norm(x64[index], axis=1), rtol=1e-14)
        np.testing.assert_allclose(chosen.centred_norm, np.linalg.norm(x64[index] - mean, axis=1), rtol=1e-12)
        np.testing.assert_allclose(chosen.centred(), x64[index] - mean, rtol=1e-12, atol=1e-12)


class _DeviceArray(np.ndarray):
    """The arrays of a stand-in for CuPy: NumPy's, under a type of their own, so that host arrays
    are not taken for them (what reference._computes_in_place tells apart)."""


DEVICE = SimpleNamespace(ndarray=_DeviceArray, float64=np.float64, asarray=np.asarray, empty=np.empty,
                         nonzero=np.nonzero)


@pytest.mark.parametrize("chosen, streamed", [
    ("all", True), ("dense", True), ("repeated", True), ("sparse", False),
    ("at the density", True), ("just under it", False), ("none", False)])
def test_rows_of_host_data_for_a_device_are_the_rows_picked_from_blocks_where_dense(chosen, streamed, monkeypatch):
    """Host data judged on a device (a NumPy stand-in for CuPy here; tests/test_judge_gpu.py has
    the real one): the rows come in float64, in the index's order, with its repeats; choices of
    PICK_DENSITY of their span or more are picked from streamed blocks, sparser ones gathered."""
    from kmbench.judge import points
    from kmbench.protocol import residence

    monkeypatch.setattr(residence, "BLOCK_BYTES", 4096)  # 341 rows of 3 float32 a block
    calls = []
    monkeypatch.setattr(points, "picked", lambda *args, original=points.picked: calls.append(1) or original(*args))
    rng = np.random.default_rng(5)
    data = rng.standard_normal((2000, 3)).astype(np.float32)
    span = int(1 / points.PICK_DENSITY)
    index = {"all": np.arange(2000), "dense": np.sort(rng.choice(2000, 500, replace=False)),
             "repeated": rng.integers(700, 1300, 300), "sparse": np.array([1999, 3, 700]),
             "at the density": np.array([1000 + 2 * span - 1, 1000]),  # 2 rows over 2 * span
             "just under it": np.array([1000, 1000 + 2 * span]), "none": np.array([], dtype=np.int64)}[chosen]
    got = points.rows_of(data, index, DEVICE)
    assert got.dtype == np.float64 and got.shape == (index.size, 3)
    np.testing.assert_array_equal(got, data[index].astype(np.float64))
    assert bool(calls) == streamed


def test_rows_of_data_already_on_the_device_are_taken_where_they_are(monkeypatch):
    from kmbench.judge import points

    calls = []
    monkeypatch.setattr(points, "picked", lambda *args, original=points.picked: calls.append(1) or original(*args))
    data = np.arange(60, dtype=np.float32).reshape(20, 3).view(_DeviceArray)
    index = np.array([19, 2, 2, 5])
    got = points.rows_of(data, index, DEVICE)
    assert got.dtype == np.float64 and not calls
    np.testing.assert_array_equal(got, np.asarray(data)[index].astype(np.float64))


def test_a_runs_chosen_rows_in_float64_and_centred_are_those_rows_whatever_the_cache_holds(monkeypatch):
    """Rows 50:120 of float32 data as a scan takes them (Geometry.rows), then some of them by index
    (the points a scorer looks at again): float64 copies, cached or made, of the rows asked for."""
    rng = np.random.default_rng(6)
    data = (rng.standard_normal((200, 3)) * 3 + [20.0, -5.0, 0.5]).astype(np.float32)
    x64 = data.astype(np.float64)
    mean = x64.mean(axis=0)
    chosen = np.array([69, 0, 3, 3, 40])
    for geometry in _caches(monkeypatch, data):
        run = geometry.rows(data[40:], 40, 10, 80, np)  # a block from row 40: its rows 10:80
        np.testing.assert_array_equal(run.x, data[50:120])
        np.testing.assert_array_equal(run.mean, geometry.mean)
        np.testing.assert_allclose(run.norm, np.linalg.norm(x64[50:120], axis=1), rtol=1e-14)
        np.testing.assert_allclose(run.centred_norm, np.linalg.norm(x64[50:120] - mean, axis=1), rtol=1e-12)
        for index, want in ((None, x64[50:120]), (chosen, x64[50:120][chosen])):
            assert run.float64(index).dtype == np.float64
            np.testing.assert_array_equal(run.float64(index), want)
            np.testing.assert_allclose(run.centred(index), want - mean, rtol=1e-12, atol=1e-12)


def test_the_cache_holds_the_most_that_fits_in_cache_bytes_and_never_more(monkeypatch):
    """Every row (float64 and centred copies and both norms) where they fit, else the norms alone,
    else nothing: tried at the budget each needs and one byte under it."""
    from kmbench.judge import points

    n, d = 50, 3
    data = np.random.default_rng(8).standard_normal((n, d)).astype(np.float32)
    for budget, kept in ((2 * n * (d + 1) * 8, "full"), (2 * n * (d + 1) * 8 - 1, "norms"), (2 * n * 8, "norms"),
                         (2 * n * 8 - 1, None)):
        monkeypatch.setattr(points, "CACHE_BYTES", budget)
        geometry = Geometry.of(data)
        held = [geometry.full.x64, geometry.full.centred64, geometry.full.norm, geometry.full.centred_norm] \
            if geometry.full is not None else list(geometry.norms or [])
        assert (kept == "full", kept == "norms") == (geometry.full is not None, geometry.norms is not None), budget
        assert sum(a.nbytes for a in held) <= budget

