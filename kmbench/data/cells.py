"""What a cell is, defined once for every reader of the store: the identity of one measurement.

A Lloyd cell is a row on a dataset with its k, stop rule, start and the threads the row ran on;
a task cell (assign, batched) is a row on one workload of one suite. Two records of the same
cell are the same measurement made twice, and the newer one stands: in the report, in a
plan's "already measured" check, and in `--no-run`.

The threads are what the row reports it ran on (its build info), so a plan cannot name them
before it runs: a planned cell leaves them open (None) and is found in a record at any count.
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

from kmbench.data.records import Record


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

    def any_threads(self) -> "Cell":
        """This cell as a plan names it, before the row says how many threads it ran on."""
        return self._replace(threads=None)


def lloyd_cell(impl: str, dataset: str, k: int, iterations: int, stop: str, tol: float | None,
               init: str, seed: int, threads: int | None = None) -> Cell:
    return Cell("lloyd", impl, dataset, k, iterations, stop, tol if stop == "tolerance" else None, init, seed,
                threads)


def cell_of(record: dict | Record) -> Cell:
    """The cell a stored record (as stored, or typed) measured."""
    if isinstance(record, Record):
        record = record.to_dict()
    task = record.get("task", "lloyd")
    if task != "lloyd":
        return Cell(task, record.get("impl"), f"{record.get('suite')}/{record.get('workload')}")
    params = record["params"]
    threads = (record.get("build") or {}).get("threads")
    return lloyd_cell(record["impl"], record["dataset"]["name"], params["k"], params["iterations"],
                      params.get("stop", "iterations"), params.get("tol", 0.0), params["init"], params["seed"],
                      threads if isinstance(threads, int) else None)


def newest(records: Iterable[dict], wanted: Iterable[Cell] | None = None) -> list[dict]:
    """The newest record (last in store order) of each cell, in the order the cells were first
    seen; only records that a cell of `wanted` covers, where it is given."""
    wanted = None if wanted is None else set(wanted)
    latest: dict[Cell, dict] = {}
    for record in records:
        cell = cell_of(record)
        if wanted is None or cell in wanted or cell.any_threads() in wanted:
            latest[cell] = record
    return list(latest.values())


def measured(records: Iterable[dict]) -> set[Cell]:
    """Every cell the records measured, each also with its threads left open, so that a
    planned cell (threads open) is found whatever count its row ran on."""
    found = set()
    for record in records:
        cell = cell_of(record)
        found.update((cell, cell.any_threads()))
    return found
