"""Validated kmbench-gpu cells with one KMBENCH_TENSOR_* variable alternated, A, B, A, on the same
problem in one process (METHOD.md's A/B: the first value twice, so drift shows):

    python3 bench/tensor_ab_cells.py KMBENCH_TENSOR_INPUT tf32,fp16 "300000,408,5000,5;1000000,768,4096,5"

Shapes are "n,d,k,iterations;..." on blobs with k centres. Each cell prints its status, time per
iteration, re-check note, pass and the per-repeat times (results/nvidia-h200/wide-fp16/wide-ab.log
and ../embeddings/fp16-ab.log were made this way)."""

from __future__ import annotations

import sys

from kmbench.data.datasets import blobs
from kmbench_gpu_experiments import show  # beside this script
from tensor_cells import cells, with_settings


def main(variable: str, values: str, shapes: str) -> None:
    first, second = values.split(",")
    for shape in shapes.split(";"):
        n, d, k, iterations = (int(v) for v in shape.split(","))
        data = blobs(n, d=d, centers=k)
        impls = [(f"{value}{turn}", with_settings(**{variable: value}))
                 for turn, value in ((1, first), (1, second), (2, first))]
        for tag, record in cells(impls, data, k, iterations, repeats=3):
            show(f"{n}x{d} k={k} {tag}", record)
            per_repeat = [round(t * 1e3 / iterations, 4) for t in record.get("times", {}).get("iterate_values", [])]
            print("    ", record.get("build", {}).get("tf32_pass"), per_repeat, flush=True)
        del data


if __name__ == "__main__":
    main(*sys.argv[1:4])
