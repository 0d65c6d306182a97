"""Drive each CUDA version once on an awkward shape, for compute-sanitizer on a GPU machine:

    compute-sanitizer --tool memcheck  python3 tests/sanitize_kernels.py
    compute-sanitizer --tool racecheck python3 tests/sanitize_kernels.py

n = 5003 leaves a partial last block, k = 37 exceeds a block of 32 and spans two cluster
tiles, and 100 threads leave a partial last warp.
"""

import numpy as np

from impls.cuda import CudaV1, CudaV2, CudaV3
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
