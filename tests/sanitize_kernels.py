"""Drive each CUDA version once on an awkward shape, for compute-sanitizer on a GPU machine:

    compute-sanitizer --tool memcheck  python3 tests/sanitize_kernels.py
    compute-sanitizer --tool racecheck python3 tests/sanitize_kernels.py

n = 5003 leaves a partial last block, k = 37 exceeds a block of 32 and spans two cluster
tiles, and 100 threads leave a partial last warp. kmbench-gpu runs each strategy (d = 3 and
d = 40) under both stop rules. cuda-002 runs with k = 7 (warp sums),
k = 37 (shared accumulators) and k = 1100 (global accumulators), under both stop rules.
"""

import numpy as np

from dataclasses import replace

from impls.cuda import CudaV1, CudaV2, CudaV3
from impls.cuda.doc002 import Cuda002
from impls.fast import KmbenchGpu
from kmbench import runner
from kmbench.datasets import Dataset

data = np.random.default_rng(0).standard_normal((5003, 2)).astype(np.float32)
problem = runner.make_problem(Dataset("sanitize", data, None, {}), runner.Settings(k=37, iterations=3))
for version in (CudaV1, CudaV2, CudaV3):
    for block in (32, 100):
        impl = version(block_size=block)
        impl.prepare(problem)
        result = impl.run(problem)
        impl.release()
        print(version.name, block, "finite" if np.isfinite(result.centroids).all() else "NOT FINITE")
for k in (7, 37, 1100):
    for tol in (None, 0.0):
        big = runner.make_problem(Dataset("sanitize", data, None, {}), runner.Settings(k=k, iterations=3))
        big = replace(big, tol=tol)
        impl = Cuda002(block_size=64)
        impl.prepare(big)
        result = impl.run(big)
        impl.release()
        print("cuda-002", k, tol, result.iterations, "finite" if np.isfinite(result.centroids).all() else "NOT FINITE")
for chosen, d, k in (("small-k", 3, 5), ("tiled", 3, 37), ("tiled", 3, 300), ("gemm", 40, 37)):
    points = np.random.default_rng(1).standard_normal((5003, d)).astype(np.float32)
    for tol in (None, 0.0):
        shaped = replace(runner.make_problem(Dataset("sanitize", points, None, {}),
                                             runner.Settings(k=k, iterations=3)), tol=tol)
        impl = KmbenchGpu(force_strategy=chosen)
        impl.prepare(shaped)
        result = impl.run(shaped)
        impl.release()
        print("kmbench-gpu", chosen, d, k, tol, "finite" if np.isfinite(result.centroids).all() else "NOT FINITE")
