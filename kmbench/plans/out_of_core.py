"""The out-of-core benchmark: Lloyd on data larger than the GPU's memory, each iteration set
against the floor that no streamed iteration can beat, one host-to-device copy of the data.

    kmbench out-of-core --share 1.2,0.3 --d 128 --k 1024 \\
        --store results/<machine>/out-of-core/records.jsonl --out results/<machine>/out-of-core/table.md

For each share, n is chosen so that the float32 points take that share of the GPU's total
memory. Such data cannot be cached on disk (the GPU machines have less disk than the data),
so they are generated in memory, on the GPU, chunk by chunk, into page-locked host memory:
Gaussian blobs, `centers` of them in [-10, 10]^d, unit spread, from `seed`. The host memory
stays pinned for the whole benchmark: the float64 oracle streams the data too (reference.py's
blocks), and pageable memory would take it 6x longer. The streamed row's record carries its copy
floor (measured in its prepare, through the same chunks) and `floor_multiple`; every cell is
validated against the oracle as in any run, and a row that cannot hold the data ends as an
error that says so.
"""

from __future__ import annotations

from kmbench import registry
from kmbench.data.datasets import Dataset
from kmbench.errors import UsageError
from kmbench.plans.in_memory import Counts, InMemoryLloydTask, gpu_blobs, host_points
from kmbench.protocol.device import cuda_status
from kmbench.protocol.task import run_cells


def points_for(share: float, d: int, gpu_bytes: int) -> int:
    """Rows of d float32 that take `share` of `gpu_bytes`."""
    return int(share * gpu_bytes // (4 * d))


class OutOfCoreTask(InMemoryLloydTask):
    """Each streamed row's time per iteration as a multiple of its copy floor, too."""

    def measure(self, impl, problem, oracle, dataset, progress=None) -> dict:
        record = super().measure(impl, problem, oracle, dataset, progress)
        floor = (record.get("build") or {}).get("copy_floor_s")
        record["gpu_memory_share"] = dataset.meta["parameters"]["share"]
        if floor:
            record["copy_floor_s"] = floor
            if record.get("per_iteration_s"):
                record["floor_multiple"] = record["per_iteration_s"] / floor
        return record


def gpu_memory_bytes() -> int:
    """The GPU's total memory, which the shares are of."""
    import cupy

    return cupy.cuda.runtime.memGetInfo()[1]


def shares(text: str) -> list[float]:
    """--share: data sizes as positive shares of the GPU's memory, comma-separated (1.2,0.3)."""
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        values = []
    if not values or not all(value > 0 for value in values):
        raise UsageError(f"--share takes positive numbers, comma-separated (e.g. 1.2,0.3); got {text!r}.")
    return values


def cell_count(chosen: list[float], impl: str) -> int:
    """The cells of a run: every row of `impl` on every share."""
    return len(chosen) * len(registry.select(impl))


def run(chosen: list[float], d: int, k: int, centers: int | None, impl: str, counts: Counts, store,
        reporter=None) -> list[dict]:
    """Every share in turn: its data made in pinned host memory, every row of `impl` on them,
    each record appended to `store` as it exists and `reporter` (kmbench.progress) told of each
    cell. Returns this run's records. The options are checked before the GPU is asked for: a
    machine without one hears why in one sentence."""
    settings = counts.settings(k)
    impls = registry.select(impl)
    ready, why = cuda_status()
    if not ready:
        raise UsageError(f"kmbench out-of-core makes its data on a GPU: {why}.")
    gpu_bytes = gpu_memory_bytes()
    records = []
    for share in chosen:
        n = points_for(share, d, gpu_bytes)
        records += _one_share(share, n, d, centers or k, settings, impls, store, reporter)
    return records


def _one_share(share: float, n: int, d: int, centers: int, settings, impls, store, reporter) -> list[dict]:
    """Its own function, so the data are gone before the next share's are made."""
    with host_points(n, d, f"{share}x the GPU's memory") as data:
        if reporter:
            reporter.say(f"generating {n:,} x {d} ({n * d * 4 / 1e9:.1f} GB, {share}x GPU memory)")
        name, meta = gpu_blobs(n, d, centers, settings.seed, data, share=share)
        return run_cells(OutOfCoreTask(settings), [Dataset(name, data, None, meta)], impls,
                         store=store, reporter=reporter)
