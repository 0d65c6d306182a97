"""Issue 63's goals for kmbench.KMeans against scikit-learn's KMeans, each fit in a fresh process
from the same start (scikit-learn's k-means++ centres, drawn once in this parent, untimed), on the
same cores: dense float64 and weighted float64 at 1e5 x 16 and 2e5 x 64, k = 100 (goal: <= 1.0x
scikit-learn's time); sparse CSR 200,000 x 1,000 at 0.1%, float64 (goal: <= 1.5x its time and
memory); and n_init=10 from random starts (goal: no file written, no process started).

A child loads the data (untimed), imports the estimator, and times `fit` alone; it reports the
iterations, the inertia, its peak resident memory (getrusage's maxrss: both processes load
the same data) and how much of it the fit added above the peak before it, and every file it
opened for writing and process it started during the fit (an audit hook). The estimators
alternate, --rounds times each; the medians are printed. --threads N runs both on N threads
(OMP_NUM_THREADS and the BLAS libraries' own settings, in both children); unset, each takes
what the machine and the environment give it.

    PYTHONPATH=. .venv/bin/python bench/estimator_goals.py [--rounds 3] [--threads N] [--only dense|weighted|sparse|n_init]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parent.parent
CHILD = r"""
import json, resource, sys, time
import numpy as np, scipy.sparse as sp
which, data, start, weights, n_init = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
X = sp.load_npz(data) if data.endswith(".npz") else np.load(data)
init = np.load(start) if start != "-" else "random"
w = np.load(weights) if weights != "-" else None
if which == "sklearn":
    from sklearn.cluster import KMeans
else:
    from kmbench import KMeans
model = KMeans(n_clusters=int(sys.argv[6]), init=init, n_init=n_init, random_state=0)
seen, watching = [], [False]
def audit(event, args):
    if watching[0] and ((event == "open" and args[1] is not None and any(m in str(args[1]) for m in "wax+"))
                        or event in ("subprocess.Popen", "os.posix_spawn", "os.fork", "os.system")):
        seen.append(event if event != "open" else str(args[0]))
sys.addaudithook(audit)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
watching[0] = True
t0 = time.perf_counter()
model.fit(X, sample_weight=w)
fitted = time.perf_counter() - t0
watching[0] = False
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"fit": fitted, "n_iter": int(model.n_iter_), "inertia": float(model.inertia_),
                  "extra_mb": (peak - before) / 1024, "peak_mb": peak / 1024, "writes": seen,
                  "impl": getattr(model, "impl_", "sklearn")}))
"""


THREADS: dict[str, str] = {}  # --threads: the settings both children get
THREAD_SETTINGS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def child(*args: str) -> dict:
    env = {**os.environ, **THREADS, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True, env=env, check=True,
                          cwd=ROOT)
    return json.loads(done.stdout.strip().splitlines()[-1])


def sparse_random(n: int, d: int, density: float, seed: int = 0) -> sp.csr_matrix:
    """Positions and values drawn directly (scipy.sparse.random draws 2e5 of 2e8 positions in 44 s)."""
    rng = np.random.default_rng(seed)
    count = int(n * d * density)
    rows, columns = rng.integers(0, n, count), rng.integers(0, d, count)
    return sp.csr_matrix((rng.random(count), (rows, columns)), shape=(n, d))


def cases(only: str | None):
    from sklearn.datasets import make_blobs

    for n, d in ((100_000, 16), (200_000, 64)):
        if only in (None, "dense", "weighted"):
            X = make_blobs(n, d, centers=100, random_state=0)[0]
            weights = np.random.default_rng(1).uniform(0.5, 2.0, n)
            if only in (None, "dense"):
                yield f"dense float64 {n:,} x {d}, k = 100", X, None, 100, 1, 1.0
            if only in (None, "weighted"):
                yield f"weighted float64 {n:,} x {d}, k = 100", X, weights, 100, 1, 1.0
    if only in (None, "sparse"):
        yield "sparse CSR float64 200,000 x 1,000 at 0.1%, k = 8", sparse_random(200_000, 1_000, 0.001), None, 8, 1, 1.5
    if only in (None, "n_init"):
        X = make_blobs(100_000, 16, centers=100, random_state=0)[0]
        yield "n_init=10 random starts, float64 100,000 x 16, k = 100", X, None, 100, 10, None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=("dense", "weighted", "sparse", "n_init"))
    parser.add_argument("--threads", type=int, help="threads for both estimators (default: the environment's)")
    args = parser.parse_args()
    from sklearn.cluster import kmeans_plusplus

    if args.threads is not None:
        if args.threads < 1:
            parser.error(f"--threads must be at least 1; got {args.threads}")
        THREADS.update({name: str(args.threads) for name in THREAD_SETTINGS})
    threads = f"{args.threads} threads" if args.threads else "threads as the environment sets them"
    print(f"{os.cpu_count()} CPUs, {threads}, load average {os.getloadavg()[0]:.2f}; medians of {args.rounds} "
          f"fresh processes")
    with tempfile.TemporaryDirectory(prefix="kmbench-goals-") as scratch:
        for title, X, weights, k, n_init, goal in cases(args.only):
            data = str(Path(scratch) / ("X.npz" if sp.issparse(X) else "X.npy"))
            sp.save_npz(data, X) if sp.issparse(X) else np.save(data, X)
            start = "-"
            if n_init == 1:
                start = str(Path(scratch) / "start.npy")
                np.save(start, kmeans_plusplus(X, k, sample_weight=weights, random_state=0)[0])
            weight_path = "-"
            if weights is not None:
                weight_path = str(Path(scratch) / "w.npy")
                np.save(weight_path, weights)
            runs = {"kmbench": [], "sklearn": []}
            child("kmbench", data, start, weight_path, str(n_init), str(k))  # untimed: bytecode written
            for _ in range(args.rounds):
                for which in runs:
                    runs[which].append(child(which, data, start, weight_path, str(n_init), str(k)))
            print(title)
            median = {which: {key: statistics.median(run[key] for run in rows) for key in ("fit", "extra_mb", "peak_mb")}
                      for which, rows in runs.items()}
            for which, rows in runs.items():
                print(f"  {which:8s} fit {median[which]['fit']:7.3f} s  peak {median[which]['peak_mb']:7.1f} MB "
                      f"(+{median[which]['extra_mb']:.1f} in the fit)  "
                      f"n_iter {[run['n_iter'] for run in rows]}  inertia {rows[0]['inertia']:.8e}  "
                      f"{rows[0]['impl']}  writes/processes during fit: {len(rows[0]['writes'])}")
            ratio = median["kmbench"]["fit"] / median["sklearn"]["fit"]
            memory = median["kmbench"]["peak_mb"] / median["sklearn"]["peak_mb"]
            verdict = "" if goal is None else f" (goal: <= {goal}x: {'met' if ratio <= goal else 'NOT met'})"
            print(f"  kmbench over scikit-learn: time {ratio:.2f}x{verdict}, the process's peak memory {memory:.2f}x "
                  f"(load average now {os.getloadavg()[0]:.2f})", flush=True)


if __name__ == "__main__":
    main()
