"""What the judge holds for every point (kmbench/judge/NOTES.md, "The judge's memory"): a scan's
13 bytes a point and its pairs, the trajectory's last scan (8 bytes), what the caller keeps
(the bank, within its budget; the points' cache) and a chunk's work, whatever the number of
steps. Measured with tracemalloc (NumPy reports its buffers to it) on chunks made small, so that
a chunk's work is not taken for state of every point; the rows' own memory is made before."""

import gc
import tracemalloc

import numpy as np
import pytest
import scipy.spatial  # noqa: F401  (the judge's k-d tree: megabytes of code, imported before any measurement)

from kmbench.judge import certify, points, scan, scoring, trajectory
from kmbench.judge.points import Geometry
from kmbench.judge.precision import FLOAT32
from kmbench.judge.seeds import Bank
from impls.cpu.numpy_fast import NumpyFast
from kmbench.protocol import Implementation, Problem, residence

N, CHUNK = 100_000, 1024
SCAN = 13  # bytes a point of an Assignment: nearest int32, unique bool, allowance and lower float32
SEED = 8  # a kept scan: nearest and lower
WORK = 5  # a chunk's arrays, the k-d tree, small objects: bytes a point at N points in chunks of CHUNK


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(scoring, "TREE_ROWS", CHUNK)
    monkeypatch.setattr(residence, "CHUNK_ELEMENTS", CHUNK * 2)
    monkeypatch.setattr(scoring, "SCORE_ELEMENTS", CHUNK * 64)  # the scorer's rows: CHUNK at k = 64, fewer above


def clustered(n=N, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-20, 20, (300, 2))
    return (centres[rng.integers(0, 300, n)] + rng.standard_normal((n, 2))).astype(np.float32)


def peak(work, n=N):
    """(what `work` returns, the most bytes a point it held at once above what was held before)."""
    gc.collect()
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        out = work()
        return out, (tracemalloc.get_traced_memory()[1] - before) / n
    finally:
        if started:
            tracemalloc.stop()


class Replayed(Implementation):
    """A row's runs made beforehand (one iteration from each of its own outputs), handed back on
    demand: the judge's memory is then all a measurement sees."""

    name = "replayed"
    dtype = "float32"

    def __init__(self, row, problem):
        self.row = row
        self.whole = row.run(problem)
        self.steps, current = {}, problem.initial_centroids
        for _ in range(problem.iterations):
            once = row.run(Problem(problem.data, current, 1, warmup=0, repeats=1))
            self.steps[np.asarray(current, dtype=np.float64).tobytes()] = once
            current = once.centroids

    def distance_form(self, problem):
        return self.row.distance_form(problem)

    def run(self, problem):
        if problem.iterations == 1:
            return self.steps[np.asarray(problem.initial_centroids, dtype=np.float64).tobytes()]
        return self.whole


@pytest.mark.parametrize("k", [40, 200])  # the direct scan, the k-d tree (whose pairs come unsorted)
def test_a_scan_holds_thirteen_bytes_a_point_and_its_pairs_made_in_place(small_chunks, k):
    data = clustered()
    centroids = data[:: N // k][:k].astype(np.float64)
    geometry = Geometry.of(data)
    found, most = peak(lambda: scan.assign(data, centroids, FLOAT32, geometry))
    fields = (found.nearest, found.unique, found.allowance, found.lower)
    assert sum(a.nbytes for a in fields) == SCAN * N
    pairs = found.pair_points.nbytes + found.pair_centroids.nbytes
    # Filled in place: no chunk parts joined at the end (twice the 13 bytes); the pairs alone are.
    assert most <= SCAN + 2 * pairs / N + WORK, most
    assert found.pair_points.size and pairs == 8 * found.pair_points.size  # int32 point and centroid
    assert scan.assign(data, centroids, FLOAT32, geometry, bounds=False).lower is None


@pytest.mark.parametrize("k", [40, 200])
def test_the_reference_holds_one_scan_whatever_its_steps(small_chunks, k):
    """With a bank that keeps nothing, the float64 reference holds the scan it makes and the one
    before: a judge that kept a scan (or its seed) a step would grow by 8 to 13 bytes a step."""
    data = clustered()
    start = data[:: N // k][:k].astype(np.float64)
    geometry = Geometry.of(data)
    held = [peak(lambda: certify.float64_lloyd(data, start, steps, bank=Bank(budget=0), geometry=geometry))[1]
            for steps in (2, 5)]
    assert held[1] <= held[0] + 1, held
    assert held[1] <= SCAN + SEED + WORK + 4, held  # + the labels before and after (int32)


@pytest.mark.parametrize("k", [40, 200])
def test_a_certification_holds_one_scan_whatever_its_steps(small_chunks, k):
    """A row with labels at every step, certified from the reference's bank: what it holds beyond
    the bank and the row's own results is the step's scan, the trajectory's last, and the
    checks' working arrays (the labels as the row gave them: not copied)."""
    data = clustered()
    start = data[:: N // k][:k]
    geometry = Geometry.of(data)
    held = []
    for steps in (2, 5):
        problem = Problem(data, start, steps, warmup=0, repeats=1)
        row = Replayed(NumpyFast(), problem)
        bank = Bank()
        certify.float64_lloyd(data, start, steps, bank=bank, geometry=geometry)
        # On the host (xp=np) wherever the test runs: this is host memory's peak, and the geometry
        # above is NumPy's (a GPU machine's judge would otherwise take CuPy for data this size).
        certificate, most = peak(lambda: trajectory.certify(row, problem, [row.whole], "float32", bank=bank,
                                                            geometry=geometry, spread=1.0, xp=np))
        assert certificate.certified and certificate.labels_known == steps, certificate.failure
        held.append(most)
    assert held[1] <= held[0] + 1, held
    assert held[1] <= SCAN + SEED + WORK + 8, held  # + admissible's and the means' working arrays


def test_the_points_norms_are_made_a_chunk_at_a_time(small_chunks, monkeypatch):
    """Where only the norms fit the cache, they are what the geometry holds: 16 bytes a point."""
    data = clustered()
    monkeypatch.setattr(points, "CACHE_BYTES", 2 * N * 8)
    geometry, most = peak(lambda: Geometry.of(data))
    assert geometry.full is None and geometry.norms is not None
    assert most <= 16 + WORK, most
