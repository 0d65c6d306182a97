"""How long the judge takes beside the work it judges (the judge-cost issue's goals): each cell's
`times.judge` (its share of the float64 reference, every untimed call of the row, the
certification) against `times.row_calls` (its warm-up and counted runs), on data made in memory.
The goal of a cell: judge <= 2 x row calls + 5 s (the 1e9-point cell: <= 30 s). Not a test.

    python3 bench/validation_time.py --cell cpu-1e6x2-k1000 --cell cpu-2e5x64-k256     # any machine
    python3 bench/validation_time.py --cell blobs-1e7x128-k4096 --cell radial-1e9x2-k1000  # GPU machine
    python3 bench/validation_time.py --cell radial-1e9x2-k1000 --from-host        # as a Dask set's cells are judged
    python3 bench/validation_time.py --list

Prints one line per cell and writes the records (`--store`) and a markdown table (`--out`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time

import numpy as np

from kmbench.data.datasets import Dataset, fill_radial, radial_centers
from kmbench.plans.in_memory import generate_blobs
from kmbench.protocol import reference, residence, runner, validate
from kmbench.protocol.task import charge_judge
from kmbench.registry import discover

CELLS = {  # name: (maker, k, iterations, rows)
    "cpu-1e6x2-k1000": (lambda: _blobs_cpu(1_000_000, 2), 1000, 5, "kmbench-cpu"),
    "cpu-2e5x64-k256": (lambda: _blobs_cpu(200_000, 64), 256, 5, "kmbench-cpu"),
    "radial-1e8x2-k3": (lambda: _radial(100_000_000), 3, 3, "kmbench-gpu"),
    "radial-1e8x2-k1000": (lambda: _radial(100_000_000), 1000, 3, "kmbench-gpu"),
    "smoke-2e4x8-k50": (lambda: _normal(20_000, 8), 50, 10, "numpy"),
    "blobs-1e5x32-k300": (lambda: _blobs(100_000, 32, 300), 300, 300, "kmbench-gpu"),
    "normal-2e5x2-k1000": (lambda: _normal(200_000, 2), 1000, 10,
                           "kmbench-gpu,cuda-v3,yinyang-gpu,triton-fused,numpy,kmbench-cpu"),
    "unit-3e5x384-k2048": (lambda: _unit(300_000, 384), 2048, 5, "kmbench-gpu,yinyang-gpu"),
    "blobs-1e6x128-k1024": (lambda: _blobs(1_000_000, 128, 1024), 1024, 3,
                            "kmbench-gpu,yinyang-gpu,triton-fused,torch"),
    "blobs-1e7x128-k4096": (lambda: _blobs(10_000_000, 128, 4096), 4096, 10, "kmbench-gpu"),
    "radial-1e9x2-k1000": (lambda: _radial(1_000_000_000), 1000, 3, "kmbench-gpu"),
}


def _blobs(n, d, centers, seed=0):
    out = np.empty((n, d), np.float32)
    generate_blobs(n, d, centers, seed, out)  # on the GPU, as the scaling plans make them
    return out


def _blobs_cpu(n, d):
    """`kmbench run`'s blobs (5 centres, spread 1, seed 0), as `kmbench run --n N --d D` makes them."""
    from kmbench.data import datasets

    return datasets._generate_blobs(n, d, 5, 1.0, 0, "float32")[0]


def _normal(n, d, seed=0):
    return np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)


def _unit(n, d, seed=0):
    x = _normal(n, d, seed)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _radial(n, seed=0):
    centers = radial_centers(10, 20.0, 5, 2.0)
    out = np.empty((n // len(centers) * len(centers), 2), np.float32)
    fill_radial(out, centers, n // len(centers), 0.1, seed)
    return out


def _warm_up(data, settings, rows, everything) -> None:
    """The same cell on a few of its points (enough that the judge computes where it will for the
    whole), so that the kernels its rows and its judge use are compiled and cached before it."""
    n = max(50_000, settings.k + 1, 2 * residence.GPU_FROM_BYTES // (data.shape[1] * data.itemsize))
    small = Dataset("warm-up", data[:n], None, {"generator": "warm-up"})
    problem = runner.make_problem(small, settings)
    oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, settings.iterations)
    for impl in rows:
        runner.run_cell(everything[impl], problem, oracle, small, settings, "warm-up")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cell", action="append", default=[], help="a cell name (repeatable); see --list")
    parser.add_argument("--impl", help="rows to run instead of the cell's own (comma-separated)")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--store", help="a JSON-lines file for the records")
    parser.add_argument("--out", help="a markdown file for the table")
    parser.add_argument("--from-host", action="store_true",
                        help="judge as the scaling plan judges a GPU set's cells, whose workers hold the GPUs: "
                             "the data streamed from host memory (reference.judge_from_host), never copied whole")
    parser.add_argument("--cold", action="store_true",
                        help="no warm-up cell first (a fresh machine then compiles CuPy's kernels inside the cell)")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(CELLS))
        return 0
    everything = discover()
    lines = ["| cell | row | status | row calls (s) | judge (s) | of which reference (s) | goal (s) | met | detail |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name in args.cell:
        make, k, iterations, rows = CELLS[name]
        started = time.perf_counter()
        data = make()
        print(f"{name}: data made in {time.perf_counter() - started:.1f} s", flush=True)
        dataset = Dataset(name, data, None, {"generator": "bench/validation_time.py"})
        settings = runner.Settings(k=k, iterations=iterations, warmup=1, repeats=2)
        if not args.cold:  # CuPy compiles each kernel once per machine (its disk cache): not the judge's cost
            _warm_up(data, settings, (args.impl or rows).split(","), everything)
        problem = runner.make_problem(dataset, settings)
        oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, iterations)
        print(f"{name}: float64 reference in {oracle.seconds:.1f} s", flush=True)
        chosen = (args.impl or rows).split(",")
        share = oracle.seconds / len(chosen)
        for impl in chosen:
            with reference.judge_from_host() if args.from_host else contextlib.nullcontext():
                record = runner.run_cell(everything[impl], problem, oracle, dataset, settings, "bench")
            charge_judge(record, share)
            times = record.get("times", {})
            calls, judge = times.get("row_calls") or 0.0, times.get("judge") or 0.0
            goal = 30.0 if problem.n >= 10**9 else 2 * calls + 5.0
            detail = record.get("detail", "")
            print(f"{name} {impl}: {record['status']} row calls {calls:.2f} s, judge {judge:.2f} s "
                  f"(reference share {share:.2f} s), goal {goal:.1f} s: {'met' if judge <= goal else 'MISSED'}; "
                  f"{detail[:300]}", flush=True)
            lines.append(f"| {name} | {impl} | {record['status']} | {calls:.3g} | {judge:.3g} | {share:.3g} | "
                         f"{goal:.3g} | {'yes' if judge <= goal else 'no'} | {detail[:120]} |")
            if args.store:
                with open(args.store, "a") as handle:
                    handle.write(json.dumps(record, default=str) + "\n")
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
