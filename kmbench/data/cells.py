"""What a cell is, defined once for every reader of the store: the identity of one measurement.

A Lloyd cell is a row on a dataset with its k, stop rule, start, and the threads and GPUs the
row ran on; a task cell (assign, batched) is a row on one workload of one suite. Two records of
the same cell are the same measurement made twice, and the newer one stands: in the report, in
a plan's "already measured" check, in `--no-run` and in `kmbench compare`.

The threads and GPUs are what the row reports it ran on (its build info: `threads`, and
`workers` for a multi-GPU row), so a plan cannot name them before it runs: a planned cell leaves
them open (None) and is found in a record at any count. A count the harness chose as the row's
fastest (kmbench.protocol.threads: the record's `thread_choice`) is no part of the cell: the
cell is the row at its best, and a later calibration that picks another count measures it again.
"""

from __future__ import annotations

from typing import Callable, Iterable, NamedTuple

from kmbench.data.records import THREADS_FASTEST, Record


class Cell(NamedTuple):
    task: str
    impl: str
    where: str  # the dataset (Lloyd) or the suite and workload (tasks)
    k: int | None = None
    iterations: int | None = None
    stop: str | None = None
    tol: float | None = None  # only under the tolerance rule
    init: str | None = None
    seed: int | None = None
    threads: int | None = None
    gpus: int | None = None  # a Dask row's workers (one per GPU for the GPU rows); else None

    def as_planned(self) -> "Cell":
        """This cell as a plan names it, before the row says how many threads and GPUs it ran on."""
        return self._replace(threads=None, gpus=None)


def lloyd_cell(impl: str, dataset: str, k: int, iterations: int, stop: str, tol: float | None,
               init: str, seed: int, threads: int | None = None, gpus: int | None = None) -> Cell:
    return Cell("lloyd", impl, dataset, k, iterations, stop, tol if stop == "tolerance" else None, init, seed,
                threads, gpus)


def cell_of(record: dict | Record) -> Cell:
    """The cell a stored record (as stored, or typed) measured."""
    if isinstance(record, Record):
        record = record.to_dict()
    task = record.get("task", "lloyd")
    if task != "lloyd":
        return Cell(task, record.get("impl"), f"{record.get('suite')}/{record.get('workload')}")
    params = record["params"]
    build = record.get("build") or {}
    threads, gpus = build.get("threads"), build.get("workers")
    if (record.get("thread_choice") or {}).get("how") == THREADS_FASTEST:
        threads = None
    return lloyd_cell(record["impl"], record["dataset"]["name"], params["k"], params["iterations"],
                      params.get("stop", "iterations"), params.get("tol", 0.0), params["init"], params["seed"],
                      threads if isinstance(threads, int) else None, gpus if isinstance(gpus, int) else None)


def newest(records: Iterable[dict], wanted: Iterable[Cell] | None = None) -> list[dict]:
    """The newest record (last in store order) of each cell, in the order the cells were first
    seen; only records that a cell of `wanted` covers, where it is given."""
    wanted = None if wanted is None else set(wanted)
    latest: dict[Cell, dict] = {}
    for record in records:
        cell = cell_of(record)
        if wanted is None or cell in wanted or cell.as_planned() in wanted:
            latest[cell] = record
    return list(latest.values())


# A cell with one of these verdicts was measured to the end; errors and skips are tried again.
FINISHED = ("ok", "mismatch", "approximate")


def finished(records: Iterable[dict], comparable: Callable[[dict], bool]) -> dict[Cell, dict]:
    """The newest finished record of every cell among the records `comparable` accepts (the
    same code on the same machine), by its cell and by the cell as a plan names it: what a
    plan or a suite need not measure again, one rule for both."""
    found: dict[Cell, dict] = {}
    for record in records:
        if record.get("status") in FINISHED and comparable(record):
            cell = cell_of(record)
            found[cell] = found[cell.as_planned()] = record
    return found
