"""The judge on a GPU decides as it does on the CPU: the same nearest centroids, the same points
left open and the same admissible labels (every decision is exact, whatever computed it), the
same float64 reference, the same sums; and it gives the GPU's memory back after a verdict."""

import contextlib

import numpy as np
import pytest

from kmbench.judge import certify
from kmbench.judge.points import Geometry
from kmbench.judge.precision import FLOAT32, FLOAT64
from kmbench.judge.scan import assign
from kmbench.judge.sums import group
from kmbench.protocol import Problem, runner, validate
from tests.test_judge_seeds import data_of as seeds_data_of
from tests.wrong_rows import PlainLloyd

pytestmark = pytest.mark.gpu

CASES = [("clustered", 20_000, 2, 3), ("clustered", 20_000, 2, 700), ("clustered", 8_000, 8, 100),
         ("clustered", 8_000, 64, 300), ("integer", 10_000, 2, 12), ("far", 6_000, 16, 40), ("clustered", 5_000, 9, 1)]


def data_of(kind, n, d, rng):
    return seeds_data_of(kind, n, d, rng, clusters=12)


def pairs(found, to_numpy):
    return set(zip(to_numpy(found.pair_points).tolist(), to_numpy(found.pair_centroids).tolist()))


@pytest.mark.parametrize("kind, n, d, k", CASES)
@pytest.mark.parametrize("precision, direct", [(FLOAT32, False), (FLOAT32, True), (FLOAT64, False)])
def test_a_gpu_scan_decides_as_a_cpu_scan(kind, n, d, k, precision, direct):
    import cupy

    rng = np.random.default_rng(n + d + k)
    data = data_of(kind, n, d, rng)
    before = data[rng.choice(n, k, replace=False)].astype(np.float64)
    after = before + rng.standard_normal(before.shape) * 1e-3
    on_cpu, on_gpu = Geometry.of(data, np), Geometry.of(cupy.asarray(data), cupy)
    gpu_data = cupy.asarray(data)
    for seeds in ([], "carried"):
        cpu_seeds = [assign(data, before, FLOAT64, on_cpu).seed(before)] if seeds else []
        gpu_seeds = [assign(gpu_data, before, FLOAT64, on_gpu, cupy).seed(before)] if seeds else []
        cpu = assign(data, after, precision, on_cpu, np, direct, cpu_seeds)
        gpu = assign(gpu_data, after, precision, on_gpu, cupy, direct, gpu_seeds)
        np.testing.assert_array_equal(cupy.asnumpy(gpu.nearest), cpu.nearest)
        np.testing.assert_array_equal(cupy.asnumpy(gpu.unique), cpu.unique)
        assert pairs(gpu, cupy.asnumpy) == pairs(cpu, np.asarray)


@pytest.mark.parametrize("k", [3, 40, 300])
def test_gpu_sums_and_reference_match_the_cpu(k):
    import cupy

    rng = np.random.default_rng(k)
    data = data_of("clustered", 30_000, 5, rng)
    start = data[rng.choice(len(data), k, replace=False)].astype(np.float64)
    labels = rng.integers(0, k, len(data))
    cpu = group(data, labels, start, Geometry.of(data, np), np)
    gpu = group(cupy.asarray(data), cupy.asarray(labels), cupy.asarray(start),
                Geometry.of(cupy.asarray(data), cupy), cupy)
    for name in ("counts", "sums", "weights", "squares"):
        np.testing.assert_allclose(cupy.asnumpy(getattr(gpu, name)), getattr(cpu, name), rtol=1e-12, err_msg=name)
    host = certify.float64_lloyd(data, start, 5)
    device = certify.float64_lloyd(cupy.asarray(data), start, 5, xp=cupy)
    np.testing.assert_allclose(cupy.asnumpy(device[0]), host[0], rtol=0, atol=1e-9)
    np.testing.assert_array_equal(cupy.asnumpy(device[3]), host[3])
    assert device[4] == pytest.approx(host[4], rel=1e-12)


