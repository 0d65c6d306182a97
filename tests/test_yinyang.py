"""yinyang-gpu (impls/gpu/yinyang). Without a GPU: the source compiles with nvcc for several d,
and the rounding margin covers float32 dot products. With a GPU: its labels are Lloyd's after
every iteration count, in each assignment mode; both stop rules agree with the oracle; the
filters really skip work on a converging run."""

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from impls.gpu.yinyang import YinyangGpu, group_count, slack_factor
from kmbench.protocol import reference, runner
from kmbench.data.datasets import Dataset
from kmbench.errors import ImplementationError
from tests.conftest import gpu_cell

SOURCE = Path(__file__).resolve().parents[1] / "impls" / "gpu" / "yinyang" / "yinyang.cu"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("dim", [1, 2, 31, 32, 33, 408])
def test_kernels_compile(dim, tmp_path):
    done = subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-std=c++17", f"-DDIM={dim}",
                           f"-DSLACK={slack_factor(dim):.9e}f", "-o", str(tmp_path / "k.cubin"), str(SOURCE)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_groups_follow_kmcudas_ratio():
    assert [group_count(k) for k in (1, 9, 10, 11, 5000)] == [1, 1, 1, 2, 500]


@pytest.mark.parametrize("d", [2, 64, 408])
def test_margin_covers_float32_squared_distances(d):
    """The margin claim of yinyang.cu: a float32 squared distance, direct or expanded, is within
    slack_factor(d) * (|x| + |c|)^2 of the exact one, here on points far from each other and
    on near neighbours far from the origin (the worst case for the expanded form)."""
    rng = np.random.default_rng(d)
    x = rng.standard_normal((4000, d)) * 3 + 50
    c = np.concatenate([x[:2000] + 1e-3 * rng.standard_normal((2000, d)), rng.standard_normal((2000, d))])
    x32, c32 = x.astype(np.float32), c.astype(np.float32)
    exact32 = ((x32.astype(np.float64) - c32) ** 2).sum(axis=1)  # what the float32 inputs mean
    direct = ((x32 - c32) ** 2).sum(axis=1, dtype=np.float32)
    expanded = (x32 * x32).sum(axis=1) - 2 * (x32 * c32).sum(axis=1) + (c32 * c32).sum(axis=1)
    reach = (np.linalg.norm(x32, axis=1) + np.linalg.norm(c32, axis=1)) ** 2
    for computed in (direct, expanded):
        assert np.all(np.abs(computed - exact32) <= slack_factor(d) * reach)
    assert np.abs(expanded - exact32).max() > 0  # the check is not vacuous: rounding happens


def test_unknown_mode_is_refused():
    with pytest.raises(ImplementationError, match="mode must be one of"):
        YinyangGpu(mode="fastest")


# ------------------------------------------------------------------ on a GPU


def _crowded(n, d, centers, seed=0, offset=0.0):
    """More centroids than blobs: Lloyd keeps reassigning for many iterations, so the bounds,
    the drift and both filters are exercised."""
    rng = np.random.default_rng(seed)
    middle = rng.uniform(-10, 10, (centers, d))
    return (middle[rng.integers(0, centers, n)] + rng.standard_normal((n, d)) + offset).astype(np.float32)


def _problem(data, k, iterations, tol=None):
    settings = runner.Settings(k=k, iterations=iterations)
    return replace(runner.make_problem(Dataset("t", data, None, {}), settings), tol=tol)


def _run(impl, problem):
    impl.prepare(problem)
    try:
        return impl.run(problem)
    finally:
        impl.release()


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["auto", "gemm", "filter"])
@pytest.mark.parametrize("iterations", [1, 2, 5, 12])
def test_each_assignment_is_lloyds_from_its_own_centroids(mode, iterations):
    """Exactness, one iteration at a time: the labels of assignment i + 1 are the exact
    nearest centroids among the centroids yinyang-gpu itself held after i iterations, except
    for points that are float32 ties there. (Comparing with a whole float64 run instead would
    count a tie that went the other way in iteration 1 again in every later iteration.)"""
    data = _crowded(30_011, 24, centers=30)
    before = _run(YinyangGpu(mode=mode), _problem(data, 150, iterations)).centroids
    after = _run(YinyangGpu(mode=mode), _problem(data, 150, iterations + 1))
    assert after.iterations == iterations + 1
    exact, _ = reference.nearest(data, before)
    differ = np.flatnonzero(after.labels != exact)
    ties = np.concatenate([tie for *_, tie in reference.two_nearest(data, before)])
    assert np.all(ties[differ]), f"{differ.size} labels differ, {int(ties[differ].sum())} of them ties"


def _cell(impl, data, k, iterations, tol=None):
    return gpu_cell(impl, data, k, iterations, tol, repeats=2)


