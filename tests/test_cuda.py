"""CUDA versions 1-3. Without a GPU: every kernel source still compiles with nvcc (when it is
on PATH), limits are refused before launch, and the rows are skipped with a reason. With a
GPU (`make test-gpu`): agreement with the float64 oracle over sizes, k and block sizes."""

import shutil
import subprocess
from dataclasses import replace

import numpy as np
import pytest

from impls.cuda import HERE, MAX_K, CudaV1, CudaV2, CudaV3, cuda_status
from kmbench.protocol import runner, validate
from kmbench.data.datasets import Dataset, blobs
from kmbench.errors import ImplementationError

VERSIONS = [CudaV1, CudaV2, CudaV3]
SOURCES = sorted(HERE.glob("*.cu"))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_kernel_source_compiles_with_nvcc(source, arch, tmp_path):
    done = subprocess.run(["nvcc", "-cubin", f"-arch={arch}", "-std=c++17", f"-I{HERE}",
                           "-o", str(tmp_path / "k.cubin"), str(source)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_three_versions_have_sources():
    assert {"v1_atomic.cu", "v2_shared.cu", "v3_reduce.cu", "doc002.cu"} <= {p.name for p in SOURCES}


def _problem(n=50, d=2, k=3):
    data = np.random.default_rng(0).standard_normal((n, d)).astype(np.float32)
    return runner.make_problem(Dataset("t", data, None, {}), runner.Settings(k=k, iterations=2))


@pytest.mark.parametrize("version", VERSIONS)
def test_limits_are_refused_before_launch(version):
    with pytest.raises(ImplementationError, match="d = 2"):
        version().check(_problem(d=3))
    with pytest.raises(ImplementationError, match="block size"):
        version(block_size=2048).check(_problem())
    big = _problem(n=MAX_K + 1, k=MAX_K + 1)
    with pytest.raises(ImplementationError, match=f"k <= {MAX_K}"):
        version().check(big)


@pytest.mark.skipif(cuda_status()[0], reason="a GPU is present: the rows are not skipped here")
def test_without_gpu_the_rows_are_skipped_with_a_reason():
    problem = _problem()
    for version in VERSIONS:
        record = runner.run_cell(version(), problem, None, Dataset("t", problem.data, None, {}),
                                 runner.Settings(k=3, iterations=2), "t")
        assert record["status"] == "skipped" and record["detail"] == cuda_status()[1]


# ------------------------------------------------------------------ on a GPU


def _cell(impl, data, k, iterations=20, start=None, repeats=1):
    dataset = Dataset("gpu", data, None, {"generator": "test"})
    settings = runner.Settings(k=k, iterations=iterations, warmup=1, repeats=repeats)
    problem = runner.make_problem(dataset, settings)
    if start is not None:
        problem = replace(problem, initial_centroids=start.astype(np.float32))
    oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, iterations)
    return runner.run_cell(impl, problem, oracle, dataset, settings, "gpu")


SIZES = [(n, k) for n in (100, 1007, 100_000, 1_000_000) for k in (1, 5, 100, 1000) if k <= n]


@pytest.mark.gpu
@pytest.mark.parametrize("version", VERSIONS, ids=lambda v: v.name)
@pytest.mark.parametrize("n,k", SIZES)
def test_agrees_with_reference(version, n, k):
    data = np.asarray(blobs(n, 2, 5, seed=n % 97).data)
    record = _cell(version(), data, k)
    assert record["status"] == "ok", (record.get("detail"), record.get("validation"))
    assert record["times"]["phases"]["download"]["count"] == 1


@pytest.mark.gpu
@pytest.mark.parametrize("version", VERSIONS, ids=lambda v: v.name)
@pytest.mark.parametrize("block_size", [1, 32, 100, 256, 1024])
@pytest.mark.parametrize("k", [5, 1000])
def test_every_block_size_and_partial_last_block(version, block_size, k):
    data = np.asarray(blobs(5003, 2, 5, seed=3).data)  # 5003: a partial last block for every size
    record = _cell(version(block_size=block_size), data, k, iterations=10)
    assert record["status"] == "ok", record.get("detail")


@pytest.mark.gpu
@pytest.mark.parametrize("version", VERSIONS, ids=lambda v: v.name)
def test_empty_cluster_keeps_its_centroid(version):
    data = np.asarray(blobs(10_000, 2, 5, seed=1).data)
    start = np.vstack([data[:4], [[1e4, 1e4]]])  # nothing is ever nearest to the last
    record = _cell(version(), data, 5, start=start)
    assert record["status"] == "ok", record.get("detail")


@pytest.mark.gpu
def test_environment_measures_both_ceilings():
    from kmbench.protocol import environment
    info = environment.gpu()
    assert info["name"] and info["copy_bandwidth_Bps"] > 1e11  # any data-centre GPU copies > 100 GB/s
    # An H100/H200 issues about 3e13 FP32 instructions per second; any recent GPU over 1e12.
    assert 1e12 < info["fp32_issue_rate"] < 1e15
    # Tensor cores: TF32 products outrun the FP32 pipes (2 FLOPs an FMA), fp16 outruns TF32.
    assert info["tf32_flops"] > 2 * info["fp32_issue_rate"] and info["fp16_flops"] > info["tf32_flops"]


@pytest.mark.gpu
def test_many_blocks_reduce_completely():
    """More blocks than one coarse block has threads, so the coarse loop must stride."""
    data = np.asarray(blobs(1_000_000, 2, 5, seed=2).data)
    record = _cell(CudaV3(block_size=32), data, 5, iterations=5)  # 31,250 blocks
    assert record["status"] == "ok", record.get("detail")


@pytest.mark.gpu
def test_a_broken_variant_is_flagged(tmp_path):
    """The published means load (only the first blockDim.x threads copy a mean) breaks k > block size."""
    shutil.copytree(HERE, tmp_path / "src", ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    common = tmp_path / "src" / "common.cuh"
    text = common.read_text()
    assert "j += blockDim.x" in text
    common.write_text(text.replace("j += blockDim.x", "j += k"))  # each thread loads at most one mean
    data = np.asarray(blobs(20_000, 2, 5, seed=4).data)
    record = _cell(CudaV2(block_size=128, source_dir=tmp_path / "src"), data, 300, iterations=10)
    assert record["status"] == "mismatch"


@pytest.mark.gpu
@pytest.mark.parametrize("version", VERSIONS, ids=lambda v: v.name)
def test_plain_launches_agree_as_well_as_the_graph(version, monkeypatch):
    monkeypatch.setenv("KMBENCH_CUDA_GRAPH", "0")
    data = np.asarray(blobs(100_000, 2, 5, seed=6).data)
    record = _cell(version(), data, 5, iterations=30)
    assert record["status"] == "ok" and record["build"]["launch"] == "stream", record.get("detail")


@pytest.mark.gpu
def test_timing_uses_events_and_keeps_phases_apart():
    data = np.asarray(blobs(100_000, 2, 5, seed=0).data)
    record = _cell(CudaV3(), data, 5, iterations=50, repeats=3)
    assert record["status"] == "ok"
    setup = record["times"]["setup_phases"]
    assert setup["compile"] > 0 and setup["upload"] > 0 and setup["capture"] > 0
    assert record["build"]["launch"] == "cuda graph"
    assert record["bytes_per_iteration"] == 100_000 * 8 and record["achieved_bandwidth_Bps"] > 0
    assert record["fp32_per_distance"] == 5.0
    assert record["times"]["iterate"]["count"] == 3
    assert record["times"]["iterate"]["mean"] <= record["times"]["wall"]["mean"]


def test_v3_points_per_thread_follow_the_block_size():
    assert CudaV3().block_size == 128 and CudaV3().points_per_thread == 16
    assert CudaV3(block_size=1024).points_per_thread == 8
    assert "-DFINE_MAX_THREADS=512" in CudaV3(block_size=512).defines
    with pytest.raises(ImplementationError, match="at most 512 threads"):
        CudaV3(block_size=1024, points_per_thread=16).check(_problem())
