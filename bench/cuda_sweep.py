"""Tuning sweep for the CUDA versions, one device call: every variant is validated against
the oracle and timed with the harness's protocol (CUDA events, warm-up, repeats).

    python3 bench/cuda_sweep.py [--iters 100] [--repeats 3]   # from the repository root, on the path

Prints one line per variant: n, k, version, block size, points per thread, status and
microseconds per iteration. impls/gpu/cuda/NOTES.md records what the sweeps found.
"""

from __future__ import annotations

import argparse
import sys

from impls.gpu.cuda import CudaV1, CudaV2, CudaV3
from kmbench.data import datasets
from kmbench.protocol import runner, validate


def variants():
    for block in (256,):
        yield CudaV1(block_size=block)
        yield CudaV2(block_size=block)
    for block in (128, 256, 512):
        for points in (4, 8, 16):
            yield CudaV3(block_size=block, points_per_thread=points)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,10000000")
    parser.add_argument("--ks", default="5,100")
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"{'n':>10} {'k':>4} {'version':8} {'block':>5} {'ppt':>3} {'status':8} {'us/iter':>9}")
    for n in (int(s) for s in args.sizes.split(",")):
        dataset = datasets.blobs(n, 2, 5, seed=0)
        for k in (int(s) for s in args.ks.split(",")):
            settings = runner.Settings(k=k, iterations=args.iters, warmup=1, repeats=args.repeats)
            problem = runner.make_problem(dataset, settings)
            oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, args.iters)
            for impl in variants():
                record = runner.run_cell(impl, problem, oracle, dataset, settings, "sweep")
                per_iter = record.get("per_iteration_s")
                points = getattr(impl, "points_per_thread", 1)
                shown = f"{per_iter * 1e6:9.1f}" if per_iter else "        -"
                print(f"{n:>10} {k:>4} {impl.name:8} {impl.block_size:>5} {points:>3} "
                      f"{record['status']:8} {shown} {record.get('detail', '')[:60]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
