"""The judge's memory per point, measured on the CPU with NumPy (the code a GPU runs with CuPy).
Not a test.

    PYTHONPATH=. .venv/bin/python bench/judge_memory.py --n 1000000 --k 1000 --iterations 3
    PYTHONPATH=. .venv/bin/python bench/judge_memory.py --n 1000000 --k 3 --data blobs --attribute

Two phases, each measured from what was held before it: the float64 reference
(`validate.Oracle.compute`), then the verdict on one row (`runner.judgement`: its validation run,
the certification of every step, the end points' figures). The row is a replay of the NumPy row
(`--row replay-trace`: its traced run, labels at the end only; `--row replay-stepped`: one
iteration at a time, labels every step), computed before the phases start, so that what a phase
allocates is the judge's; `--row numpy` runs the real row inside the phase (its own score blocks
then count too). Per phase it prints, in bytes per point:
- peak: the most traced memory (tracemalloc: NumPy reports its buffers) above the phase's start;
- kept: what the phase left held (the oracle's cache and scans, say);
- rss: the process's peak resident memory above its resident memory at the start (VmHWM, reset
  through /proc/self/clear_refs; 0 where that is not allowed).
`--attribute` also prints the live set at the phase's highest checkpoint (a profile hook on every
call and return), by the innermost kmbench line that allocated each block; it slows the run.
The data themselves (n d 4 bytes, float32) are made before and not counted.
"""

from __future__ import annotations

import argparse
import linecache
import os
import sys
import time
import tracemalloc
from collections import defaultdict
from dataclasses import replace

import numpy as np

from kmbench.data.datasets import Dataset, fill_radial, radial_centers
from kmbench.protocol import Implementation, Result, runner, validate
from kmbench.protocol.settings import Settings, make_problem

OWN = ("/kmbench/", "/impls/", "judge_memory.py")


