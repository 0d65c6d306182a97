"""What the extension's portable builds cost against the program's -march=native one: the same
Lloyd iterations from the same centred data and start, timed around the loop alone. The program
(kmbench-cpu, built with -march=native) times its own loop (its record's times); the extension's
two modules (_inproc_avx2: -mavx2 -mfma; _inproc_portable: the compiler's default x86-64) are
timed around their call, which does nothing else. Least of --repeats, after one warm-up.

    PYTHONPATH=. .venv/bin/python bench/inprocess_vs_program.py [--repeats 5] [--threads 2]
"""

from __future__ import annotations

import argparse
import importlib
import time
from dataclasses import replace

import numpy as np
from sklearn.datasets import make_blobs

from impls.cpu.kmbench_cpu import KmbenchCpu
from kmbench.estimator import fitting, inprocess
from kmbench.protocol import Options

SHAPES = [(1_000_000, 2, 5, "float32"), (1_000_000, 2, 1_000, "float32"), (200_000, 64, 100, "float32"),
          (100_000, 16, 100, "float64"), (200_000, 64, 100, "float64")]
ITERATIONS = 10


def program_seconds(X, start, repeats: int, threads: int) -> float:
    row = KmbenchCpu()
    problem = replace(fitting.problem(X, start, ITERATIONS), warmup=1, repeats=repeats,
                      options=Options(threads=threads))
    row.prepare(problem)
    try:
        return min(row.run(problem).iterate_times)
    finally:
        row.release()


def module_seconds(module, X, start, repeats: int, threads: int) -> float:
    best = float("inf")
    for _ in range(repeats + 1):  # the first is the warm-up
        centres = start[None].astype(np.float64)
        began = time.perf_counter()
        module.lloyd(X, centres, None, ITERATIONS, -1.0, threads, False)
        best = min(best, time.perf_counter() - began)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    inprocess.MODULE  # loaded first: its OpenMP runtime waits passively, as the program's (inprocess._load)
    modules = {name: importlib.import_module(f"kmbench.estimator._inproc_{name}") for name in ("avx2", "portable")}
    print(f"{ITERATIONS} iterations, {args.threads} threads, least of {args.repeats}; ms per iteration")
    print(f"{'shape':32s} {'program (native)':>17s} {'avx2':>8s} {'portable':>9s}")
    for n, d, k, dtype in SHAPES:
        X = make_blobs(n, d, centers=min(k, 100), random_state=0)[0].astype(dtype)
        # The program centres the data itself (by their float64 mean); the extension is handed them centred.
        centred = (X - X.mean(axis=0, dtype=np.float64)).astype(dtype)
        start = X[np.random.default_rng(0).choice(n, k, replace=False)]
        native = program_seconds(X, start, args.repeats, args.threads)
        shifted = (start - X.mean(axis=0, dtype=np.float64)).astype(dtype)
        times = [module_seconds(module, centred, shifted, args.repeats, args.threads) for module in modules.values()]
        cells = " ".join(f"{t / ITERATIONS * 1e3:8.2f}" for t in times)
        print(f"{n:>9,} x {d:<3d} k = {k:<5d} {dtype:8s} {native / ITERATIONS * 1e3:17.2f} {cells}", flush=True)


if __name__ == "__main__":
    main()
