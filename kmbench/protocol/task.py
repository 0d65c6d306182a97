"""What kmbench measures, as one small interface: a task. Lloyd (kmbench.tasks.lloyd's
LloydTask, measured and judged by kmbench.protocol.runner's LloydProtocol), one assignment pass
(kmbench.tasks.assign's AssignTask) and many small problems (kmbench.tasks.batched's
BatchedTask) each fill it in:

    describe(workload, problem)   the record's fields that say what was measured
    workload_name(workload)       the workload in a few words, for progress lines
    problem(workload)             the inputs every implementation is handed, the same for all
    oracle(workload, problem)     the float64 answer they are judged against
    counting(impl, problem)       warm-up and counted runs, the time budget
    cannot(impl, problem)         why a row cannot compute this problem, known before it runs
    trace_problem(impl, problem)  the judge's untimed trace run, made as the first warm-up (or None)
    claims(impl, problem, result, wall)   the times a run claims, checked against the wall clock
    judge(results, oracle, ..., trace)   the verdict on every counted result (and that trace run)
    fields(impl, ..., measured, verdict)  the record fields a measured cell makes
    render(records, ...)          the markdown of its tables

`run_cells` is the one runner and `cell_header` the one place a record's header is made; each
cell is measured by the one loop, kmbench.protocol.measure.measure_cell. For every workload,
the problem and oracle are made once, and only when some implementation can run there; each
implementation's record is written to the store as soon as it exists, so an interrupted run
keeps every finished cell. The cells run here, one after another, or on the workers of a Dask
cluster (kmbench.protocol.placement), whose records come back here to be stored.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

from kmbench.data import results
from kmbench.protocol import clock, environment
from kmbench.protocol.validate import SKIPPED
from kmbench.protocol.measure import Counting, measure_cell, usable
from kmbench.protocol.memory import give_back_gpus

__all__ = ["Counting", "Inputs", "Task", "cell_header", "cell_record", "measured_here", "run_cells", "usable"]


class Task:
    """The interface; a subclass fills describe, workload_name, problem, oracle, counting,
    judge, fields and render; the rest have defaults that suit most tasks."""

    name = ""

    def describe(self, workload, problem=None) -> dict:
        """What was measured; `problem` is None where no row could run (and none was made)."""
        raise NotImplementedError

    def workload_name(self, workload) -> str:
        raise NotImplementedError

    def problem(self, workload):
        raise NotImplementedError

    def oracle(self, workload, problem, progress=None):
        raise NotImplementedError

    def counting(self, impl, problem) -> Counting:
        raise NotImplementedError

    def cannot(self, impl, problem) -> str | None:
        """Why this row cannot compute this problem, known before it runs (Lloyd: values its
        precision cannot hold), or None: its cell is skipped with the reason, and the run says
        so before the workload's cells."""
        return None

    def label(self, impl, problem) -> str:
        """The row's name in tables."""
        return impl.label or impl.name

    def trace_problem(self, impl, problem):
        """The problem of the row's untimed trace run for the judge, where the task's judge uses
        one: the loop makes it the first warm-up run and hands its result to `judge`. None: the
        warm-up runs are plain runs."""
        return None

    def followed(self, impl, problem, oracle) -> tuple[object, dict]:
        """The problem as this row will run it, and record fields that say so (Lloyd's stop rule)."""
        return problem, {}

    def claims(self, impl, problem, result, wall: float) -> list[float]:
        """The times of the timed region this run claims (the row's `phases`), checked against
        the harness's clock around the call: a claim longer than the call is false."""
        claimed = [clock.seconds(impl.phases["iterate"])]
        clock.check_wall(impl.name, claimed, wall)
        return claimed

    def judge(self, results: list, oracle, problem, impl, progress=None, trace=None):
        """The verdict on every counted result; `fields` turns it into the record's status.
        trace: the result of the run trace_problem asked for, made in the warm-up (None: none)."""
        raise NotImplementedError

    def fields(self, impl, problem, oracle, measured, verdict) -> dict:
        """The record fields of a measured cell (status and detail among them)."""
        raise NotImplementedError

    def measure(self, impl, problem, oracle, workload, progress=None) -> dict:
        """One cell's fields by the one loop; a task may add fields of its own around it."""
        return measure_cell(self, impl, problem, oracle, progress)

    def render(self, records: list[dict], suite=None, source: str = "") -> str:
        raise NotImplementedError

    def floor(self, impls, problem, env: dict) -> dict:
        """Record fields of a measured floor for this problem (the same for every row)."""
        return {}