def _radial(n: int, seed: int = 0) -> np.ndarray:
    centers = radial_centers(10, 20.0, 5, 2.0)
    out = np.empty((n // len(centers) * len(centers), 2), np.float32)
    fill_radial(out, centers, n // len(centers), 0.1, seed)
    return out


def _blobs(n: int, d: int) -> np.ndarray:
    from kmbench.data import datasets

    return datasets._generate_blobs(n, d, 5, 1.0, 0, "float32")[0]


class Replay(Implementation):
    """The NumPy row's results, computed before the measurement and handed back on demand:
    a correct row whose own memory is already held when the judge starts."""

    name = "replay"
    dtype = "float32"

    def __init__(self, problem, stepped: bool):
        from impls.cpu.numpy_fast import NumpyFast

        row = NumpyFast()
        self.traces = not stepped
        self.whole = row.run(replace(problem, trace=True))
        self.steps = {}
        if stepped:  # each step from the row's own previous output, as the judge will ask for it
            current = problem.initial_centroids
            for _ in range(problem.iterations):
                once = row.run(replace(problem, initial_centroids=current, iterations=1, tol=None))
                self.steps[np.asarray(current, dtype=np.float64).tobytes()] = once
                current = once.centroids.astype(problem.data.dtype)

    def run(self, problem) -> Result:
        if problem.iterations == 1 and self.steps:
            return self.steps[np.asarray(problem.initial_centroids, dtype=np.float64).tobytes()]
        return self.whole


class Watch:
    """The live set at the highest checkpoint (every Python call and return while installed)."""

    def __init__(self):
        self.best, self.snapshot, self.own = 0, None, 0

    def __call__(self, frame, event, arg):
        current = tracemalloc.get_traced_memory()[0] - self.own
        if current > self.best * 1.03 + (1 << 20):
            self.snapshot = None
            before = tracemalloc.get_traced_memory()[0]
            self.snapshot = tracemalloc.take_snapshot()
            self.own = tracemalloc.get_traced_memory()[0] - before
            self.best = current

    def report(self, n: int, floor: float) -> list[str]:
        if self.snapshot is None:
            return []
        by_site = defaultdict(int)
        for trace in self.snapshot.traces:
            frames = list(reversed(trace.traceback))  # the most recent first
            site = next((f for f in frames if any(part in f.filename for part in OWN)
                         and "judge_memory.py" not in f.filename), None)
            if site is None:
                if any("judge_memory.py" in f.filename for f in trace.traceback):
                    continue  # this script's own (the replayed row's results, the snapshots)
                key = f"(elsewhere) {frames[0].filename.split('/')[-1]}:{frames[0].lineno}"
            else:
                text = linecache.getline(site.filename, site.lineno).strip()
                key = f"{site.filename.split('/kmbench/')[-1].split('/impls/')[-1]}:{site.lineno}  {text[:90]}"
            by_site[key] += trace.size
        lines = [f"    live at the highest checkpoint: {self.best / n:.1f} B/point"]
        for key, size in sorted(by_site.items(), key=lambda item: -item[1]):
            if size / n >= floor:
                lines.append(f"    {size / n:8.2f} B/point  {key}")
        return lines


def _hwm_reset() -> int:
    """Reset the peak resident memory; the resident memory now (bytes; 0 where not allowed)."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return _status("VmRSS")
    except OSError:
        return 0


def _status(field: str) -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _phase(name: str, n: int, attribute: bool, floor: float, work):
    start = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    rss = _hwm_reset()
    watch = Watch() if attribute else None
    if watch:
        sys.setprofile(watch)
    began = time.perf_counter()
    try:
        out = work()
    finally:
        sys.setprofile(None)
    seconds = time.perf_counter() - began
    now, peak = tracemalloc.get_traced_memory()
    lines = watch.report(n, floor) if watch else []
    if watch and watch.snapshot is not None:
        watch.snapshot = None  # what it held is not the phase's
        now = tracemalloc.get_traced_memory()[0]
    high = _status("VmHWM") - rss if rss else 0
    print(f"{name}: peak {(peak - start) / n:.1f} B/point, kept {(now - start) / n:.1f} B/point, "
          f"rss {high / n:.1f} B/point, {seconds:.2f} s", flush=True)
    for line in lines:
        print(line)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--d", type=int, default=2, help="blobs only (the radial tree is 2-d)")
    parser.add_argument("--k", type=int, default=1000)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--data", choices=("radial", "blobs"), default="radial")
    parser.add_argument("--row", choices=("replay-trace", "replay-stepped", "numpy"), default="replay-trace")
    parser.add_argument("--attribute", action="store_true", help="the live set at each phase's highest point")
    parser.add_argument("--chunk-rows", type=int,
                        help="points per chunk of the judge's scans and sums (default: its own, about 1e6 on the "
                             "CPU); smaller, so that what a chunk holds stays apart from what the judge holds "
                             "for every point, as at 1e9 points on a GPU (chunks of 4e7)")
    parser.add_argument("--floor", type=float, default=0.5, help="B/point below which a site is not listed")
    args = parser.parse_args(argv)

    if args.chunk_rows:
        from kmbench.judge import scoring
        from kmbench.protocol import residence

        scoring.TREE_ROWS, scoring.SCORE_ELEMENTS = args.chunk_rows, args.chunk_rows * args.k
        residence.CHUNK_ELEMENTS = args.chunk_rows * args.d
    data = _radial(args.n) if args.data == "radial" else _blobs(args.n, args.d)
    n = data.shape[0]
    dataset = Dataset("memory", data, None, {"generator": "bench/judge_memory.py"})
    settings = Settings(k=args.k, iterations=args.iterations, warmup=0, repeats=1)
    problem = make_problem(dataset, settings)
    if args.row == "numpy":
        from impls.cpu.numpy_fast import NumpyFast

        impl = NumpyFast()
    else:
        impl = Replay(problem, stepped=args.row == "replay-stepped")
    results = [impl.run(problem)]
    print(f"{args.data} {n:,} x {data.shape[1]} ({data.nbytes / n:.0f} B/point), k = {args.k}, "
          f"{args.iterations} iterations, row {args.row}"
          f"{f', chunks of {args.chunk_rows:,} points' if args.chunk_rows else ''}", flush=True)

    # The same flow on a few points first, untraced: the modules the judge imports on first use
    # (SciPy's k-d tree: megabytes of code) are not a phase's memory.
    few = replace(problem, data=problem.data[: max(20_000, args.k + 1)], iterations=2)
    warm = impl if args.row == "numpy" else Replay(few, stepped=False)
    runner.judgement([warm.run(few)], validate.Oracle.compute(few.data, few.initial_centroids, 2), few, warm)
    tracemalloc.start(12)
    oracle = _phase("reference", n, args.attribute, args.floor,
                           lambda: validate.Oracle.compute(problem.data, problem.initial_centroids,
                                                           args.iterations))
    space = oracle.workspace
    full, norms = space.geometry.full, space.geometry.norms
    cached = (sum(a.nbytes for a in (full.x64, full.centred64, full.norm, full.centred_norm)) if full is not None
              else sum(a.nbytes for a in norms) if norms is not None else 0)
    print(f"  the oracle keeps: points cache {cached / n:.1f} B/point, bank {oracle.seeds.nbytes / n:.1f} "
          f"B/point ({len(oracle.seeds.by_step)} scans)", flush=True)
    verdict = _phase(f"judge ({args.row})", n, args.attribute, args.floor,
                            lambda: runner.judgement(results, oracle, problem, impl))
    print(f"  verdict: {verdict.status}; {verdict.detail[:160]}")
    print(f"  the oracle keeps: bank {oracle.seeds.nbytes / n:.1f} B/point ({len(oracle.seeds.by_step)} scans)")
    tracemalloc.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
