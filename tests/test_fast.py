"""kmbench-gpu (impls/gpu/kmbench_gpu) and the torch peer. Without a GPU: the strategy choice and the
limits; the kernels still compile with nvcc in test_cuda.py's way. With a GPU (make test-gpu):
agreement with the oracle for d in {1, 2, 3, 16, 64, 408}, k up to 65,536, every strategy,
partial blocks, both stop rules, data offset by 1e6, and n = 1e8."""

import shutil
import subprocess
from dataclasses import replace

import numpy as np
import pytest

from impls.gpu.kmbench_gpu import (DIRECT_MAX_DIM, HERE, MAX_K, PRUNE_MAX_DIM, RESIDENT_SLOTS, KmbenchGpu, KmbenchGpuTf32, make,
                                   pass_strategy, strategy, tiled_distance, tiled_pruning)
from impls.gpu.kmbench_gpu.tensor_path import tensor_status
from kmbench.protocol import runner, validate
from kmbench.data.datasets import Dataset, radial
from kmbench.errors import ImplementationError
from tests.conftest import gpu_cell


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("direct, prune", [(0, 0), (1, 0), (1, 1)])
@pytest.mark.parametrize("dim", [1, 2, 3, 8, 16, 32])
def test_lowd_kernels_compile_for_every_dimension(dim, direct, prune, tmp_path):
    done = subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-std=c++17", f"-DDIM={dim}", f"-DDIRECT={direct}",
                           f"-DPRUNE={prune}", "-o", str(tmp_path / "k.cubin"), str(HERE / "lowd.cu")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("dim, k", [(1, 1), (1, 16), (1, 19), (2, 3), (2, 13), (3, 10), (4, 8), (8, 4)])
def test_resident_kernel_compiles_up_to_its_limit(dim, k, tmp_path):
    assert k * (dim + 1) <= RESIDENT_SLOTS
    done = subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-std=c++17", f"-DDIM={dim}", f"-DKC={k}",
                           "-o", str(tmp_path / "k.cubin"), str(HERE / "resident.cu")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_tiled_distance_is_direct_up_to_its_limit_and_can_be_forced(monkeypatch):
    monkeypatch.delenv("KMBENCH_TILED_DISTANCE", raising=False)
    assert tiled_distance(2) == tiled_distance(DIRECT_MAX_DIM) == "direct"
    assert tiled_distance(DIRECT_MAX_DIM + 1) == "expanded"
    monkeypatch.setenv("KMBENCH_TILED_DISTANCE", "expanded")
    assert tiled_distance(2) == "expanded"
    monkeypatch.setenv("KMBENCH_TILED_DISTANCE", "fast")
    with pytest.raises(ImplementationError, match="direct or expanded"):
        tiled_distance(2)


def test_tiled_pruning_needs_direct_distances_and_can_be_turned_off(monkeypatch):
    monkeypatch.delenv("KMBENCH_TILED_DISTANCE", raising=False)
    monkeypatch.delenv("KMBENCH_TILED_PRUNE", raising=False)
    assert tiled_pruning(2) == tiled_pruning(PRUNE_MAX_DIM) == "box"
    assert tiled_pruning(PRUNE_MAX_DIM + 1) == "off"
    monkeypatch.setenv("KMBENCH_TILED_PRUNE", "0")
    assert tiled_pruning(2) == "off"
    monkeypatch.setenv("KMBENCH_TILED_PRUNE", "1")
    assert tiled_pruning(DIRECT_MAX_DIM) == "box"
    monkeypatch.setenv("KMBENCH_TILED_DISTANCE", "expanded")  # its rounding is not the distance's
    assert tiled_pruning(2) == "off"
    monkeypatch.setenv("KMBENCH_TILED_PRUNE", "yes")
    with pytest.raises(ImplementationError, match="0 or 1"):
        tiled_pruning(2)


