"""The judge's own fused kernel (kmbench.judge.scan, low d on the GPU): compiled with nvcc where it
is on PATH (CI has it), and on a GPU it finds the same two nearest centroids as the CPU's k-d tree."""

import shutil
import subprocess

import numpy as np
import pytest

from kmbench.judge import scan
from kmbench.judge.precision import FLOAT32


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_the_fused_kernel_compiles(tmp_path):
    source = tmp_path / "best_two.cu"
    source.write_text(scan._FUSED_SOURCE)
    done = subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-o", str(tmp_path / "k.cubin"), str(source)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.gpu
@pytest.mark.parametrize("d, k", [(1, 3), (2, 1000), (8, 300)])
def test_the_fused_kernel_finds_the_two_nearest(d, k):
    import cupy

    rng = np.random.default_rng(d)
    data = rng.integers(-5, 6, (20_000, d)).astype(np.float64)  # exact ties among integer centroids
    centroids = data[rng.choice(len(data), k, replace=False)] + 0.25
    mean = data.mean(axis=0)
    d1, d2, best = (cupy.asnumpy(a) for a in scan._fused_best_two(
        cupy.asarray(data), cupy.asarray(centroids - mean), cupy.asarray(mean), cupy))
    exact = ((data[:, None, :] - centroids[None]) ** 2).sum(axis=2)
    order = np.sort(exact, axis=1)
    np.testing.assert_allclose(d1, order[:, 0], rtol=1e-12, atol=1e-12)
    if k > 1:
        np.testing.assert_allclose(d2, order[:, 1], rtol=1e-12, atol=1e-12)
    ties = order[:, 1] - order[:, 0] <= 1e-9 if k > 1 else np.zeros(len(data), bool)
    np.testing.assert_array_equal(best[~ties], np.argmin(exact, axis=1)[~ties])
    # On exact ties the kernel, working on centred coordinates, may round either way: any tied
    # minimum will do (the judge scores such points again in float64, lowest index first).
    assert (exact[ties, best[ties]] <= order[ties, 0] + 1e-9).all()


GPU_ROWS = ["kmbench-gpu", "yinyang-gpu", "triton-fused", "cuda-v3"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_ROWS)
def test_exact_ties_on_integer_data_go_to_the_lowest_index(name):
    """Integer points with an integer mean and integer start centroids two apart: every point
    halfway between two of them is an exact tie in any precision, which the lowest index wins.
    A row that breaks it is named by the judge (tests/test_wrong_rows.py shows one on the CPU)."""
    from kmbench.registry import discover
    from tests.conftest import gpu_cell

    impl = discover()[name]
    ready, why = impl.available()
    if not ready:
        pytest.skip(why)
    rng = np.random.default_rng(3)
    half = rng.integers(0, 11, size=(10_000, 2))
    data = np.vstack([half, 10 - half]).astype(np.float32)  # mean (5, 5): centred coordinates are integers
    start = np.array([[0, 0], [2, 0], [0, 2], [2, 2], [10, 10], [8, 10], [10, 8], [8, 8]], dtype=np.float32)
    distances = ((data[:, None, :].astype(np.float64) - start[None]) ** 2).sum(axis=2)
    ordered = np.sort(distances, axis=1)
    assert (ordered[:, 0] == ordered[:, 1]).sum() > 1000  # the first step has exact ties to decide
    _, record = gpu_cell(impl, data, 8, 5, start=start)
    assert record["status"] == "ok", record.get("detail")
