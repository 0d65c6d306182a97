"""Four iterations of kmbench-gpu's tensor path at one shape, kernel by kernel on one stream, for
a profiler to attach to (results/nvidia-h200/wide-fp16/README.md):

    ncu --kernel-name hopper_assign --launch-skip 2 --launch-count 1 --section SpeedOfLight \\
        python3 bench/tensor_pass_ncu.py 1000000,768,4096

Skipping two launches profiles the first of the four passes: prepare's warm-up runs two
iterations before them."""

from __future__ import annotations

import sys

import numpy as np

from kmbench.data.datasets import blobs
from kmbench.protocol import runner
from tensor_cells import with_settings  # beside this script


def main(shape: str) -> None:
    import cupy

    n, d, k = (int(v) for v in shape.split(","))
    problem = runner.make_problem(blobs(n, d=d, centers=k), runner.Settings(k=k, iterations=10))
    impl = with_settings()  # the tensor strategy, KMBENCH_TENSOR_* as the environment has them
    impl.use_graph = False
    impl.prepare(problem)
    path = impl._chosen.path
    print(path.tf32_pass, flush=True)
    path.start(np.asarray(problem.initial_centroids, np.float64) - impl._shift)
    for _ in range(4):
        path.certify()
        path.recheck_flagged()
        path.update(track=False)
    cupy.cuda.Device().synchronize()
    impl.release()


if __name__ == "__main__":
    main(sys.argv[1])