def cell_record(task: Task, impl, problem, oracle, workload, run_id: str, progress=None) -> dict:
    """One cell's record: the header (the one place it is made), what was measured, and the
    measurement. A row that cannot run here is measured as skipped, possibly before any
    problem exists."""
    record = cell_header(task, impl, problem, workload, run_id)
    why = task.cannot(impl, problem) if problem is not None and usable(impl)[0] else None
    if why:
        record.update(status=SKIPPED, detail=why, warnings=[])
    else:
        record.update(task.measure(impl, problem, oracle, workload, progress))
    return record


def cell_header(task: Task, impl, problem, workload, run_id: str) -> dict:
    """What every record of a cell starts with: when, which row, what it measured."""
    return {"run_id": run_id, "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "impl": impl.name, "label": task.label(impl, problem), "impl_source": impl.source,
            **task.describe(workload, problem)}


def failed_record(inputs: "Inputs", impl, run_id: str, why: str, env: dict) -> dict:
    """The whole record of a cell that could not be measured: status error, and why."""
    return {**cell_header(inputs.task, impl, inputs.problem, inputs.workload, run_id), "status": "error",
            "detail": why, "warnings": [], "build": {}, "env": env}


class Inputs:
    """A workload's problem, oracle and floor, made once, on first need: never for a workload
    none of whose rows can run (no data, no oracle). `cells`: how many cells share the oracle
    (each record bears its share of what computing it cost)."""

    def __init__(self, task: Task, workload, impls: list, env: dict, note=None, cells: int = 1):
        self.task, self.workload, self.impls, self.env, self.note = task, workload, impls, env, note
        self.problem = self.oracle = None
        self.floor: dict = {}
        self.cells = max(1, cells)
        self.reference_seconds = 0.0
        self.failure: str | None = None  # why the oracle could not be made, once it could not

    def make(self) -> None:
        if self.oracle is None:
            self.problem = self.task.problem(self.workload)
            self.oracle = self.task.oracle(self.workload, self.problem, progress=self.note)
            self.floor = self.task.floor(self.impls, self.problem, self.env)
            self.say_cannot()
            # Computed here, now (0 where it came from the cache); an in-memory plan's next call
            # of run_cells that reuses this oracle owes none of it.
            self.reference_seconds = getattr(self.oracle, "seconds", 0.0)
            if hasattr(self.oracle, "seconds"):
                self.oracle.seconds = 0.0

    def say_cannot(self) -> None:
        """Before the workload's cells: the rows that cannot compute it, and why (one line a reason)."""
        if self.note is None:
            return
        reasons: dict[str, list[str]] = {}
        for impl in self.impls:
            why = self.task.cannot(impl, self.problem) if usable(impl)[0] else None
            if why:
                reasons.setdefault(why, []).append(impl.name)
        for why, names in reasons.items():
            self.note.say(f"{', '.join(names)} cannot compute {self.task.workload_name(self.workload)} "
                          f"and {'are' if len(names) > 1 else 'is'} skipped there: {why}")

    def charged(self, record: dict) -> dict:
        """The record with times.judge: its share of the reference beside its own judgement."""
        charge_judge(record, self.reference_seconds / self.cells)
        return record

    def release(self) -> None:
        """What the judge holds for this workload on a GPU, given back (kmbench.protocol.validate)."""
        if hasattr(self.oracle, "release"):
            self.oracle.release()


