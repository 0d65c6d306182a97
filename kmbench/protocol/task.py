"""What kmbench measures, as one small interface: a task. Lloyd (kmbench.tasks.lloyd's
LloydTask, measured and judged by kmbench.protocol.runner's LloydProtocol), one assignment pass
(kmbench.tasks.assign's AssignTask) and many small problems (kmbench.tasks.batched's
BatchedTask) each fill it in:

    describe(workload, problem)   the record's fields that say what was measured
    workload_name(workload)       the workload in a few words, for progress lines
    problem(workload)             the inputs every implementation is handed, the same for all
    oracle(workload, problem)     the float64 answer they are judged against
    counting(impl, problem)       warm-up and counted runs, the time budget
    claims(impl, problem, result, wall)   the times a run claims, checked against the wall clock
    judge(results, oracle, ...)   the verdict on every counted result
    fields(impl, ..., measured, verdict)  the record fields a measured cell makes
    render(records, ...)          the markdown of its tables

`run_cells` is the one runner and `cell_record` the one place a record's header is made; each
cell is measured by the one loop, kmbench.protocol.measure.measure_cell. For every workload,
the problem and oracle are made once, and only when some implementation can run there; each
implementation's record is written to the store as soon as it exists, so an interrupted run
keeps every finished cell.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

from kmbench.data import results
from kmbench.protocol import clock, environment
from kmbench.protocol.measure import Counting, measure_cell, usable

__all__ = ["Counting", "Task", "cell_record", "run_cells", "usable"]


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

    def label(self, impl, problem) -> str:
        """The row's name in tables."""
        return impl.label or impl.name

    def followed(self, impl, problem, oracle) -> tuple[object, dict]:
        """The problem as this row will run it, and record fields that say so (Lloyd's stop rule)."""
        return problem, {}

    def claims(self, impl, problem, result, wall: float) -> list[float]:
        """The times of the timed region this run claims (the row's `phases`), checked against
        the harness's clock around the call: a claim longer than the call is false."""
        claimed = [impl.phases["iterate"]]
        clock.check_wall(impl.name, claimed, wall)
        return claimed

    def judge(self, results: list, oracle, problem, impl, progress=None):
        """The verdict on every counted result; `fields` turns it into the record's status."""
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
    record = {"run_id": run_id, "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "impl": impl.name, "label": task.label(impl, problem), "impl_source": impl.source,
              **task.describe(workload, problem)}
    record.update(task.measure(impl, problem, oracle, workload, progress))
    return record


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


def run_cells(task: Task, workloads: list, impls: list, store=None, stored=None, reporter=None) -> list[dict]:
    """Every implementation on every workload; each record is stored as soon as it exists.
    stored(workload, impl): an earlier record to reuse instead of measuring, or None.
    reporter: optional start(impl, workload name), note(text), expect(seconds, warm-up), done(record),
    skip(count) (kmbench.progress)."""
    run_id = uuid.uuid4().hex[:12]
    env = environment.capture()
    note = _Progress(reporter) if reporter else None
    records = []
    for workload in workloads:
        problem = oracle = None
        floor: dict = {}
        reused = 0
        for impl in impls:
            earlier = stored(workload, impl) if stored else None
            if earlier is not None:
                records.append(earlier)
                reused += usable(impl)[0]  # the reporter counts the cells of rows that can run here
                continue
            if reporter:
                reporter.start(impl, task.workload_name(workload))
            if oracle is None and usable(impl)[0]:  # no data or oracle for rows that cannot run
                problem = task.problem(workload)
                oracle = task.oracle(workload, problem, progress=note)
                floor = task.floor(impls, problem, env)
            record = cell_record(task, impl, problem, oracle, workload, run_id, note)
            record.update(env=env, **floor)
            results.append(record, store)
            records.append(record)
            if reporter:
                reporter.done(record)
        if reused and reporter:
            reporter.skip(reused)
    return records
