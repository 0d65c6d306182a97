"""How long the judge takes beside the work it judges (the certified-verdicts issue's goals):
each cell's own timed runs against its validation (the float64 reference, stepping the row and
certifying every step), on data made in memory. GPU machine; not a test.

    python3 bench/validation_time.py --cell normal-2e5x2-k1000 --cell blobs-1e7x128-k4096 ...
    python3 bench/validation_time.py --list

Prints one line per cell and writes the records (`--store`) and a markdown table (`--out`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from kmbench.data.datasets import Dataset, fill_radial, radial_centers
from kmbench.plans.in_memory import generate_blobs
from kmbench.protocol import runner, validate
from kmbench.registry import discover

CELLS = {  # name: (maker, k, iterations, rows)
    "smoke-2e4x8-k50": (lambda: _normal(20_000, 8), 50, 10, "numpy"),
    "blobs-1e5x32-k300": (lambda: _blobs(100_000, 32, 300), 300, 300, "kmbench-gpu"),
    "normal-2e5x2-k1000": (lambda: _normal(200_000, 2), 1000, 10,
                           "kmbench-gpu,cuda-v3,yinyang-gpu,triton-fused,numpy,kmbench-cpu"),
    "unit-3e5x384-k2048": (lambda: _unit(300_000, 384), 2048, 5, "kmbench-gpu,yinyang-gpu"),
    "blobs-1e6x128-k1024": (lambda: _blobs(1_000_000, 128, 1024), 1024, 3,
                            "kmbench-gpu,yinyang-gpu,triton-fused,torch"),
    "blobs-1e7x128-k4096": (lambda: _blobs(10_000_000, 128, 4096), 4096, 10, "kmbench-gpu"),
    "radial-1e9x2-k1000": (lambda: _radial(1_000_000_000), 1000, 10, "kmbench-gpu"),
}


def _blobs(n, d, centers, seed=0):
    out = np.empty((n, d), np.float32)
    generate_blobs(n, d, centers, seed, out)  # on the GPU, as the scaling plans make them
    return out


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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cell", action="append", default=[], help="a cell name (repeatable); see --list")
    parser.add_argument("--impl", help="rows to run instead of the cell's own (comma-separated)")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--store", help="a JSON-lines file for the records")
    parser.add_argument("--out", help="a markdown file for the table")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(CELLS))
        return 0
    everything = discover()
    lines = ["| cell | row | status | run (s, all counted repeats) | validation (s) | oracle (s) | ratio | detail |",
             "|---|---|---|---|---|---|---|---|"]
    for name in args.cell:
        make, k, iterations, rows = CELLS[name]
        started = time.perf_counter()
        data = make()
        print(f"{name}: data made in {time.perf_counter() - started:.1f} s", flush=True)
        dataset = Dataset(name, data, None, {"generator": "bench/validation_time.py"})
        settings = runner.Settings(k=k, iterations=iterations, warmup=1, repeats=2)
        problem = runner.make_problem(dataset, settings)
        started = time.perf_counter()
        oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, iterations)
        oracle_s = time.perf_counter() - started
        print(f"{name}: float64 reference in {oracle_s:.1f} s", flush=True)
        for impl in (args.impl or rows).split(","):
            record = runner.run_cell(everything[impl], problem, oracle, dataset, settings, "bench")
            times = record.get("times", {})
            run_s = (times.get("wall") or {}).get("mean", 0.0) * record.get("repeats_done", 0)
            validation = times.get("validation") or 0.0
            ratio = (validation + oracle_s) / run_s if run_s else float("nan")
            detail = record.get("detail", "")
            print(f"{name} {impl}: {record['status']} run {run_s:.3f} s validation {validation:.1f} s "
                  f"(+ oracle {oracle_s:.1f} s) {detail[:300]}", flush=True)
            lines.append(f"| {name} | {impl} | {record['status']} | {run_s:.4g} | {validation:.3g} | {oracle_s:.3g} | "
                         f"{ratio:.3g} | {detail[:160]} |")
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