def test_the_judge_keeps_its_gpu_copy_for_the_problem_and_gives_it_back(monkeypatch):
    import cupy

    from kmbench.protocol import residence

    monkeypatch.setattr(residence, "GPU_FROM_BYTES", 0)  # judge this small problem on the GPU
    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()
    before = pool.used_bytes()
    rng = np.random.default_rng(5)
    data = data_of("clustered", 50_000, 40, rng)
    start = data[:40]
    problem = Problem(data, start, 3, warmup=0, repeats=1)
    oracle = validate.Oracle.compute(data, start, 3)
    kept = oracle.workspace
    row = PlainLloyd()
    verdict = runner.judgement([row.run(problem)], oracle, problem, row)
    assert verdict.status == validate.OK, verdict.detail
    assert oracle.workspace is kept and isinstance(kept.data, cupy.ndarray)  # one copy for the problem
    held = pool.used_bytes() - before
    assert held >= data.nbytes, (held, data.nbytes)
    del kept
    oracle.release()
    assert pool.used_bytes() - before < data.nbytes, (pool.used_bytes() - before, held, data.nbytes)
    assert pool.total_bytes() == pool.used_bytes()


@pytest.mark.parametrize("chosen", ["all", "dense", "repeated", "sparse"])
def test_rows_chosen_from_host_data_are_the_rows_of_the_gpu_copy(chosen, monkeypatch):
    """Host data (a Dask set's cells are judged so) give the judge's chosen rows as a GPU copy
    would, whether they are picked from streamed blocks (dense choices) or gathered on the host."""
    import cupy

    from kmbench.judge import points
    from kmbench.protocol import reference, residence

    monkeypatch.setattr(residence, "BLOCK_BYTES", 4096)  # many blocks
    rng = np.random.default_rng(9)
    data = rng.standard_normal((20_000, 3)).astype(np.float32)
    index = {"all": np.arange(20_000), "dense": np.sort(rng.choice(20_000, 5_000, replace=False)),
             "repeated": rng.integers(100, 900, 3_000), "sparse": np.array([19_999, 3, 7_000])}[chosen]
    with reference.judge_from_host():
        got = points.rows_of(data, cupy.asarray(index), cupy)
    np.testing.assert_array_equal(cupy.asnumpy(got), cupy.asnumpy(cupy.asarray(data)[cupy.asarray(index)]).astype(
        np.float64))


def test_a_row_judged_from_host_memory_gets_the_verdict_it_gets_on_the_gpu(monkeypatch):
    """Data far from the origin in float32, a row that may expand its distances: nearly every
    point is a near tie, so the judge picks most rows from the streamed blocks."""
    from kmbench.protocol import reference, residence

    from kmbench.judge import points

    monkeypatch.setattr(residence, "GPU_FROM_BYTES", 0)
    monkeypatch.setattr(residence, "BLOCK_BYTES", 1 << 16)
    picked = []
    monkeypatch.setattr(points, "picked", lambda *args, original=points.picked: picked.append(1) or original(*args))
    rng = np.random.default_rng(11)
    data = (rng.standard_normal((40_000, 2)) * 0.01 + 3e3).astype(np.float32)
    start = data[:50]
    problem = Problem(data, start, 3, warmup=0, repeats=1)
    row = PlainLloyd()
    result = row.run(problem)
    verdicts, calls = [], []
    for on_host in (False, True):
        # The oracle too is made inside: made outside, its copy of the data on the GPU is what
        # the verdict would be judged from.
        with reference.judge_from_host() if on_host else contextlib.nullcontext():
            oracle = validate.Oracle.compute(data, start, 3)
            verdicts.append(runner.judgement([result], oracle, problem, row))
        oracle.release()
        calls.append(len(picked))
    assert calls[0] == 0 < calls[1]  # from host memory, the chosen rows came from streamed blocks
    assert (verdicts[0].status, verdicts[0].detail) == (verdicts[1].status, verdicts[1].detail)
