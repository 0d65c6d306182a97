"""kmbench-gpu's low-d strategies side by side, each forced on the same data: time per
iteration (CUDA events, best and median of repeated runs after a warm-up) and how far each
one's centroids end from the first's. It is how `columns` (resident.cu's accumulation, one pass
a launch, for shards and streamed chunks) was measured against `resident` and `small-k`.

    python3 bench/lowd_passes.py                       # 1e8 x 2 at k = 3 and 13
    python3 bench/lowd_passes.py --shape 1000000000,2,3 --strategies resident,columns
    python3 bench/lowd_passes.py --strategies resident,columns,columns@4   # columns at 4 blocks an SM

Needs a GPU with CuPy; the data are standard normal points made on the host.
"""

from __future__ import annotations

import argparse
import contextlib

import numpy as np

from impls.gpu.kmbench_gpu import KmbenchGpu
from impls.gpu.kmbench_gpu.strategies import small_k
from kmbench.data.datasets import Dataset
from kmbench.protocol import runner


def per_iteration(strategy: str, data: np.ndarray, k: int, iterations: int, repeats: int):
    """(best, median) seconds per iteration, the final centroids and the grid (blocks) of
    `strategy`, where "columns@B" is columns launched at B blocks an SM rather than at the GPU's
    occupancy."""
    problem = runner.make_problem(Dataset("lowd-passes", data, None, {}), runner.Settings(k=k, iterations=iterations))
    strategy, _, per_sm = strategy.partition("@")
    impl = KmbenchGpu(force_strategy=strategy)
    with _columns_blocks_per_sm(int(per_sm)) if per_sm else contextlib.nullcontext():
        impl.prepare(problem)
    grid = impl.build_info().get("blocks")
    impl.run(problem)  # warm-up
    times, centroids = [], None
    for _ in range(repeats):
        result = impl.run(problem)
        times.append(result.phases["iterate"] / iterations)
        centroids = result.centroids
    impl.release()
    return min(times), float(np.median(times)), centroids, grid


@contextlib.contextmanager
def _columns_blocks_per_sm(count: int):
    """While it lasts, columns compiles as though one SM held `count` of its blocks."""
    original = small_k.blocks_per_sm
    small_k.blocks_per_sm = lambda kernel: count
    try:
        yield
    finally:
        small_k.blocks_per_sm = original


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", action="append", help="n,d,k (repeatable; default 1e8,2,3 and 1e8,2,13)")
    parser.add_argument("--strategies", default="resident,columns,small-k")
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    shapes = [tuple(int(float(v)) for v in s.split(",")) for s in args.shape or ["1e8,2,3", "1e8,2,13"]]
    for n, d, k in shapes:
        data = np.random.default_rng(0).standard_normal((n, d)).astype(np.float32)
        first = None
        for strategy in args.strategies.split(","):
            best, median, centroids, grid = per_iteration(strategy, data, k, args.iterations, args.repeats)
            first = centroids if first is None else first
            print(f"{n:>13,} x {d} k={k:<4} {strategy:10s} best {best * 1e3:8.4f} ms  median {median * 1e3:8.4f} ms"
                  f"  {grid} blocks  centroids within {np.abs(centroids - first).max():.2g} of the first", flush=True)


if __name__ == "__main__":
    main()
