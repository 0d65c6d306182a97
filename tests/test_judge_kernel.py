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
def test_the_fused_kernel_agrees_with_the_tree(d, k):
    import cupy

    rng = np.random.default_rng(d)
    data = rng.integers(-5, 6, (20_000, d)).astype(np.float32)  # exact ties among integer centroids
    centroids = data[rng.choice(len(data), k, replace=False)].astype(np.float64)
    on_cpu = scan.assign(data, centroids, FLOAT32, scan.Geometry.of(data))
    gpu_data = cupy.asarray(data)
    on_gpu = scan.assign(gpu_data, cupy.asarray(centroids), FLOAT32, scan.Geometry.of(gpu_data, cupy), cupy)
    np.testing.assert_array_equal(cupy.asnumpy(on_gpu.nearest), on_cpu.nearest)
    np.testing.assert_array_equal(cupy.asnumpy(on_gpu.unique), on_cpu.unique)
    np.testing.assert_array_equal(cupy.asnumpy(on_gpu.pair_points), on_cpu.pair_points)
