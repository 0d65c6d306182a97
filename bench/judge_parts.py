"""Where the judge's time goes on one cell of bench/validation_time.py: the float64 reference and
one row's certification, split into the scans (carried bounds, the scorer, the float64 re-check),
the sums by cluster, and the rest, each timed with the GPU synchronised around it. Not a test.

    python3 bench/judge_parts.py blobs-1e7x128-k4096 [--impl kmbench-gpu]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from contextlib import contextmanager

from bench.validation_time import CELLS, _warm_up
from kmbench.data.datasets import Dataset
from kmbench.judge import certify, kernels, scan, seeds, sums
from kmbench.protocol import clock, reference, runner, validate
from kmbench.registry import discover

SPENT: dict = defaultdict(float)
CALLS: dict = defaultdict(int)


def timed(owner, name: str, label: str) -> None:
    """Wrap owner.name so that each call adds its synchronised wall time to SPENT[label]."""
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        clock.synchronize()
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            clock.synchronize()
            SPENT[label] += time.perf_counter() - started
            CALLS[label] += 1

    setattr(owner, name, wrapper)


@contextmanager
def phase(name: str):
    clock.synchronize()
    started = time.perf_counter()
    yield
    clock.synchronize()
    SPENT[name] += time.perf_counter() - started


def report(title: str) -> None:
    print(f"-- {title}")
    for label, seconds in sorted(SPENT.items(), key=lambda item: -item[1]):
        print(f"{label:32s} {seconds:8.3f} s  ({CALLS[label] or 1} calls)")
    SPENT.clear()
    CALLS.clear()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cell", choices=sorted(CELLS))
    parser.add_argument("--impl")
    args = parser.parse_args(argv)
    make, k, iterations, rows = CELLS[args.cell]
    data = make()
    for owner, name, label in [(scan, "assign", "scan (all)"), (scan._Scorer, "best_two", "scan: scorer"),
                               (kernels, "scored_best_two", "scan: score kernel"),
                               (kernels, "fused_best_two", "scan: fused kernel"), (sums, "group", "sums by cluster"),
                               (certify, "group", "sums by cluster (certify)"),
                               (scan.Geometry, "of", "geometry"), (reference, "resident", "data to the GPU"),
                               (seeds.Seed, "on", "seeds moved"), (reference, "spread", "spread")]:
        timed(owner, name, label)
    dataset = Dataset(args.cell, data, None, {"generator": "bench/judge_parts.py"})
    settings = runner.Settings(k=k, iterations=iterations, warmup=1, repeats=2)
    _warm_up(data, settings, [args.impl or rows.split(",")[0]], discover())
    SPENT.clear()
    CALLS.clear()
    problem = runner.make_problem(dataset, settings)
    with phase("reference, whole"):
        oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, iterations)
    report(f"{args.cell}: the float64 reference ({oracle.seconds:.2f} s)")
    impl = discover()[args.impl or rows.split(",")[0]]
    impl.prepare(problem)
    results = [impl.run(problem) for _ in range(2)]
    with phase("judgement, whole"):
        verdict = runner.judgement(results, oracle, problem, impl)
    report(f"{args.cell}: {impl.name}'s judgement: {verdict.status}")
    impl.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
