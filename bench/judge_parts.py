"""Where the judge's time goes on one cell of bench/validation_time.py: the float64 reference and
one row's certification, split into the scans (carried bounds, the scorer, the float64 re-check),
the sums by cluster, and the rest, each timed with the GPU synchronised around it. Not a test.

    python3 bench/judge_parts.py blobs-1e7x128-k4096 [--impl kmbench-gpu]
    python3 bench/judge_parts.py radial-1e9x2-k1000 --from-host

--from-host judges the row again as the scaling plan judges its cells after the alone rows': the
judge's GPU memory given back first (Oracle.release), the data pinned in host memory, then once
more on the GPU, and once from host memory (reference.judge_from_host), as a Dask set's cells
are; each of these with Python's profile of its slowest calls.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from collections import defaultdict
from contextlib import contextmanager

from bench.validation_time import CELLS, _warm_up
from kmbench.data.datasets import Dataset
from kmbench.judge import certify, kernels, scan, scoring, seeds, sums
from kmbench.protocol import clock, reference, runner, validate
from kmbench.protocol.device import PinnedHost
from kmbench.protocol.memory import give_back_gpus
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
    parser.add_argument("--from-host", action="store_true", help="judge again as the scaling plan's later cells are")
    args = parser.parse_args(argv)
    make, k, iterations, rows = CELLS[args.cell]
    data = make()
    pinned = PinnedHost(data) if args.from_host else None  # as the scaling plan holds its data
    for owner, name, label in [(scan, "assign", "scan (all)"), (scoring.Scorer, "best_two", "scan: scorer"),
                               (kernels, "scored_best_two", "scan: score kernel"),
                               (kernels, "fused_best_two", "scan: fused kernel"), (sums, "group", "sums by cluster"),
                               (certify, "group", "sums by cluster (certify)"),
                               (scan.Geometry, "of", "geometry"), (reference, "resident", "data to the GPU"),
                               (seeds.Seed, "on", "seeds moved"), (reference, "spread", "spread")]:
        timed(owner, name, label)
    if args.from_host:
        import cupyx

        timed(cupyx, "empty_pinned", "page-locked allocations")
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
    if args.from_host:
        _as_later_cells(oracle, problem, impl, results)
        pinned.release()
    impl.release()
    return 0


def _as_later_cells(oracle, problem, impl, results) -> None:
    """The judgements of the scaling plan's cells after the alone rows', each profiled."""
    oracle.release()  # as run_cells does when its rows are done, and as make_room may before a row
    give_back_gpus()
    profiled("on the GPU, after the judge gave its memory back", lambda: runner.judgement(results, oracle, problem,
                                                                                            impl))
    with reference.judge_from_host():
        oracle.release()
        profiled("from host memory", lambda: runner.judgement(results, oracle, problem, impl))


def profiled(title: str, judge) -> None:
    profile = cProfile.Profile()
    with phase("judgement, whole"):
        verdict = profile.runcall(judge)
    report(f"{title}: {verdict.status}")
    pstats.Stats(profile, stream=sys.stdout).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    sys.exit(main())
