"""The experiments behind the tensor-core path's section of impls/gpu/kmbench_gpu/NOTES.md (GPU machine),
run from the repository root with it on the path:

    python3 bench/tensor_experiments.py check     # small shapes, every cell validated
    python3 bench/tensor_experiments.py tilings   # 1e6 x 128, k = 1024: tilings of the
                                                  # TF32 pass, beside flash-kmeans
    python3 bench/tensor_experiments.py shapes    # the embeddings issue's five shapes
    python3 bench/tensor_experiments.py dense     # GPU rows on dense data, k in the hundreds
    python3 bench/tensor_experiments.py breakdown # per kernel, per iteration, each re-check
    python3 bench/tensor_experiments.py rechecks  # tilings of the re-check
    python3 bench/tensor_experiments.py wide      # tilings of the TF32 pass, d > 128
    python3 bench/tensor_experiments.py candidates [KEPT] [SHAPES]
                                                  # the re-check with candidates listed by the
                                                  # TF32 pass (KEPT: 1,0; SHAPES: n,d,k;...)
    python3 bench/tensor_experiments.py update    # the update's kernels one by one
    python3 bench/tensor_experiments.py hopper [SHAPES]
                                                  # hopper_pass.cu against Triton's pass, same
                                                  # centroids; then validated cells of both
    python3 bench/tensor_experiments.py epilogue [FORMS] [TILINGS]
                                                  # packed against slot epilogues, d <= 128
                                                  # (FORMS: slots,packed; TILINGS: M,N,D,warps,
                                                  # stages;... with D for d)
    python3 bench/tensor_experiments.py passes [SHAPES]
                                                  # Triton's pass against the Hopper pass with
                                                  # the re-checks they lead to, per kernel
    python3 bench/tensor_experiments.py inputs [SHAPES]
                                                  # the Hopper passes in TF32 against fp16,
                                                  # per kernel as `passes`
    python3 bench/tensor_experiments.py region [SHAPES]
                                                  # a cell's timed region in parts: what runs
                                                  # before the iterations, the CUDA graph, and
                                                  # ten iterations back to back per kernel group

Tilings are set through KMBENCH_TENSOR_TILING in this process only; the benchmark itself is
`kmbench reproduce embeddings`."""

from __future__ import annotations

import sys

# The experiments, by what they measure, in modules beside this script.
from tensor_cells import check, dense_rows, shapes
from tensor_hopper import hopper
from tensor_kernel_times import breakdown, candidates, inputs, passes, region, update
from tensor_tilings import epilogue, rechecks, tilings, wide


if __name__ == "__main__":
    {"check": check, "tilings": tilings, "shapes": shapes, "dense": dense_rows, "breakdown": breakdown,
     "rechecks": rechecks, "wide": wide, "epilogue": epilogue, "candidates": candidates, "update": update,
     "hopper": hopper, "passes": passes, "inputs": inputs, "region": region}[sys.argv[1]]()
