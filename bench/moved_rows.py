"""Issue 50's item 2, its two ways apart: the tensor path's sorted update (update.cu's counting
sort and segment_sums over every row) against the sums of the last iteration updated from only
the rows whose label changed (moved_sums.cu's moved_sums), on the label sequence of a real run.
The row chooses between them per iteration (update.py's MOVED_MOST); this times each at every
step. Not a test; needs a GPU.

    PYTHONPATH=. python3 bench/moved_rows.py                       # 1e6 x 128, k = 1,024 blobs
    PYTHONPATH=. python3 bench/moved_rows.py --n 1000000 --d 64 --k 1000

Blobs made on the GPU (kmbench.plans.in_memory.generate_blobs, one centre a cluster), centred,
Lloyd from k distinct rows in float32 scores and float64 sums for --iterations steps; for each
step after the first: the share of rows that moved, both updates' times (CUDA events, median of
--repeats, the buffers reset outside the timed region), and the largest gap between the
incremental sums and fresh ones, relative to the largest fresh sum (0 where float64 held every
sum exactly). NOTES.md's prediction at this shape: 240 us for the sort and the sums (H100),
about 40 us for the moved rows.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from kmbench.plans.in_memory import generate_blobs

HERE = Path(__file__).resolve().parent
KERNELS = HERE.parent / "impls" / "gpu" / "kmbench_gpu"


def lloyd_labels(x, k: int, iterations: int, seed: int):
    """The labels of each of `iterations` Lloyd steps from k distinct rows (float32 scores)."""
    import cupy

    n = x.shape[0]
    centroids = x[cupy.asarray(np.random.default_rng(seed).choice(n, k, replace=False))].astype(cupy.float64)
    out = []
    for _ in range(iterations):
        c = centroids.astype(cupy.float32)
        labels = cupy.empty(n, dtype=cupy.int32)
        for first in range(0, n, 1 << 18):
            part = x[first:first + (1 << 18)]
            labels[first:first + part.shape[0]] = (0.5 * (c * c).sum(axis=1) - part @ c.T).argmin(axis=1)
        out.append(labels)
        sums, counts = fresh_sums(x, labels, k)
        filled = counts > 0
        centroids[filled] = sums[filled] / counts[filled, None]
    return out


def fresh_sums(x, labels, k: int):
    import cupy
    import cupyx

    sums = cupy.zeros((k, x.shape[1]), dtype=cupy.float64)
    cupyx.scatter_add(sums, labels, x.astype(cupy.float64))
    return sums, cupy.bincount(labels, minlength=k).astype(cupy.int32)


def timed(launch, reset, repeats: int) -> float:
    """Median microseconds of launch(), reset() before each outside the events."""
    import cupy

    times = []
    for _ in range(repeats):
        reset()
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        launch()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end) * 1e3)
    return float(np.median(times))


def main() -> None:
    import cupy

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--d", type=int, default=128)
    parser.add_argument("--k", type=int, default=1024)
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    n, d, k = args.n, args.d, args.k
    host = np.empty((n, d), np.float32)
    generate_blobs(n, d, k, 0, host)
    x = cupy.asarray(host)
    x -= x.mean(axis=0, dtype=cupy.float64).astype(cupy.float32)
    sequence = lloyd_labels(x, k, args.iterations, 0)

    update = cupy.RawModule(code=(KERNELS / "update.cu").read_text(), options=("-std=c++17",))
    kernel = {name: update.get_function(name) for name in ("histogram", "scan", "block_scatter", "segment_sums")}
    moved_kernel = cupy.RawModule(code=(KERNELS / "moved_sums.cu").read_text(),
                                  options=("-std=c++17",)).get_function("moved_sums")
    sort, from_moved = cupy.zeros(1, dtype=cupy.int32), cupy.ones(1, dtype=cupy.int32)
    sms = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["multiProcessorCount"]
    scatter_blocks = max(1, min((n + 511) // 512, sms * 2))  # update.py's block_scatter grid
    per_block = -(-n // scatter_blocks)
    sum_threads = min(256, max(32, (d + 31) // 32 * 32))
    counts, starts, cursor = (cupy.zeros(k, dtype=cupy.int32) for _ in range(3))
    order = cupy.empty(n, dtype=cupy.int32)
    sums = cupy.zeros((k, d), dtype=cupy.float64)
    listed, flagged, bound_max = cupy.zeros(2, cupy.uint32), cupy.zeros(1, cupy.uint64), cupy.zeros(2, cupy.float32)
    unused_previous, unused_changed = cupy.zeros(1, cupy.int32), cupy.zeros(1, cupy.uint64)
    nn, kk, dd = np.int64(n), np.int32(k), np.int32(d)
    print(f"{cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}: {n:,} x {d}, k = {k:,}")
    print("step | rows moved | sort + sums (us) | moved rows (us) | largest gap / largest sum")
    for step in range(1, len(sequence)):
        old, new = sequence[step - 1], sequence[step]

        def sort_and_sum(labels=new):
            kernel["histogram"]((scatter_blocks,), (512,), (labels, nn, kk, counts, kk, unused_previous,
                                                           unused_changed, np.int32(0), sort), shared_mem=k * 4)
            kernel["scan"]((1,), (1024,), (counts, kk, starts, cursor, listed, flagged, bound_max, sort))
            kernel["block_scatter"]((scatter_blocks,), (512,), (labels, nn, kk, np.int64(per_block), cursor, order,
                                                                sort), shared_mem=k * 4)
            kernel["segment_sums"](((n + 255) // 256,), (sum_threads,), (x, dd, order, labels, nn, sums, sort))

        def clear():
            counts.fill(0)
            sums.fill(0)

        before = timed(sort_and_sum, clear, args.repeats)
        fresh, fresh_counts = fresh_sums(x, new, k)
        old_sums, old_counts = fresh_sums(x, old, k)
        previous, running, running_counts = cupy.empty_like(old), cupy.empty_like(old_sums), cupy.empty_like(old_counts)
        moved = int((old != new).sum())

        def reset():
            previous[...] = old
            running[...] = old_sums
            running_counts[...] = old_counts

        after = timed(lambda: moved_kernel((sms * 8,), (256,), (x, dd, new, previous, nn, running, running_counts,
                                                                  from_moved)), reset, args.repeats)
        assert bool((running_counts == fresh_counts).all()), "counts differ"
        assert bool((previous == new).all()), "previous labels not updated"
        gap = float(cupy.abs(running - fresh).max()) / max(float(cupy.abs(fresh).max()), 1e-300)
        print(f"{step + 1:4d} | {moved / n:9.3%} | {before:16.1f} | {after:15.1f} | {gap:.2e}", flush=True)


if __name__ == "__main__":
    main()