@pytest.mark.gpu
@pytest.mark.parametrize("d, k", [(408, 500), (3, 1), (3, 11), (64, 32)])
def test_tolerance_rule_stops_where_the_oracle_does(d, k):
    data = _crowded(12_007, d, centers=max(2, k // 5))
    start = _problem(data, k, 200).initial_centroids
    oracle, record = gpu_cell(YinyangGpu(), data, k, 200, 0.01, repeats=2, start=start)
    assert record["status"] == "ok", record.get("detail")
    assert record["iterations_executed"] in _stops_float32_may_take(data, start, 0.01, oracle.iterations)


def _stops_float32_may_take(data, start, tol, stop):
    """The iterations at which a correct float32 run may stop by the tolerance rule: the
    float64 run's, and where float64's count of changed labels passes within 20% of the
    threshold, that iteration and the next. (On crowded data the float32 and float64 runs
    part by a few labels per iteration, at 1e-7 gaps, and their counts drift apart by up to
    about 15%: measured at 12,007 x 64, k = 32, both dense assignments.)"""
    threshold = tol * len(data)
    centroids, labels, near = np.asarray(start, np.float64), None, set()
    for iteration in range(1, stop + 1):
        fresh, _ = reference.nearest(data, centroids)
        if labels is not None and abs(int((fresh != labels).sum()) - threshold) <= 0.2 * threshold:
            near |= {iteration, iteration + 1}
        labels, centroids = fresh, reference.update(data, fresh, centroids)
    return {stop} | near


@pytest.mark.gpu
def test_data_far_from_the_origin():
    _, record = _cell(YinyangGpu(), _crowded(20_003, 16, centers=20, offset=1e5), 100, 15)
    assert record["status"] == "ok", record.get("detail")


@pytest.mark.gpu
def test_filters_skip_work_on_a_converging_run():
    """The point of Yinyang: after the first iterations most points pass no distance at all."""
    impl = YinyangGpu()
    _, record = _cell(impl, _crowded(20_011, 16, centers=40), 200, 30)
    assert record["status"] == "ok", record.get("detail")
    build = record["build"]
    assert build["iterations_by_filter"] >= 1
    assert build["active_fraction"] < 0.5


def test_unknown_dense_assignment_is_refused():
    with pytest.raises(ImplementationError, match="dense assignment must be one of"):
        YinyangGpu(dense="fastest")


def test_low_dimensions_assign_densely_by_gemm_rows():
    """The tensor-core pass is kmbench-gpu's d > 32 path; below, dense rows stay SGEMM rows."""
    problem = _problem(_crowded(500, 8, centers=4), 10, 2)
    assert YinyangGpu().dense_for(problem) == "gemm"
    assert YinyangGpu(dense="tensor").dense_for(problem) == "tensor"  # asked for: as asked


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["auto", "gemm"])
@pytest.mark.parametrize("iterations", [1, 3, 6])
def test_tensor_dense_assignments_are_lloyds(mode, iterations):
    """As above, at d = 100 (no multiple of 16), where the dense assignments are kmbench-gpu's
    tensor-core pass: every iteration in mode gemm, the first and the crowded ones in auto."""
    data = _crowded(20_011, 100, centers=30)
    before = _run(YinyangGpu(mode=mode), _problem(data, 150, iterations)).centroids
    impl = YinyangGpu(mode=mode)
    after = _run(impl, _problem(data, 150, iterations + 1))
    assert impl._info["dense"] == "tensor"
    exact, _ = reference.nearest(data, before)
    differ = np.flatnonzero(after.labels != exact)
    ties = np.concatenate([tie for *_, tie in reference.two_nearest(data, before)])
    assert np.all(ties[differ]), f"{differ.size} labels differ, {int(ties[differ].sum())} of them ties"


@pytest.mark.gpu
@pytest.mark.parametrize("offset", [0.0, 1e4])
def test_bounds_after_the_tensor_pass_hold(offset):
    """After one tensor-core assignment, every point's upper bound is at least the exact distance
    to its centroid and every group's lower bound at most the exact distance to each other
    centroid (float64 on the float32 inputs the kernels read), near-ties and far data included."""
    import cupy

    data = _crowded(12_007, 72, centers=6, offset=offset)
    data[:50] = data[50:100]  # duplicated points: start rows that coincide make exact ties
    problem = _problem(data, 64, 1)
    impl = YinyangGpu(dense="tensor")
    impl.prepare(problem)
    try:
        impl.run(problem)
        x = cupy.asnumpy(impl._x).astype(np.float64)
        centroids = cupy.asnumpy(impl._tensor.centroids).astype(np.float64)  # those it assigned against
        labels = cupy.asnumpy(impl._labels)
        upper, lower = cupy.asnumpy(impl._upper), cupy.asnumpy(impl._lower)
    finally:
        impl.release()
    distances = np.sqrt(((x[:, None, :] - centroids[None, :, :]) ** 2).sum(axis=2))
    rows = np.arange(len(x))
    assert (upper >= distances[rows, labels]).all()
    others = distances.copy()
    others[rows, labels] = np.inf
    assert (lower <= others.min(axis=1)[:, None]).all()
    ties = np.concatenate([tie for *_, tie in reference.two_nearest(x, centroids)])
    assert ((labels == np.argmin(distances, axis=1)) | ties).all()  # FP32-exact: only float32 ties may differ
    assert (lower > 0).mean() > 0.5  # the bounds are not vacuous: most points can be filtered


@pytest.mark.gpu
@pytest.mark.parametrize("d, k", [(100, 300), (408, 500)])
def test_tensor_dense_cells_are_ok(d, k):
    impl = YinyangGpu()
    _, record = _cell(impl, _crowded(15_013, d, centers=max(2, k // 10), offset=50.0), k, 12)
    assert record["status"] == "ok", record.get("detail")
    assert record["build"]["dense"] == "tensor"
    assert record["build"]["rechecked_points"] >= 0
