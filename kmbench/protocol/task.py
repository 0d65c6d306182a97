"""What kmbench measures, as one small interface: a task. Lloyd (kmbench.tasks.lloyd's
LloydTask), one assignment pass (kmbench.tasks.assign's AssignTask) and many small problems
(kmbench.tasks.batched's BatchedTask) each fill it in:

    describe(workload)            the record's fields that say what was measured
    problem(workload)             the inputs every implementation is handed, the same for all
    oracle(workload, problem)     the float64 answer they are judged against
    judge(result, oracle, ...)    ("ok" | "mismatch", why) for one counted run
    measure(impl, problem, ...)   one cell's record fields (never raises)
    render(records, ...)          the markdown of its tables

`run_cells` is the one runner: for every workload, the problem and oracle are made once, and
only when some implementation can run there; each implementation's record is written to the
store as soon as it exists, so an interrupted run keeps every finished cell. `measure_cell` is
the measuring loop shared by the tasks whose implementations return one result per run
(setup untimed, warm-up uncounted, every counted repeat judged); Lloyd's protocol adds stop
rules, time budgets and memory peaks, so it measures in runner.run_cell.
"""

from __future__ import annotations

import traceback
import uuid
from datetime import datetime, timezone

from kmbench.data import results
from kmbench.protocol import environment, validate
from kmbench.protocol.timing import host_region, spread_warning, summarize


class Task:
    """The interface; a subclass fills every method but floor and extra_fields."""

    name = ""
    progress = None  # note(text) while a cell is measured and judged (run_cells sets it)

    def describe(self, workload) -> dict:
        raise NotImplementedError

    def problem(self, workload):
        raise NotImplementedError

    def oracle(self, workload, problem, progress=None):
        raise NotImplementedError

    def judge(self, result, oracle, problem, impl) -> tuple[str, str]:
        raise NotImplementedError

    def measure(self, impl, problem, oracle, workload, run_id: str) -> dict:
        """One cell's fields; `problem` and `oracle` are None where no row could run yet (then
        `impl` cannot either: the record says so)."""
        return measure_cell(self, impl, problem, oracle)

    def render(self, records: list[dict], suite=None, source: str = "") -> str:
        raise NotImplementedError

    def floor(self, impls, problem, env: dict) -> dict:
        """Record fields of a measured floor for this problem (the same for every row)."""
        return {}

    def extra_fields(self, impl, problem, last, stats) -> dict:
        """Task-specific fields of a measured cell, from its last counted result."""
        return {}


def usable(impl) -> tuple[bool, str]:
    """`available()`, with a check that itself fails counted as a reason, not a crash."""
    try:
        return impl.available()
    except Exception as exc:
        return False, f"availability check failed: {exc}"


def error_fields(exc: Exception) -> dict:
    message = str(exc).strip() or type(exc).__name__
    return {"status": validate.ERROR, "detail": message.splitlines()[0][:500],
            "traceback": traceback.format_exc(limit=6)}


def measure_cell(task: Task, impl, problem, oracle, repeats: int = 5, warmup: int = 1, single_run=False) -> dict:
    """Set up, warm up, run `repeats` counted runs (each judged by the task); never raises.
    single_run: one counted run and no warm-up (a row that bounds its own time)."""
    record: dict = {"warnings": []}
    ready, why = usable(impl)
    if not ready:
        return {**record, "status": validate.SKIPPED, "detail": why}
    times, verdicts, last = [], [], None
    try:
        setup: dict[str, float] = {}
        with host_region(setup, "setup"):
            impl.prepare(problem)
        for _ in range(0 if single_run else warmup):
            impl.run(problem)
        for _ in range(1 if single_run else repeats):
            last = impl.run(problem)
            times.append(impl.phases["iterate"])
            verdicts.append(task.judge(last, oracle, problem, impl))
    except Exception as exc:
        return {**record, **error_fields(exc)}
    finally:
        try:
            impl.release()
        except Exception:
            pass
    bad = [detail for status, detail in verdicts if status != validate.OK]
    stats = summarize(times)
    record.update(status=validate.MISMATCH if bad else validate.OK, detail=bad[0] if bad else "",
                  repeats_done=len(times), times={"run": stats.as_dict(), "values": times, "setup": setup,
                                                  "setup_phases": impl.setup_phases()},
                  seconds=stats.mean, build=impl.build_info(), **task.extra_fields(impl, problem, last, stats))
    warning = spread_warning(stats)
    if warning:
        record["warnings"].append(warning)
    return record


def run_cells(task: Task, workloads: list, impls: list, store=None, stored=None, reporter=None) -> list[dict]:
    """Every implementation on every workload; each record is stored as soon as it exists.
    stored(workload, impl): an earlier record to reuse instead of measuring, or None.
    reporter: optional start(impl, workload), note(text), done(record)."""
    run_id = uuid.uuid4().hex[:12]
    env = environment.capture()
    records = []
    for workload in workloads:
        problem = oracle = None
        floor: dict = {}
        for impl in impls:
            earlier = stored(workload, impl) if stored else None
            if earlier is not None:
                records.append(earlier)
                continue
            if reporter:
                reporter.start(impl, workload)
            if oracle is None and usable(impl)[0]:  # no data or oracle for rows that cannot run
                problem = task.problem(workload)
                oracle = task.oracle(workload, problem, progress=reporter.note if reporter else None)
                floor = task.floor(impls, problem, env)
            record = {"run_id": run_id, "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                      "impl": impl.name, "label": impl.label or impl.name, "impl_source": impl.source,
                      **task.describe(workload)}
            # A row that cannot run here is measured as skipped, possibly before any problem exists.
            task.progress = reporter.note if reporter else None  # the judge's steps, as they go
            record.update(task.measure(impl, problem, oracle, workload, run_id))
            record.update(env=env, **floor)
            results.append(record, store)
            records.append(record)
            if reporter:
                reporter.done(record)
    return records
