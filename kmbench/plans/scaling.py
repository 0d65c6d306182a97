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
from pathlib import Path

import numpy as np

from impls.dask_impl import GPUS_ENV
from kmbench.data import files
from kmbench.data.datasets import Dataset, fill_radial, radial_centers, radial_name
from kmbench.errors import UsageError
from kmbench.plans.in_memory import InMemoryLloydTask, Lines, fits_host, generate_blobs
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
    centers = max(workload.ks)
    generate_blobs(n, workload.d, centers, seed, out)
    parameters = {"n": n, "d": workload.d, "centers": centers, "std": 1.0, "seed": seed}
    return (f"blobs-gpu-n{n}-d{workload.d}-c{centers}-s{seed}-float32",
            {"generator": "blobs (generated on the GPU, in memory)", "checksum": None, "parameters": parameters})


def _arguments(argv):
    parser = argparse.ArgumentParser(prog="python3 -m kmbench.plans.scaling", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default=",".join(WORKLOADS), help=f"comma-separated, of {', '.join(WORKLOADS)}")
    parser.add_argument("--gpus", default="0", help="GPU sets, space-separated, each comma-separated: \"0 0,1\"")
    parser.add_argument("--k", default=None, help="only these k, comma-separated (default: each workload's)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every n (a smoke run: 0.01)")
    parser.add_argument("--impl", default="kmbench-gpu-dask,dask-cuda", help="the rows run on each GPU set")
    parser.add_argument("--alone", default="kmbench-gpu", help="the rows run once, on one GPU, without Dask")
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--store", required=True, help="records.jsonl to append to")
    parser.add_argument("--out", help="the strong-scaling table of the whole store, as markdown")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = _arguments(argv)
    try:
        return _run(args)
    except UsageError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2


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
        if not ks:
            continue
        n = rows_of(workload, args.scale)
        fits, why = fits_host(n * workload.d * 4)
        if not fits:
            raise UsageError(f"{n:,} x {workload.d} does not fit: {why}.")
        data = np.empty((n, workload.d), dtype=np.float32)
        pinned = _pin(data)  # before the pages are first written: they are made once, locked
        try:
            lines.note(f"making {n:,} x {workload.d} ({n * workload.d * 4 / 1e9:.1f} GB)")
            name, meta = fill(workload, n, args.seed, data)
            dataset = Dataset(name, data, None, meta)
            for k in ks:
                settings = Settings(k=k, iterations=args.iters, warmup=args.warmup, repeats=args.repeats,
                                    seed=args.seed)
                check_settings(settings)
                task = InMemoryLloydTask(settings)  # one oracle for every cell of this k
                records += run_cells(task, [dataset], alone, store=args.store, reporter=lines)
                for chosen in sets:
                    os.environ[GPUS_ENV] = chosen
                    lines.note(f"GPU set {chosen}")
                    records += run_cells(task, [dataset], spread, store=args.store, reporter=lines)
        finally:
            if pinned is not None:
                pinned.release()
            del data
    table = markdown(results.load(args.store))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        files.write_text_atomically(Path(args.out), table)
    sys.stdout.write(table)
    return 0 if all(r.get("status") in ("ok", "error", "skipped") for r in records) else 1


def _pin(data: np.ndarray):
    """Page-lock the data where a GPU is present (the oracle's blocks and the uploads then copy
    at full speed); None where none is."""
    from impls.cuda import cuda_status

    if not cuda_status()[0]:
        return None
    from impls.fast.stream import PinnedHost

    return PinnedHost(data)


if __name__ == "__main__":
    sys.exit(main())