def test_strategy_follows_n_d_k():
    assert strategy(10**5, 2, 5) == "resident"
    assert strategy(10**8, 2, 3) == "resident"
    assert strategy(2**20, 1, 16) == "resident"
    assert strategy(10**5, 2, 20) == "small-k"  # 60 accumulator columns: past the resident limit
    assert strategy(10**5, 2, 1000) == "tiled"
    assert strategy(10**5, 16, 5) == "tiled"
    assert strategy(3 * 10**5, 408, 5000) == "gemm"  # where Triton cannot run
    assert strategy(3 * 10**5, 408, 5000, tensor_cores=True) == "tensor"


def test_a_pass_strategy_never_runs_the_whole_run_in_one_launch():
    """A shard's or a chunk's sums must be seen between passes: resident's accumulation a pass
    at a time (columns) where resident would run, and otherwise what a whole run takes."""
    assert pass_strategy(2, 3) == "columns"
    assert pass_strategy(1, 20) == "columns"  # k (d + 1) = 40: the last that fits
    assert pass_strategy(2, 14) == "small-k"  # 42 columns
    assert pass_strategy(9, 3) == "tiled"  # past SMALL_DIM
    assert pass_strategy(2, 1000) == "tiled"
    assert pass_strategy(64, 10) == "tensor"


def _problem(n=64, d=2, k=3, tol=None):
    data = np.random.default_rng(0).standard_normal((n, d)).astype(np.float32)
    problem = runner.make_problem(Dataset("t", data, None, {}), runner.Settings(k=k, iterations=2))
    return replace(problem, tol=tol)


def test_limits_are_refused_before_launch():
    with pytest.raises(ImplementationError, match="small-k handles"):
        KmbenchGpu(force_strategy="small-k").check(_problem(d=16))
    with pytest.raises(ImplementationError, match="resident handles"):
        KmbenchGpu(force_strategy="resident").check(_problem(k=14))
    with pytest.raises(ImplementationError, match="columns handles"):
        KmbenchGpu(force_strategy="columns").check(_problem(k=14))
    with pytest.raises(ImplementationError, match="unknown strategy"):
        KmbenchGpu(force_strategy="magic").check(_problem())
    too_many = replace(_problem(), initial_centroids=np.zeros((MAX_K + 1, 2), np.float32))
    with pytest.raises(ImplementationError, match=f"k <= {MAX_K}"):
        KmbenchGpu().check(too_many)


def test_declared_work():
    problem = _problem(n=1000, d=2, k=3)
    assert KmbenchGpu().bytes_per_iteration(problem) == 1000 * 2 * 4
    assert KmbenchGpu().fp32_per_distance(problem) == 5  # small-k: direct distance
    assert KmbenchGpu().fp32_per_distance(replace(problem, tol=0.0)) == 5
    assert KmbenchGpuTf32().strategy_for(problem) == "gemm"


# ------------------------------------------------------------------ on a GPU


def _cell(impl, data, k, iterations=10, tol=None, repeats=1):
    return gpu_cell(impl, data, k, iterations, tol, repeats)


def _blobs(n, d, centers=8, seed=0, offset=0.0, std=1.0):
    rng = np.random.default_rng(seed)
    middle = rng.uniform(-10, 10, (centers, d))
    return (middle[rng.integers(0, centers, n)] + std * rng.standard_normal((n, d)) + offset).astype(np.float32)


# Well-posed problems: one tight blob per centroid. Crowded ones (1000 centroids on 8 blobs)
# are chaotic for any float32 program that expands the distance (the tensor path does, then
# certifies); NumPy fails them too.


@pytest.mark.gpu
@pytest.mark.parametrize("d, k", [(1, 3), (1, 40), (2, 5), (2, 1000), (3, 7), (3, 300), (16, 5), (16, 200),
                                  (64, 10), (408, 64)])
def test_agrees_with_the_oracle_for_any_d(d, k):
    n = 20_011 if d <= 64 else 6_007  # not a multiple of any block: partial last blocks
    _, record = _cell(KmbenchGpu(), _blobs(n, d, centers=k, std=0.05), k)
    assert record["status"] == "ok", (record["build"], record.get("detail"))
    assert record["build"]["strategy"] == strategy(n, d, k, tensor_cores=tensor_status()[0])


