"""The first fit in a fresh process: kmbench.KMeans against scikit-learn's KMeans (issue 51's goal:
no slower than 1.2x; issue 63's: no compile in it), and what choosing the implementation costs
before and after it.

Each measurement is a new Python process that loads the data (untimed), imports the estimator
(timed apart), and times its first `fit` with defaults (k-means++, n_init="auto", tol=1e-4);
kmbench's then times a second fit and `choice.choose` again. Every kmbench process has a HOME of
its own, new and empty, as a user's first fit after `make venv` has: nothing in
~/.cache/kmbench, so a fit that compiles kmbench-cpu's program pays for it, and the line says
whether one did (the fresh HOME's cache after the fit). One untimed round first writes Python's
bytecode, as an installed package has it; the two estimators then alternate, and the medians
are printed with each fit's iteration count. --same-start hands both estimators the same
k-means++ centres (scikit-learn's, drawn in the parent, untimed), so both run the same
iterations; without it each seeds itself (the counts may differ: each round has its own
random_state, the same for both). Other fresh processes time the first choice alone.

    .venv/bin/python bench/estimator_first_fit.py [--n 100000] [--d 2] [--k 5] [--rounds 7] [--same-start]
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

CHILD = r"""
import json, sys, time
import numpy as np
which, path, k, seed, start = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
X = np.load(path)
init = np.load(start) if start != "-" else "k-means++"
t0 = time.perf_counter()
if which == "sklearn":
    from sklearn.cluster import KMeans
else:
    from kmbench import KMeans
    from kmbench.estimator import choice
t1 = time.perf_counter()
model = KMeans(n_clusters=k, random_state=seed, init=init).fit(X)
t2 = time.perf_counter()
out = {"import": t1 - t0, "fit": t2 - t1, "n_iter": int(model.n_iter_), "impl": getattr(model, "impl_", "sklearn")}
if which == "kmbench":
    t3 = time.perf_counter()
    KMeans(n_clusters=k, random_state=seed, init=init).fit(X)
    t4 = time.perf_counter()
    choice.choose("auto", X.dtype)
    out.update(second_fit=t4 - t3, choose_after=time.perf_counter() - t4)
print(json.dumps(out))
"""

FIRST_CHOICE = r"""
import json, sys, time
import numpy as np
from kmbench.estimator import choice
t0 = time.perf_counter()
choice.choose("auto", np.dtype(sys.argv[1]))
print(json.dumps({"choose_first": time.perf_counter() - t0}))
"""


def child(code: str, *args: str) -> dict:
    """A fresh process with a new, empty HOME; whether it left a compiled program in its cache."""
    # Bytecode written and read as in an installed package (a sandbox may switch it off).
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory(prefix="kmbench-first-fit-home-") as home:
        environment["HOME"] = home
        environment.pop("XDG_CACHE_HOME", None)
        done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=environment,
                              check=True)
        out = json.loads(done.stdout.strip().splitlines()[-1])
        out["compiled"] = any(Path(home).glob(".cache/kmbench/**/*"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--d", type=int, default=2)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--same-start", action="store_true", help="both from scikit-learn's k-means++ centres")
    args = parser.parse_args()
    from sklearn.datasets import make_blobs

    X = make_blobs(n_samples=args.n, n_features=args.d, centers=args.k, random_state=0)[0].astype(np.float32)
    with tempfile.TemporaryDirectory(prefix="kmbench-first-fit-") as scratch:
        path = str(Path(scratch) / "X.npy")
        np.save(path, X)
        starts = ["-"] * args.rounds
        if args.same_start:
            from sklearn.cluster import kmeans_plusplus

            for seed in range(args.rounds):
                starts[seed] = str(Path(scratch) / f"start-{seed}.npy")
                np.save(starts[seed], kmeans_plusplus(X, args.k, random_state=seed)[0])
        for which in ("kmbench", "sklearn"):  # untimed: the bytecode written
            child(CHILD, which, path, str(args.k), "0", starts[0])
        runs: dict[str, list[dict]] = {"kmbench": [], "sklearn": []}
        for seed in range(args.rounds):  # random_state = the round: no one seeding's luck decides
            for which in runs:
                runs[which].append(child(CHILD, which, path, str(args.k), str(seed), starts[seed]))
        first_choice = [child(FIRST_CHOICE, "float32")["choose_first"] for _ in range(args.rounds)]

    def median(which, key):
        return statistics.median(run[key] for run in runs[which])

    def least(which, key):  # the least disturbed by other work on the machine
        return min(run[key] for run in runs[which])

    print(f"{args.n:,} x {args.d} float32, k = {args.k}, {args.rounds} fresh processes each, "
          f"{'the same k-means++ start' if args.same_start else 'each seeding its own'}, "
          f"{os.cpu_count()} CPUs (load average {os.getloadavg()[0]:.2f})")
    for which in runs:
        iterations = [run["n_iter"] for run in runs[which]]
        print(f"  {which:8s} first fit {median(which, 'fit') * 1e3:6.1f} ms median, {least(which, 'fit') * 1e3:6.1f} "
              f"least (import {median(which, 'import') * 1e3:.0f} ms apart), {runs[which][0]['impl']}, "
              f"n_iter by round {iterations}, compiled in {sum(run['compiled'] for run in runs[which])} of "
              f"{len(runs[which])} rounds")
    print(f"  first fit, kmbench over scikit-learn: {median('kmbench', 'fit') / median('sklearn', 'fit'):.2f}x "
          f"(medians), {least('kmbench', 'fit') / least('sklearn', 'fit'):.2f}x (least); goal: at most 1.2x")
    print(f"  kmbench second fit {median('kmbench', 'second_fit') * 1e3:.1f} ms; choosing the implementation: "
          f"{statistics.median(first_choice) * 1e3:.1f} ms in a fresh process, "
          f"{median('kmbench', 'choose_after') * 1e3:.3f} ms after the first fit (goal: under 20 ms)")


if __name__ == "__main__":
    main()
