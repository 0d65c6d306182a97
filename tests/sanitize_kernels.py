"""Drive each CUDA version once on an awkward shape, for compute-sanitizer on a GPU machine:

    compute-sanitizer --tool memcheck  python3 tests/sanitize_kernels.py [FAMILY ...]
    compute-sanitizer --tool racecheck python3 tests/sanitize_kernels.py [FAMILY ...]

FAMILY is cuda (document 000's versions), cuda-002 or kmbench-gpu; none named: all three.

n = 5003 leaves a partial last block, k = 37 exceeds a block of 32 and spans two cluster
tiles, and 100 threads leave a partial last warp. kmbench-gpu runs each strategy (d = 3 and
d = 40; resident also at k = 13, 39 accumulator columns; tensor at d = 64 and 128, where the pass
is hopper_pass.cu's in fp16 on Hopper, for 8 iterations, so that later ones take their sums from
the moved rows, and at d = 160) under both stop rules, and tiled
once more on sorted points, two blocks, so that its candidate lists are short and reused. cuda-002 runs with k = 7 (warp sums),
k = 37 (shared accumulators) and k = 1100 (global accumulators), under both stop rules.
"""

import sys
from dataclasses import replace

import numpy as np

from impls.gpu.cuda import CudaV1, CudaV2, CudaV3
from impls.gpu.cuda.doc002 import Cuda002
from impls.gpu.kmbench_gpu import KmbenchGpu
from kmbench.protocol import runner
from kmbench.data.datasets import Dataset

families = set(sys.argv[1:]) or {"cuda", "cuda-002", "kmbench-gpu"}
data = np.random.default_rng(0).standard_normal((5003, 2)).astype(np.float32)
problem = runner.make_problem(Dataset("sanitize", data, None, {}), runner.Settings(k=37, iterations=3))
for version in (CudaV1, CudaV2, CudaV3) if "cuda" in families else ():
    for block in (32, 100):
        impl = version(block_size=block)
        impl.prepare(problem)
        result = impl.run(problem)
        impl.release()
        print(version.name, block, "finite" if np.isfinite(result.centroids).all() else "NOT FINITE")
for k in (7, 37, 1100) if "cuda-002" in families else ():
    for tol in (None, 0.0):
        big = runner.make_problem(Dataset("sanitize", data, None, {}), runner.Settings(k=k, iterations=3))
        big = replace(big, tol=tol)
        impl = Cuda002(block_size=64)
        impl.prepare(big)
        result = impl.run(big)
        impl.release()
        print("cuda-002", k, tol, result.iterations, "finite" if np.isfinite(result.centroids).all() else "NOT FINITE")
kmbench_gpu_cases = (("resident", 3, 5), ("resident", 2, 13), ("columns", 2, 13), ("small-k", 3, 5), ("tiled", 3, 37),
                     ("tiled", 3, 300), ("gemm", 40, 37), ("tensor", 64, 300), ("tensor", 128, 300), ("tensor", 160, 600))
for chosen, d, k in kmbench_gpu_cases if "kmbench-gpu" in families else ():
    points = np.random.default_rng(1).standard_normal((5003, d)).astype(np.float32)
    for tol in (None, 0.0):
        shaped = replace(runner.make_problem(Dataset("sanitize", points, None, {}),
                                             runner.Settings(k=k, iterations=8 if chosen == "tensor" else 3)), tol=tol)
        impl = KmbenchGpu(force_strategy=chosen)
        impl.prepare(shaped)
        result = impl.run(shaped)
        impl.release()
        print("kmbench-gpu", chosen, d, k, tol, "finite" if np.isfinite(result.centroids).all() else "NOT FINITE",
              impl._info.get("tf32_pass", ""), "moved-row sums:", impl._info.get("moved_sum_iterations", "-"))
if "kmbench-gpu" in families:
    # The tiled kernel's candidate lists: points sorted along x, so each block's box is a slab and
    # the lists are short, on two blocks, so each block lists for three groups in turn.
    from impls.gpu.kmbench_gpu.strategies.tiled import Tiled

    Tiled.grid = lambda self, n: 2
    points = np.random.default_rng(2).standard_normal((5003, 2)).astype(np.float32)
    points = points[np.argsort(points[:, 0])]
    sorted_problem = runner.make_problem(Dataset("sanitize", points, None, {}), runner.Settings(k=300, iterations=3))
    impl = KmbenchGpu(force_strategy="tiled")
    impl.prepare(sorted_problem)
    result = impl.run(sorted_problem)
    impl.release()
    print("kmbench-gpu tiled, sorted, 2 blocks", impl._info.get("pruning"),
          "finite" if np.isfinite(result.centroids).all() else "NOT FINITE")
