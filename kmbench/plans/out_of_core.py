"""The out-of-core benchmark: Lloyd on data larger than the GPU's memory, each iteration set
against the floor that no streamed iteration can beat, one host-to-device copy of the data.

    python3 -m kmbench.plans.out_of_core --share 1.2,0.3 --d 128 --k 1024 \\
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

import argparse
import sys

from kmbench.data.datasets import Dataset
from kmbench.plans.in_memory import (InMemoryLloydTask, Lines, add_protocol_arguments, finish, gpu_blobs,
                                     host_points, run_main)
from kmbench.protocol.runner import Settings, check_settings
from kmbench.protocol.task import run_cells


def points_for(share: float, d: int, gpu_bytes: int) -> int:
    """Rows of d float32 that take `share` of `gpu_bytes`."""
    return int(share * gpu_bytes // (4 * d))


class OutOfCoreTask(InMemoryLloydTask):
    """Each streamed row's time per iteration as a multiple of its copy floor, too."""

    def measure(self, impl, problem, oracle, dataset, run_id: str) -> dict:
        record = super().measure(impl, problem, oracle, dataset, run_id)
        floor = (record.get("build") or {}).get("copy_floor_s")
        record["gpu_memory_share"] = dataset.meta["parameters"]["share"]
        if floor:
            record["copy_floor_s"] = floor
            if record.get("per_iteration_s"):
                record["floor_multiple"] = record["per_iteration_s"] / floor
        return record


def markdown(records: list[dict]) -> str:
    env = next((r.get("env") for r in records if r.get("env")), {}) or {}
    gpu = env.get("gpu") or {}
    lines = [f"# Lloyd on data larger than the GPU ({gpu.get('name', '?')})", "",
             "Time per iteration: mean of the counted repeats (CUDA events), over the iterations run. "
             "Copy floor: one pass of the host-to-device copies alone, same chunks, measured by the "
             "streamed row in its prepare.", "",
             "| implementation | n | d | k | data | share of GPU memory | copy floor | time per iteration "
             "| x floor | status |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for record in records:
        data = record["dataset"]
        size = data["n"] * data["d"] * 4
        per, floor = record.get("per_iteration_s"), record.get("copy_floor_s")
        status = record.get("status")
        lines.append(f"| {record['impl']} | {data['n']:,} | {data['d']} | {record['params']['k']} | "
                     f"{size / 1e9:.1f} GB | {record.get('gpu_memory_share', 0):.2f} | "
                     f"{f'{floor * 1e3:.0f} ms' if floor else '-'} | "
                     f"{f'{per * 1e3:.0f} ms' if per and status == 'ok' else '-'} | "
                     f"{f'{per / floor:.2f}x' if per and floor and status == 'ok' else '-'} | {status}"
                     f"{': ' + record.get('detail', '') if status != 'ok' else ''} |")
    return "\n".join(lines) + "\n"


def _arguments(argv):
    parser = argparse.ArgumentParser(prog="python3 -m kmbench.plans.out_of_core", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--share", default="1.2", help="data size as shares of the GPU's memory, comma-separated")
    parser.add_argument("--d", type=int, default=128)
    parser.add_argument("--k", type=int, default=1024)
    parser.add_argument("--centers", type=int, default=None, help="blobs (default: k)")
    parser.add_argument("--impl", default="kmbench-gpu-stream,kmbench-gpu", help="rows, comma-separated")
    add_protocol_arguments(parser, out_help="markdown table of this run's records")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    return run_main(_run, _arguments(argv))


def _run(args) -> int:
    import cupy

    from kmbench.registry import select

    settings = Settings(k=args.k, iterations=args.iters, warmup=args.warmup, repeats=args.repeats, seed=args.seed)
    check_settings(settings)
    impls = select(args.impl)
    _, gpu_bytes = cupy.cuda.runtime.memGetInfo()
    records = []
    for share in (float(value) for value in args.share.split(",")):
        records += _one_share(args, settings, impls, share, points_for(share, args.d, gpu_bytes))
    return finish(markdown(records), args.out, records)


def _one_share(args, settings, impls, share: float, n: int) -> list[dict]:
    """Its own function, so the data are gone before the next share's are made."""
    with host_points(n, args.d, f"{share}x the GPU's memory") as data:
        lines = Lines()
        lines.note(f"generating {n:,} x {args.d} ({n * args.d * 4 / 1e9:.1f} GB, {share}x GPU memory)")
        name, meta = gpu_blobs(n, args.d, args.centers or args.k, args.seed, data, share=share)
        return run_cells(OutOfCoreTask(settings), [Dataset(name, data, None, meta)], impls,
                         store=args.store, reporter=lines)


if __name__ == "__main__":
    sys.exit(main())
