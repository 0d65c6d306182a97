"""Strong scaling of the multi-GPU rows at the sizes where users outgrow one GPU (issue 21):

    radial-1e9     the radial tree, 1e9 x 2 (8 GB), k = 3 and 1000
    blobs-1e8x128  Gaussian blobs, 1e8 x 128 (51 GB), k = 1024

    python3 -m kmbench.plans.scaling --gpus "0 0,1" \\
        --store results/<machine>/scaling/records.jsonl --out results/<machine>/scaling/scaling.md

Every dataset is made once, in memory (the radial tree on the CPU by the same generator and
seed as `kmbench gen-data radial`, the blobs on the GPU: 51 GB does not fit the GPU machines'
disks), and pinned. Per k, the oracle is computed once and judges every cell: first the
one-GPU rows alone (`--alone`, kmbench-gpu: the time a GPU set must beat), then the multi-GPU
rows (`--impl`) on each GPU set in turn, each set a new cluster ($KMBENCH_DASK_GPUS). A row
that cannot hold its share ends as an error that says so, and the run goes on. `--scale`
shrinks every n (0.01: a smoke run of the same code).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

import numpy as np

from kmbench.data.datasets import Dataset, fill_radial, radial_centers, radial_name
from kmbench.errors import UsageError
from kmbench.plans.in_memory import (InMemoryLloydTask, Lines, add_protocol_arguments, finish, gpu_blobs,
                                     host_points, run_main)
from kmbench.protocol.device import GPUS_ENV
from kmbench.protocol.runner import Settings, check_settings
from kmbench.protocol.task import run_cells

RADIAL = {"branches1": 10, "dist1": 20.0, "branches2": 5, "dist2": 2.0, "scale": 0.1}  # document 002's tree


@dataclass(frozen=True)
class Workload:
    kind: str  # "radial" or "blobs"
    n: int
    d: int
    ks: tuple[int, ...]


WORKLOADS = {
    "radial-1e9": Workload("radial", 10**9, 2, (3, 1000)),
    "blobs-1e8x128": Workload("blobs", 10**8, 128, (1024,)),
}


def gpu_sets(text: str) -> list[str]:
    """"0 0,1" -> ["0", "0,1"]: the GPU sets, each a comma-separated list of GPU numbers."""
    sets = text.split()
    if not sets:
        raise UsageError("--gpus needs at least one GPU set, such as \"0 0,1\".")
    for chosen in sets:
        numbers = chosen.split(",")
        if not all(number.isdigit() for number in numbers) or len(set(numbers)) != len(numbers):
            raise UsageError(f"--gpus: {chosen!r} is not a list of distinct GPU numbers such as 0,1.")
    return sets


def rows_of(workload: Workload, scale: float) -> int:
    """The workload's n at `scale` (the radial tree: a whole number of points per cluster)."""
    if not 0 < scale <= 1:
        raise UsageError(f"--scale must be in (0, 1]; got {scale}.")
    if workload.kind == "radial":
        clusters = RADIAL["branches1"] * RADIAL["branches2"]
        return clusters * max(1, round(workload.n * scale / clusters))
    return max(1, round(workload.n * scale))


def fill(workload: Workload, n: int, seed: int, out: np.ndarray) -> tuple[str, dict]:
    """Make the workload's n points in `out`: (the dataset's name, its meta)."""
    if workload.kind == "radial":
        size = n // (RADIAL["branches1"] * RADIAL["branches2"])
        centres = radial_centers(RADIAL["branches1"], RADIAL["dist1"], RADIAL["branches2"], RADIAL["dist2"])
        fill_radial(out, centres, size, RADIAL["scale"], seed)
        parameters = {**RADIAL, "cluster_size": size, "seed": seed}
        name = radial_name(RADIAL["branches1"], RADIAL["dist1"], RADIAL["branches2"], RADIAL["dist2"], size,
                           RADIAL["scale"], seed, "float32")
        return name, {"generator": "radial (in memory)", "checksum": None, "parameters": {**parameters, "n": n, "d": 2}}
    return gpu_blobs(n, workload.d, max(workload.ks), seed, out)


def _arguments(argv):
    parser = argparse.ArgumentParser(prog="python3 -m kmbench.plans.scaling", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default=",".join(WORKLOADS), help=f"comma-separated, of {', '.join(WORKLOADS)}")
    parser.add_argument("--gpus", default="0", help="GPU sets, space-separated, each comma-separated: \"0 0,1\"")
    parser.add_argument("--k", default=None, help="only these k, comma-separated (default: each workload's)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every n (a smoke run: 0.01)")
    parser.add_argument("--impl", default="kmbench-gpu-dask,dask-cuda", help="the rows run on each GPU set")
    parser.add_argument("--alone", default="kmbench-gpu", help="the rows run once, on one GPU, without Dask")
    add_protocol_arguments(parser, out_help="the strong-scaling table of the whole store, as markdown")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    return run_main(_run, _arguments(argv))


def _one_workload(args, workload: Workload, ks: list[int], sets, alone, spread, lines) -> list[dict]:
    """Its own function, so the data are gone before the next workload's are made."""
    n = rows_of(workload, args.scale)
    records = []
    with host_points(n, workload.d, f"{n:,} x {workload.d}") as data:
        lines.note(f"making {n:,} x {workload.d} ({n * workload.d * 4 / 1e9:.1f} GB)")
        name, meta = fill(workload, n, args.seed, data)
        dataset = Dataset(name, data, None, meta)
        for k in ks:
            settings = Settings(k=k, iterations=args.iters, warmup=args.warmup, repeats=args.repeats, seed=args.seed)
            check_settings(settings)
            task = InMemoryLloydTask(settings)  # one oracle for every cell of this k
            records += run_cells(task, [dataset], alone, store=args.store, reporter=lines)
            for chosen in sets:
                os.environ[GPUS_ENV] = chosen
                lines.note(f"GPU set {chosen}")
                records += run_cells(task, [dataset], spread, store=args.store, reporter=lines)
    return records


def _plan(args) -> tuple[list[Workload], list[str], list, list, set[int] | None]:
    """Everything the arguments name, checked before any data are made."""
    from kmbench.registry import select

    unknown = [name for name in args.workload.split(",") if name not in WORKLOADS]
    if unknown:
        raise UsageError(f"unknown workload {', '.join(unknown)}; known: {', '.join(WORKLOADS)}.")
    try:
        only = {int(k) for k in args.k.split(",")} if args.k else None
    except ValueError:
        raise UsageError(f"--k takes whole numbers, comma-separated; got {args.k!r}.") from None
    return ([WORKLOADS[name] for name in args.workload.split(",")], gpu_sets(args.gpus),
            select(args.alone) if args.alone else [], select(args.impl) if args.impl else [], only)


def _run(args) -> int:
    from kmbench.data import results
    from kmbench.report.scaling import markdown

    workloads, sets, alone, spread, only = _plan(args)
    lines = Lines()
    records = []
    for workload in workloads:
        ks = [k for k in workload.ks if only is None or k in only]
        if ks:
            records += _one_workload(args, workload, ks, sets, alone, spread, lines)
    return finish(markdown(results.load(args.store)), args.out, records)


if __name__ == "__main__":
    sys.exit(main())