def charge_judge(record: dict, reference_share: float) -> None:
    """times.judge: what judging the cell cost, its share of the reference and its own judgement
    (every untimed call of the row and the certification), beside times.row_calls."""
    times = record.get("times")
    if not isinstance(times, dict) or record.get("status") == "skipped":
        return
    times["reference_share"] = reference_share
    times["judge"] = reference_share + (times.get("validation") or 0.0)


def measured_here(inputs: Inputs, impl, run_id: str) -> dict:
    """One cell measured in this process, with this machine's environment. Where the workload's
    oracle cannot be made (the judge's memory, say), each of its cells is an error that says why,
    and the run goes on to the next workload; the oracle is not tried again for each cell."""
    if inputs.oracle is None and inputs.failure is None and usable(impl)[0]:
        try:
            inputs.make()
        except Exception as exc:  # noqa: BLE001 - any failure of the judge's is one workload's, not the run's
            inputs.failure = f"the float64 reference could not be made: {type(exc).__name__}: {exc}"
            give_back_gpus()  # what the failed attempt left in the pools, for the next workload
    if inputs.failure is not None and usable(impl)[0]:
        return failed_record(inputs, impl, run_id, inputs.failure, inputs.env)
    record = cell_record(inputs.task, impl, inputs.problem, inputs.oracle, inputs.workload, run_id, inputs.note)
    record.update(env=inputs.env, **inputs.floor)
    return inputs.charged(record)


class _Progress:
    """What a cell tells the reporter while it runs: a note of the stage it is in (called, as the
    judge and the oracle call it) and, where the reporter listens, how long its timed runs will
    take (`expect`, from the measuring loop)."""

    def __init__(self, reporter):
        self.reporter = reporter

    def __call__(self, text: str) -> None:
        self.reporter.note(text)

    def expect(self, seconds: float, warmup: float) -> None:
        if hasattr(self.reporter, "expect"):
            self.reporter.expect(seconds, warmup)

    def say(self, text: str) -> None:
        """A line of its own (a reporter without one hears it as a note)."""
        (getattr(self.reporter, "say", None) or self.reporter.note)(text)


def run_cells(task: Task, workloads: list, impls: list, store=None, stored=None, reporter=None,
              cluster=None) -> list[dict]:
    """Every implementation on every workload; each record is stored as soon as it exists.
    stored(workload, impl): an earlier record to reuse instead of measuring, or None.
    reporter: optional start(impl, workload name), note(text), expect(seconds, warm-up), done(record),
    skip(count) (kmbench.progress).
    cluster: a kmbench.protocol.placement.Cluster whose workers measure the cells (the records
    come back here, to be stored); None: measured here, one after another."""
    run_id = uuid.uuid4().hex[:12]
    env = environment.capture()
    note = _Progress(reporter) if reporter else None
    records: list[dict] = []

    def keep(record: dict) -> None:
        results.keep(record, store)  # only ever here, by the client: a worker never writes
        records.append(record)
        if reporter:
            reporter.done(record)

    elsewhere = []  # (inputs, rows) for the cluster, which runs them all at once
    for workload in workloads:
        earlier = [stored(workload, impl) if stored else None for impl in impls]
        cells = sum(1 for impl, found in zip(impls, earlier) if found is None and usable(impl)[0])
        inputs = Inputs(task, workload, impls, env, note, cells)
        todo, reused = [], 0
        for impl, found in zip(impls, earlier):
            if found is not None:
                records.append(found)
                reused += usable(impl)[0]  # the reporter counts the cells of rows that can run here
            elif cluster is not None:
                todo.append(impl)
            else:
                if reporter:
                    reporter.start(impl, task.workload_name(workload))
                keep(measured_here(inputs, impl, run_id))
        if todo:
            elsewhere.append((inputs, todo))
        else:
            inputs.release()  # its cells are done: the judge's GPU memory for it goes back
        if reused and reporter:
            reporter.skip(reused)
    if elsewhere:
        cluster.run(elsewhere, run_id, keep, reporter)  # its records come back charged (Inputs.charged)
        for inputs, _ in elsewhere:
            inputs.release()
    return records
