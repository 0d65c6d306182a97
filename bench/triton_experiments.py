"""The experiments behind impls/gpu/triton_fused/NOTES.md, on a GPU machine (each validates
against the oracle), run from the repository root with it on the path:

    python3 bench/triton_experiments.py shapes  # triton-fused beside kmbench-gpu, d = 2
                                                # (k = 5 to 1000), d = 64 and d = 408
    python3 bench/triton_experiments.py blocks  # the low-d path's block shapes and warps
                                                # at 1e7 points, k = 32 and 1000

They patch the adapter (tiling, warps) in this process only; the benchmark itself is
`kmbench run ... --impl kmbench-gpu,triton-fused,...` (results/nvidia-h100/triton-keops/)."""

import sys

import impls.gpu.triton_fused as fused
from kmbench_gpu_experiments import cell, show  # beside this script
from impls.gpu.kmbench_gpu import KmbenchGpu
from kmbench.data.datasets import blobs

SHAPES = [(10**7, 2, 5), (10**7, 2, 32), (10**7, 2, 100), (10**7, 2, 1000), (10**6, 64, 1000),
          (300_000, 408, 5000)]
BLOCKS = [(64, 32, 4), (128, 32, 4), (256, 32, 8), (128, 64, 4), (64, 64, 4), (32, 128, 4), (256, 64, 8)]


def shapes() -> None:
    for n, d, k in SHAPES:
        data = blobs(n, d=d, centers=k)
        for impl in (fused.TritonFused(), KmbenchGpu()):
            show(f"{impl.name} n={n} d={d} k={k}", cell(impl, data, k, 5, repeats=2))


def blocks() -> None:
    default = fused.tiling
    for k in (32, 1000):
        data = blobs(10**7, centers=k)
        for block_n, block_k, warps in BLOCKS:
            def shaped(d, kk, block_n=block_n, block_k=block_k):
                shape = dict(default(d, kk), BLOCK_N=block_n, BLOCK_K=block_k)
                shape["SUMS_IN_PROGRAM"] = kk <= block_k and block_n * block_k * shape["DIM_PAD"] <= 8192
                return shape
            fused.tiling, fused.NUM_WARPS = shaped, warps
            show(f"k={k} block {block_n}x{block_k}, {warps} warps", cell(fused.TritonFused(), data, k, 20, 2))
    fused.tiling, fused.NUM_WARPS = default, 4


if __name__ == "__main__":
    {"shapes": shapes, "blocks": blocks}[sys.argv[1] if len(sys.argv) > 1 else "shapes"]()
