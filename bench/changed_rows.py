"""How many rows an update must read if it adds only the points that changed cluster (the
sums of the last iteration, plus the rows that came in, minus the rows that went out), and
whether those sums stay the fresh ones. Issue 50's item 2 asks for the tensor path's update
without its second read of every row; this is the arithmetic behind the design in
impls/gpu/kmbench_gpu/NOTES.md ("The update from the rows that changed"). Not a test.

    PYTHONPATH=. .venv/bin/python bench/changed_rows.py                 # blobs 2e5 x 16, k = 200
    PYTHONPATH=. .venv/bin/python bench/changed_rows.py --n 100000 --d 128 --k 1024 --iterations 10

Lloyd in float64 from k distinct data points (as the benchmark's random start), on centred
float32 blobs; per iteration it prints the share of points whose label changed, and at the end
the largest gap between the incremental float64 sums and sums made afresh, in units of
(largest |x|) x (cluster count): 0 where float64 holds every sum exactly.
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.datasets import make_blobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--d", type=int, default=16)
    parser.add_argument("--k", type=int, default=200)
    parser.add_argument("--centers", type=int, default=50)
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--offset", type=float, default=100.0, help="where the blobs sit before centring")
    args = parser.parse_args()
    x, _ = make_blobs(args.n, args.d, centers=args.centers, random_state=0)
    x = (x + args.offset).astype(np.float32)
    x = (x - x.mean(axis=0, dtype=np.float64).astype(np.float32)).astype(np.float64)
    centroids = x[np.random.default_rng(0).choice(args.n, args.k, replace=False)]

    def assign(c):
        return (0.5 * (c * c).sum(axis=1) - x @ c.T).argmin(axis=1)

    labels = assign(centroids)
    sums = np.zeros((args.k, args.d))
    np.add.at(sums, labels, x)
    counts = np.bincount(labels, minlength=args.k).astype(np.float64)
    worst, shares = 0.0, []
    for _ in range(args.iterations):
        centroids = np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None], centroids)
        new = assign(centroids)
        moved = np.flatnonzero(new != labels)
        shares.append(moved.size / args.n)
        np.add.at(sums, new[moved], x[moved])
        np.subtract.at(sums, labels[moved], x[moved])
        counts += np.bincount(new[moved], minlength=args.k) - np.bincount(labels[moved], minlength=args.k)
        labels = new
        fresh = np.zeros_like(sums)
        np.add.at(fresh, labels, x)
        scale = np.abs(x).max() * np.maximum(counts, 1)[:, None]
        worst = max(worst, float((np.abs(sums - fresh) / scale).max()))
    print("share of points that changed cluster, iteration by iteration:")
    print(" ".join(f"{share:.4f}" for share in shares))
    print(f"mean over the first 10: {np.mean(shares[:10]):.4f}; over all {len(shares)}: {np.mean(shares):.4f}")
    print(f"largest |incremental - fresh| / (max |x| x count): {worst:.3g}")


if __name__ == "__main__":
    main()
