"""kmbench-cpu beside another program: its time per iteration at 1 and 2 threads, with the CPUs
idle and with one of them held by a process that spins. The work shares of before (equal static
shares, built with -DKMBENCH_CPU_STATIC_SCHEDULE) or of now (dynamic units), each with --waits:
how a thread waits at the end of a parallel loop. "default": libgomp's own (it spins a while,
then sleeps); "passive": OMP_WAIT_POLICY=passive (it sleeps at once and gives its core back);
a number N: GOMP_SPINCOUNT=N (it spins N times, then sleeps). Timed on the
binary itself, as bench/kmbench_cpu_variants.py does; the centroid checksum shows the builds agree.
Everything, spinner included, runs on --cpus only, so a larger machine measures the 2-core case
the issue saw (issue 34: 2 threads 6.47 ms, 1 thread 3.72 ms at 1e6 x 2, k = 5).

    python3 bench/kmbench_cpu_busy_core.py [--cpus 0,1] [--threads 1,2] [--waits default,passive] [--passes 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

SOURCE = Path(__file__).resolve().parents[1] / "impls" / "cpu" / "kmbench_cpu" / "kmbench_cpu.cpp"
FLAGS = ["-O3", "-std=c++17", "-fopenmp", "-march=native", "-mprefer-vector-width=512"]  # kmbench's
BUILDS = {"static": ["-DKMBENCH_CPU_STATIC_SCHEDULE"], "dynamic": []}
SPIN = "while True: pass"


def _inputs(folder: Path, n: int, d: int, k: int) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    centres = rng.uniform(-10, 10, (k, d))
    data = (centres[rng.integers(0, k, n)] + rng.standard_normal((n, d))).astype(np.float32)
    paths = folder / "x.npy", folder / "init.npy"
    np.save(paths[0], data)
    np.save(paths[1], data[np.random.default_rng(1).choice(n, k, replace=False)].astype(np.float64))
    return paths


def _per_iteration_ms(binary: Path, inputs, threads: int, args, env) -> tuple[float, float]:
    data, start = inputs
    out = subprocess.run([str(binary), "--data", str(data), "--init", str(start), "--iters", str(args.iters),
                          "--repeats", str(args.repeats), "--warmup", "1", "--threads", str(threads)],
                         capture_output=True, text=True, check=True, env=env).stdout
    record = json.loads(out)
    return float(np.median(record["times"])) / args.iters * 1e3, float(np.sum(record["centroids"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpus", default="0,1", help="CPUs every process here may run on (0,1 or 0-15)")
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--d", type=int, default=2)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--passes", type=int, default=3, help="alternating passes; the median is shown")
    parser.add_argument("--threads", default="1,2", help="thread counts, comma separated")
    parser.add_argument("--waits", default="default,passive", help="default, passive or a spin count, comma separated")
    args = parser.parse_args()
    counts = [int(count) for count in args.threads.split(",")]
    cpus = {cpu for part in args.cpus.split(",") for cpu in range(int(part.split("-")[0]), int(part.split("-")[-1]) + 1)}
    os.sched_setaffinity(0, cpus)  # children inherit it
    print(f"CPUs {sorted(os.sched_getaffinity(0))}; {args.n} x {args.d}, k = {args.k}; per iteration, "
          f"median of {args.repeats} repeats, median of {args.passes} passes", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        runs = {}
        base = {key: value for key, value in os.environ.items() if key not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
        for name, flags in BUILDS.items():
            binary = folder / name
            subprocess.run(["g++", *FLAGS, *flags, "-o", str(binary), str(SOURCE)], check=True)
            for wait in args.waits.split(","):
                extra = {} if wait == "default" else {"OMP_WAIT_POLICY": "passive"} if wait == "passive" \
                    else {"GOMP_SPINCOUNT": str(int(wait))}
                runs[f"{name}, {wait if not wait.isdigit() else 'spin ' + wait}"] = (binary, {**base, **extra})
        inputs = _inputs(folder, args.n, args.d, args.k)
        times: dict = {}
        for _ in range(args.passes):
            for load in ("idle", "one CPU spinning"):
                spinner = subprocess.Popen([sys.executable, "-c", SPIN]) if load != "idle" else None
                try:
                    for name, (binary, env) in runs.items():
                        for threads in counts:
                            ms, checksum = _per_iteration_ms(binary, inputs, threads, args, env)
                            times.setdefault((load, name, threads), []).append(ms)
                            times.setdefault("checksums", set()).add(round(checksum, 6))
                finally:
                    if spinner is not None:
                        spinner.kill()
                        spinner.wait()
        print(f"{'load':<18} {'schedule, wait':<30}" + "".join(f"{f'{t} threads':>12}" for t in counts))
        for load in ("idle", "one CPU spinning"):
            for name in runs:
                print(f"{load:<18} {name:<30}"
                      + "".join(f"{np.median(times[(load, name, t)]):>9.2f} ms" for t in counts))
        print(f"centroid checksums: {sorted(times['checksums'])}")


if __name__ == "__main__":
    main()
