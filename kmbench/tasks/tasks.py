"""The tasks beside Lloyd, as kmbench.protocol.task's interface fills them: "assign" (document
001: one assignment pass, the kernel ladder) and "batched" (document 003: many small
problems). Each has its problem, oracle and judge (kmbench.tasks.assign, kmbench.tasks.batched)
and its tables (kmbench.report.task_markdown); the one runner, kmbench.protocol.task.run_cells,
measures them as it measures Lloyd, one record per (workload, implementation), marked with
its task.

A task suite is a TOML file under kmbench/plans/suites/ with `task = "assign" | "batched"`:

    title, source, published (key in published.json), impls, task
    [protocol]   repeats, warmup, budget_s (the slow CPU rows' time budget), checked_rows
    [[workloads]] assign: n, d, k, seed;  batched: rows, points, d, k, seeds, stop
                  ("epsilon" | "iterations"), epsilon, iterations, seed
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kmbench import registry
from kmbench.data import cells, results
from kmbench.errors import UsageError
from kmbench.protocol import environment, reference, validate
from kmbench.protocol.task import Counting, Task, run_cells, usable
from kmbench.protocol.statistics import summarize
from kmbench.tasks import assign, batched

TASKS = ("assign", "batched")
PROTOCOL_KEYS = {"repeats": int, "warmup": int, "budget_s": float, "checked_rows": int}  # each with its type
WORKLOAD_KEYS = {
    "assign": {"n", "d", "k", "seed"},
    "batched": {"rows", "points", "d", "k", "seeds", "stop", "epsilon", "iterations", "seed"},
}


@dataclass
class TaskSuite:
    name: str
    title: str
    source: str
    task: str
    workloads: list
    impls: list
    published: str | None = None
    repeats: int = 5
    warmup: int = 1
    budget_s: float = 30.0
    checked_rows: int = batched.MAX_CHECKED_ROWS

    def cell_count(self) -> int:
        return len(self.workloads) * len(self.impls)


# ------------------------------------------------------------------ problems


def workload_name(task: str, spec: dict) -> str:
    if task == "assign":
        return f"assign-n{spec['n']}-d{spec['d']}-k{spec['k']}"
    stop = f"eps{spec.get('epsilon', 0.02):g}" if spec.get("stop", "epsilon") == "epsilon" else f"T{spec['iterations']}"
    return f"batched-r{spec['rows']}-p{spec['points']}-d{spec['d']}-k{spec['k']}-s{spec['seeds']}-{stop}"


def assign_problem(n: int, d: int, k: int, seed: int = 0) -> assign.AssignProblem:
    """Points around k centres; the harness picks k distinct points as centroids, the
    previous labels are the nearest of those, and the pass assigns to their means: the
    second pass of a Lloyd run, so some labels change."""
    if k > n:
        raise UsageError(f"k = {k} is larger than n = {n}.")
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-10, 10, (k, d))
    data = (centres[rng.integers(0, k, n)] + rng.standard_normal((n, d))).astype(np.float32)
    start = data[rng.choice(n, k, replace=False)].astype(np.float64)
    previous, _ = reference.nearest(data, start)
    means = reference.update(data, previous, start)
    return assign.AssignProblem(data, means.astype(np.float32), previous.astype(np.int64))


def batched_problem(rows: int, points: int, d: int, k: int, seeds: int, stop: str = "epsilon",
                    epsilon: float = 0.02, iterations: int = 100, seed: int = 0) -> batched.BatchedProblem:
    """Each row: points around k centres of its own; every row's seeds picked by the harness."""
    if stop not in ("epsilon", "iterations"):
        raise UsageError(f"stop must be epsilon (document 003's rule) or iterations; got {stop!r}.")
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-10, 10, (rows, k, d))
    data = centres[np.arange(rows)[:, None], rng.integers(0, k, (rows, points))]
    data = (data + rng.standard_normal((rows, points, d))).astype(np.float32)
    starts = batched.initial_centroids(data, k, seeds, seed=seed + 1)
    return batched.BatchedProblem(data, starts, iterations, epsilon if stop == "epsilon" else None)


