"""Strong scaling of the multi-GPU rows at the sizes where users outgrow one GPU (issue 21):

    radial-1e9     the radial tree, 1e9 x 2 (8 GB), k = 3 and 1000
    blobs-1e8x128  Gaussian blobs, 1e8 x 128 (51 GB), k = 1024

    kmbench scale --gpus "0 0,1" \\
        --store results/<machine>/scaling/records.jsonl --out results/<machine>/scaling/scaling.md

Every dataset is made once, in memory (the radial tree on the CPU by the same generator and
seed as `kmbench gen-data radial`, the blobs on the GPU: 51 GB does not fit the GPU machines'
disks), and pinned: it stays in host memory, and only the rows copy it to a GPU. Per k, the
oracle is computed once and judges every cell: first the one-GPU rows alone (`--alone`,
kmbench-gpu: the time a GPU set must beat), then the multi-GPU rows (`--impl`) on each GPU set
in turn, each set a new cluster (the rows' Options.gpus). Before each set the plan's own process
gives its GPUs back (memory.give_back_gpus: the alone rows' and the judge's device memory
freed, the pools emptied), since that set's workers are other processes on the same GPUs. A
row that cannot hold its share ends as an error that says so, and the run goes on.

A cell this code already measured to the end on this machine is not run again (plan.finished),
and a workload none of whose cells is left is not even made: a long run is split by workload
(`make scale-dask-cuda`) and picks up where it stopped. `--scale` shrinks every n (0.01: a smoke
run of the same code).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from kmbench import registry
from kmbench.data import cells
from kmbench.data.datasets import Dataset, fill_radial, radial_centers, radial_name
from kmbench.errors import UsageError
from kmbench.plans.in_memory import Counts, InMemoryLloydTask, gpu_blobs, gpu_blobs_name, host_points
from kmbench.plans.plan import finished
from kmbench.protocol import Options, reference
from kmbench.protocol.memory import give_back_gpus
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


def dataset_name(workload: Workload, n: int, seed: int) -> str:
    """The name `fill` gives the workload's data, before they are made."""
    if workload.kind == "radial":
        return radial_name(RADIAL["branches1"], RADIAL["dist1"], RADIAL["branches2"], RADIAL["dist2"],
                           n // (RADIAL["branches1"] * RADIAL["branches2"]), RADIAL["scale"], seed, "float32")
    return gpu_blobs_name(n, workload.d, max(workload.ks), seed)


def fill(workload: Workload, n: int, seed: int, out: np.ndarray) -> tuple[str, dict]:
    """Make the workload's n points in `out`: (the dataset's name, its meta)."""
    if workload.kind == "radial":
        size = n // (RADIAL["branches1"] * RADIAL["branches2"])
        centres = radial_centers(RADIAL["branches1"], RADIAL["dist1"], RADIAL["branches2"], RADIAL["dist2"])
        fill_radial(out, centres, size, RADIAL["scale"], seed)
        parameters = {**RADIAL, "cluster_size": size, "seed": seed}
        return dataset_name(workload, n, seed), {"generator": "radial (in memory)", "checksum": None,
                                                 "parameters": {**parameters, "n": n, "d": 2}}
    return gpu_blobs(n, workload.d, max(workload.ks), seed, out)


@dataclass(frozen=True)
class Plan:
    """Everything `kmbench scale` names, checked before any data are made."""

    workloads: list[Workload]
    sets: list[str]  # GPU sets, each a new cluster of the multi-GPU rows
    alone: list  # rows run once, on one GPU, without Dask
    spread: list  # rows run on each GPU set
    only: set[int] | None  # only these k; None: each workload's
    scale: float  # every n multiplied by this
    counts: Counts


def check(workload: str, gpus: str, k: str | None, alone: str, impl: str, scale: float = 1.0,
          counts: Counts = Counts()) -> Plan:
    """The plan the options name; an unknown name, a bad list or count is one sentence
    (UsageError), before any data are made."""
    unknown = [name for name in workload.split(",") if name not in WORKLOADS]
    if unknown:
        raise UsageError(f"unknown workload {', '.join(unknown)}; known: {', '.join(WORKLOADS)}.")
    try:
        only = {int(one) for one in k.split(",")} if k else None
    except ValueError:
        raise UsageError(f"--k takes whole numbers, comma-separated; got {k!r}.") from None
    workloads = [WORKLOADS[name] for name in workload.split(",")]
    for chosen in workloads:
        rows_of(chosen, scale)
    counts.settings(1)  # the counts; each k's settings are made again once its data are
    return Plan(workloads, gpu_sets(gpus), registry.select(alone) if alone else [],
                registry.select(impl) if impl else [], only, scale, counts)


def _ks(plan: Plan, workload: Workload) -> list[int]:
    return [k for k in workload.ks if plan.only is None or k in plan.only]


def cell_count(plan: Plan) -> int:
    """The cells the plan measures: per workload and k, the rows alone and each set's rows."""
    per_k = len(plan.alone) + len(plan.sets) * len(plan.spread)
    return sum(len(_ks(plan, workload)) * per_k for workload in plan.workloads)


def run(plan: Plan, store, options: Options = Options(), reporter=None, force: bool = False) -> list[dict]:
    """Every workload of the plan in turn, each k, the rows alone then each GPU set (each row
    handed `options`, with the set's GPUs); every record is appended to `store` as it exists,
    and `reporter` (kmbench.progress) told of each cell. A cell finished before with this code
    on this machine is taken from the store unless `force`. Returns this run's records."""
    done = {} if force else finished(store)
    records = []
    for workload in plan.workloads:
        ks = _ks(plan, workload)
        n = rows_of(workload, plan.scale)
        left = [k for k in ks if any(_earlier(plan, workload, n, k, impl, gpus, done) is None
                                     for impl, gpus in _rows(plan))]
        if len(left) < len(ks) and reporter:
            reporter.skip(len(_rows(plan)) * (len(ks) - len(left)))
        if left:
            records += _one_workload(plan, workload, n, left, store, reporter, options, done)
    return records


def _rows(plan: Plan) -> list[tuple]:
    """(row, GPU set or None) of every cell per k: the rows alone, then each set's rows."""
    return [(impl, None) for impl in plan.alone] + [(impl, chosen) for chosen in plan.sets for impl in plan.spread]


def _earlier(plan: Plan, workload: Workload, n: int, k: int, impl, gpus: str | None, done: dict) -> dict | None:
    """The finished record of this cell, or None. A multi-GPU row's is filed under the count of
    GPUs it reports (kmbench.data.cells); a row that reports none ran alike on every set."""
    counts = plan.counts
    planned = cells.lloyd_cell(impl.name, dataset_name(workload, n, counts.seed), k, counts.iters, "iterations",
                               None, "random", counts.seed, gpus=len(gpus.split(",")) if gpus else None)
    found = done.get(planned) or done.get(planned.as_planned())
    return found if found is not None and cells.cell_of(found).gpus in (planned.gpus, None) else None


def _one_workload(plan: Plan, workload: Workload, n: int, ks: list[int], store, reporter, options: Options,
                  done) -> list[dict]:
    """Its own function, so the data are gone before the next workload's are made."""
    records = []
    with host_points(n, workload.d, f"{n:,} x {workload.d}") as data:
        if reporter:
            reporter.say(f"making {n:,} x {workload.d} ({n * workload.d * 4 / 1e9:.1f} GB)")
        name, meta = fill(workload, n, plan.counts.seed, data)
        dataset = Dataset(name, data, None, meta)
        for k in ks:
            task = InMemoryLloydTask(plan.counts.settings(k), options)  # one oracle for every cell of this k
            records += run_cells(task, [dataset], plan.alone, store=store, reporter=reporter,
                                 stored=lambda _, impl, k=k: _earlier(plan, workload, n, k, impl, None, done))
            for chosen in plan.sets:
                _give_back(reporter, f"GPU set {chosen}")
                # Each set a new cluster of its own GPUs, never a running scheduler's.
                on_set = task.with_options(replace(options, gpus=chosen, scheduler=None))
                # The set's workers hold their shards on the GPUs while their cell is judged: the
                # judge streams the (pinned) host data rather than copy them onto a GPU again.
                with reference.judge_from_host():
                    records += run_cells(on_set, [dataset], plan.spread, store=store, reporter=reporter,
                                         stored=lambda _, impl, k=k, chosen=chosen: _earlier(plan, workload, n, k,
                                                                                          impl, chosen, done))
    return records


def _give_back(reporter, then: str) -> None:
    """This process's GPU memory handed back before other processes (a set's workers) take the
    GPUs, and the progress told what is still in use there."""
    in_use = give_back_gpus()
    if reporter:
        held = "" if in_use is None else f"; {in_use / 2**30:.1f} GiB of GPU 0 in use"
        reporter.say(f"{then}: GPU memory given back{held}")