@pytest.mark.gpu
@pytest.mark.parametrize("chosen", ["resident", "columns", "small-k", "tiled", "tensor", "gemm"])
@pytest.mark.parametrize("graph", ["1", "0"])
def test_every_strategy_with_and_without_the_graph(chosen, graph, monkeypatch):
    monkeypatch.setenv("KMBENCH_CUDA_GRAPH", graph)
    _, record = _cell(KmbenchGpu(force_strategy=chosen), _blobs(50_003, 3), 6)
    assert record["status"] == "ok", record.get("detail")
    assert record["build"]["strategy"] == chosen


@pytest.mark.gpu
@pytest.mark.parametrize("k", [4096, 65_536])
def test_large_k(k):
    """k tight blobs, each started from its own centre. The centres sit on a jittered grid, at
    least half a grid step (39 standard deviations at k = 65,536) apart, so no point is a
    float32 tie. (Uniform centres put 2% of the blobs within 6 std of a neighbour at 65,536; the
    expanded distance cannot order the points between them, and three iterations spread that
    past any honest tolerance: a test of the data, not of the kernel.)"""
    rng = np.random.default_rng(k)
    side = int(np.ceil(np.sqrt(k)))
    step = 20.0 / side
    cells = rng.choice(side * side, k, replace=False)
    grid = np.stack([cells // side, cells % side], axis=1) * step - 10 + step / 2
    centres = grid + rng.uniform(-step / 4, step / 4, (k, 2))
    data = (centres[rng.integers(0, k, 8 * k + 5)] + 0.001 * rng.standard_normal((8 * k + 5, 2))).astype(np.float32)
    dataset = Dataset("gpu", data, None, {"generator": "test"})
    settings = runner.Settings(k=k, iterations=3, warmup=1, repeats=1)
    problem = replace(runner.make_problem(dataset, settings), initial_centroids=centres.astype(np.float32))
    oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, 3)
    record = runner.run_cell(KmbenchGpu(), problem, oracle, dataset, settings, "gpu")
    assert record["status"] == "ok", record.get("detail")
    assert record["build"]["strategy"] == "tiled"


@pytest.mark.gpu
def test_tiled_direct_distances_hold_on_small_clusters_far_from_the_mean(monkeypatch):
    """The radial tree at 1e5 points, k = 200, three iterations: clusters of spread 0.1 at 20
    from the mean. The expanded score rounds at |x||c| (about 4e-5 here) and cannot order one
    point in a hundred between its nearest centroids; far from convergence the inertia moves
    with every such point (1.2e-4 in NumPy's emulation, over the 1e-4 allowed). The direct
    distance rounds at |x - c|^2 and stays within the allowance by a wide margin."""
    from kmbench.data.datasets import radial_centers

    rng = np.random.default_rng(0)
    middles = radial_centers(10, 20.0, 5, 2.0)
    data = (np.repeat(middles, 2000, axis=0) + 0.1 * rng.standard_normal((100_000, 2))).astype(np.float32)
    records = {}
    for form in ("direct", "expanded"):
        monkeypatch.setenv("KMBENCH_TILED_DISTANCE", form)
        _, records[form] = _cell(KmbenchGpu(), data, 200, iterations=3)
        assert records[form]["build"]["strategy"] == "tiled" and records[form]["build"]["distance"] == form
    direct, expanded = (records[form]["validation"]["inertia_difference"] for form in ("direct", "expanded"))
    assert records["direct"]["status"] == "ok", records["direct"].get("detail")
    assert expanded > 10 * direct, (direct, expanded)


def _tiled_pass(data: np.ndarray, centroids: np.ndarray, prune: str, monkeypatch):
    """One assignment pass of the tiled kernel: labels, the float64 sums, and its pruning."""
    import cupy

    monkeypatch.setenv("KMBENCH_TILED_PRUNE", prune)
    tiled = make("tiled", data.shape[1], centroids.shape[0])
    tiled.compile()
    tiled.allocate(cupy.asarray(data), cupy.zeros(1, dtype=cupy.uint64))
    tiled.start(centroids.astype(np.float64), track=True)
    tiled.assign(tiled.x, tiled.n, tiled.labels, tiled.blocks)
    return tiled.labels.get(), tiled.sums.get(), tiled.pruning


def _clustered(n, d, clusters, k, order, seed):
    """n points in `clusters` tight groups, in group order ("sorted") or not, and k centroids
    drawn from the points (so many sit in each group: several candidates per block)."""
    rng = np.random.default_rng(seed)
    middles = rng.uniform(-20, 20, (clusters, d))
    data = middles[np.arange(n) * clusters // n] + 0.1 * rng.standard_normal((n, d))
    if order == "shuffled":
        data = data[rng.permutation(n)]
    return data.astype(np.float32), data[rng.choice(n, k, replace=False)].astype(np.float32)


def _ties(side=10):
    """Centroids on an integer grid and points on the midpoints between neighbours, in row
    order: every point is exactly as far from two centroids (from four at the cells' centres),
    in float32 too, so only the lower index wins."""
    grid = np.stack(np.meshgrid(np.arange(side), np.arange(side), indexing="ij"), axis=-1).reshape(-1, 2)
    halves = np.stack(np.meshgrid(np.arange(2 * side - 1), np.arange(2 * side - 1), indexing="ij"),
                      axis=-1).reshape(-1, 2) / 2.0
    data = np.repeat(halves, 40, axis=0)
    return data.astype(np.float32), grid[::-1].astype(np.float32)  # reversed: the lower index is not the first seen


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["sorted d=2", "shuffled d=2", "sorted d=3, three groups a block", "sorted d=8, k = 3000",
                                  "shuffled d=8, k > list", "sorted d=32", "exact ties"])
def test_pruned_tiled_pass_gives_the_labels_of_the_full_scan(case, monkeypatch):
    """The candidate list only leaves out centroids that cannot win: the labels are the full
    scan's, bit for bit (ties to the lower index too), and the sums the same up to the order of
    the float64 additions. Cases: blocks inside one group, blocks spanning the data (nothing
    pruned; with k = 3000, past the list's room), more groups than blocks (the list reused), and
    ties. The margin itself rests on the argument in lowd.cu: random data rarely comes near it."""
    data, centroids = {
        "sorted d=2": lambda: _clustered(200_003, 2, 50, 1000, "sorted", 1),
        "shuffled d=2": lambda: _clustered(200_003, 2, 50, 1000, "shuffled", 2),
        "sorted d=3, three groups a block": lambda: _clustered(3_000_017, 3, 200, 300, "sorted", 3),
        "sorted d=8, k = 3000": lambda: _clustered(100_000, 8, 40, 3000, "sorted", 4),
        "shuffled d=8, k > list": lambda: _clustered(100_000, 8, 40, 3000, "shuffled", 5),
        "sorted d=32": lambda: _clustered(50_000, 32, 20, 200, "sorted", 6),
        "exact ties": _ties,
    }[case]()
    full_labels, full_sums, off = _tiled_pass(data, centroids, "0", monkeypatch)
    labels, sums, on = _tiled_pass(data, centroids, "1", monkeypatch)
    assert (off, on) == ("off", "box")
    assert np.array_equal(labels, full_labels), f"{np.count_nonzero(labels != full_labels)} labels differ"
    np.testing.assert_allclose(sums, full_sums, rtol=1e-12, atol=1e-9)
    if case == "exact ties":  # and the full scan kept them at the lower index
        distances = ((data[:, None, :].astype(np.float64) - centroids[None]) ** 2).sum(axis=2)
        assert np.array_equal(full_labels, distances.argmin(axis=1))


@pytest.mark.gpu
@pytest.mark.parametrize("k", [5, 100])
def test_data_far_from_the_origin(k):
    """Unit-spread data at 1e6, where raw float32 sums and the unshifted expansion fail."""
    _, record = _cell(KmbenchGpu(), _blobs(1_000_000, 2, centers=5, offset=1e6) / 10 + 9e5, k)
    assert record["status"] == "ok", record.get("detail")


@pytest.mark.gpu
@pytest.mark.parametrize("tol", [0.0, 0.001])
@pytest.mark.parametrize("k", [8, 30])  # resident (decides on the GPU), small-k (on the host)
def test_tolerance_stop_agrees_on_iterations(tol, k):
    oracle, record = _cell(KmbenchGpu(), _blobs(200_000, 2, centers=20), k, iterations=50, tol=tol)
    assert record["status"] == "ok", record.get("detail")
    assert record["build"]["strategy"] == strategy(200_000, 2, k)
    assert record["iterations_executed"] == oracle.iterations


@pytest.mark.gpu
@pytest.mark.parametrize("n", [7, 1_000, 1_000_003])  # one block, one partial step, a full grid
@pytest.mark.parametrize("d, k", [(1, 16), (2, 5), (3, 1), (8, 4)])
def test_resident_grid_sizes(n, d, k):
    oracle, record = _cell(KmbenchGpu(), _blobs(n, d, centers=k, std=0.05, seed=n), min(k, n), iterations=25)
    assert record["status"] == "ok", record.get("detail")
    assert record["build"]["strategy"] == "resident"
    assert record["iterations_executed"] == 25


@pytest.mark.gpu
def test_one_hundred_million_points(tmp_path):
    data = np.asarray(radial(cluster_size=2_000_000, directory=tmp_path).data)
    _, record = _cell(KmbenchGpu(), data, 3, iterations=3)
    assert record["status"] == "ok", record.get("detail")
    assert record["validation"]["centroid_error"] < 1e-5


@pytest.mark.gpu
def test_tf32_variant_reports_label_agreement(monkeypatch):
    from impls.gpu.kmbench_gpu import tensor_settings

    # Offered only where kmbench-gpu's tensor pass cannot run (KmbenchGpuTf32.unsuited): as there.
    monkeypatch.setattr(tensor_settings, "tensor_status", lambda: (False, "as on a GPU without Triton"))
    _, record = _cell(KmbenchGpuTf32(), _blobs(20_000, 64), 16, iterations=5)
    assert record["status"] in ("ok", "mismatch")
    assert any("TF32 labels that differ from FP32" in note for note in record["notes"])


@pytest.mark.gpu
def test_torch_peer_agrees():
    from impls.peers.torch_lloyd import TorchLloyd

    _, record = _cell(TorchLloyd(), _blobs(100_000, 2), 5, iterations=20)
    assert record["status"] == "ok", record.get("detail")
    oracle, record = _cell(TorchLloyd(), _blobs(100_000, 2), 5, iterations=50, tol=0.0)
    assert record["status"] == "ok", record.get("detail")
    # index_add_ sums in float32 in atomic order, so the centroids jitter in their last bits
    # and a point on a bisector may flip once more than in float64: one iteration, no more.
    assert oracle.iterations <= record["iterations_executed"] <= oracle.iterations + 1


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1000, 4096 * 3, 4096 * 3 + 17])
def test_column_sums_of_cupy_input_are_the_float64_sums(n):
    """kmbench.KMeans's CuPy input is centred by its column sums, taken in slabs of rows (fewer
    rows than slabs, a multiple of them, and a remainder): within a few float64 roundings of the
    sums in exact order, for data far from the origin."""
    import cupy

    from impls.gpu.kmbench_gpu import column_sums

    data = np.random.default_rng(n).standard_normal((n, 5)).astype(np.float32) + 1e3
    want = np.array([float(np.sum(np.asarray(data[:, c], np.float64), dtype=np.float64)) for c in range(5)])
    got = cupy.asnumpy(column_sums(cupy.asarray(data)))
    np.testing.assert_allclose(got, want, rtol=1e-12)