class SuiteTask(Task):
    """A task suite's task: a workload is one of the suite's workload specs (a dict); the
    suite's protocol (repeats, warm-up, the slow rows' budget, rows checked) applies to all."""

    def __init__(self, suite: TaskSuite):
        self.suite = suite

    def describe(self, spec: dict, problem=None) -> dict:
        return {"task": self.name, "suite": self.suite.name, "workload": workload_name(self.name, spec),
                "spec": dict(spec)}

    def workload_name(self, spec: dict) -> str:
        return workload_name(self.name, spec)

    def counting(self, impl, problem) -> Counting:
        """A row that bounds its own time is handed the suite's budget and runs once, unwarmed."""
        if isinstance(impl, batched.BudgetedBatched):
            impl.budget_s = self.suite.budget_s
            return Counting(warmup=0, repeats=1)
        return Counting(self.suite.warmup, self.suite.repeats)

    def judge(self, results: list, oracle, problem, impl, progress=None, trace=None) -> tuple[str, str]:
        """Every counted result by the task's own judge; the first that is wrong says why."""
        verdicts = [self.judge_one(result, oracle) for result in results]
        bad = [detail for status, detail in verdicts if status != validate.OK]
        return (validate.MISMATCH, bad[0]) if bad else (validate.OK, "")

    def judge_one(self, result, oracle) -> tuple[str, str]:
        raise NotImplementedError

    def measure(self, impl, problem, oracle, spec: dict, progress=None) -> dict:
        """The one loop's fields, after the row's ladder step and description (skipped or not)."""
        return {"step": getattr(impl, "step", None), "description": impl.description,
                **super().measure(impl, problem, oracle, spec, progress)}

    def fields(self, impl, problem, oracle, measured, verdict) -> dict:
        status, detail = verdict
        stats = summarize(measured.times)
        return {"status": status, "detail": detail, "repeats_done": len(measured.times),
                "times": {"run": stats.as_dict(), "values": measured.times, "setup": {"setup": measured.setup},
                          "setup_phases": impl.setup_phases()},
                "seconds": stats.mean, **self.extra_fields(impl, problem, measured.counted[-1], stats)}

    def extra_fields(self, impl, problem, last, stats) -> dict:
        """Fields of this task's own, from the cell's last counted result."""
        return {}

    def render(self, records: list[dict], suite=None, source: str = "") -> str:
        from kmbench.report import markdown  # as Lloyd's: only drawing the tables loads pandas
        from kmbench.report.contents import Contents

        chosen = suite or self.suite
        return markdown.render(Contents(records, suites={chosen.name: chosen}))


class AssignTask(SuiteTask):
    """Document 001's task: one assignment pass (kmbench.tasks.assign)."""

    name = "assign"

    def problem(self, spec: dict) -> assign.AssignProblem:
        return assign_problem(**spec)

    def oracle(self, spec: dict, problem, progress=None) -> assign.AssignOracle:
        return assign.AssignOracle.compute(problem)

    def judge_one(self, result, oracle) -> tuple[str, str]:
        return assign.judge(result, oracle)

    def floor(self, impls, problem, env: dict) -> dict:
        """The same bytes moved with no work, where a row's family offers it (`reference_floor`)."""
        for impl in impls:
            offer = getattr(impl, "reference_floor", None)
            if offer is not None and usable(impl)[0]:
                try:
                    return {"floor_s": offer(problem)}
                except Exception:
                    return {"floor_s": None}
        return {"floor_s": None}

    def extra_fields(self, impl, problem, last, stats) -> dict:
        return {"bytes_per_pass": impl.bytes_per_pass(problem) if hasattr(impl, "bytes_per_pass") else None}


class BatchedTask(SuiteTask):
    """Document 003's task: many small problems (kmbench.tasks.batched)."""

    name = "batched"

    def problem(self, spec: dict) -> batched.BatchedProblem:
        return batched_problem(**spec)

    def oracle(self, spec: dict, problem, progress=None) -> batched.BatchedOracle:
        return batched.BatchedOracle.compute(problem, max_rows=self.suite.checked_rows)

    def judge_one(self, result, oracle) -> tuple[str, str]:
        return batched.judge(result, oracle, "float32")

    def extra_fields(self, impl, problem, last, stats) -> dict:
        whole = last.extrapolated_seconds or stats.mean
        return {"rows_done": last.rows_done, "extrapolated_seconds": last.extrapolated_seconds,
                "rows_per_s": problem.rows / whole if whole else None,
                "iterations_mean": float(np.mean(last.iterations[:last.rows_done or problem.rows]))}


TASK_CLASSES = {"assign": AssignTask, "batched": BatchedTask}


def task_of(suite: TaskSuite) -> SuiteTask:
    return TASK_CLASSES[suite.task](suite)


def reproduce(suite: TaskSuite, impl_names: str | None, store=None, force: bool = False, data_dir=None,
              reporter=None, cluster=None) -> list[dict]:
    """Every (workload, implementation) cell of a task suite; a cell this code already
    measured to the end on this machine, or on a machine of `cluster` (cells.finished), is
    taken from the store unless `force`. `cluster`'s workers measure the cells, if given."""
    impls = registry.select(impl_names or ",".join(suite.impls), task=suite.task)
    machines = cluster.machines() if cluster else {environment.identity()}
    earlier = cells.finished(results.load(store, task=suite.task),
                             lambda record: environment.identity(record.get("env") or {}) in machines)

    def stored(spec: dict, impl):
        return None if force else earlier.get(
            cells.Cell(suite.task, impl.name, f"{suite.name}/{workload_name(suite.task, spec)}"))

    return run_cells(task_of(suite), suite.workloads, impls, store, stored, reporter, cluster)


def latest(suite: TaskSuite, store=None) -> list[dict]:
    """The newest stored record of each of the suite's cells (for --no-run)."""
    return cells.newest(record for record in results.load(store, task=suite.task) if record.get("suite") == suite.name)
