"""The tasks beside Lloyd, measured and recorded: "assign" (document 001: one assignment
pass, the kernel ladder) and "batched" (document 003: many small problems). Lloyd cells go
through kmbench.protocol.runner; these have their own problem, oracle and judge (kmbench.tasks.assign,
kmbench.tasks.batched), so this module builds the problem from a suite's workload, runs each
implementation (setup untimed, warm-up uncounted, every counted repeat judged), and writes
one record per (workload, implementation) to the store, marked with its task.

A task suite is a TOML file under kmbench/plans/suites/ with `task = "assign" | "batched"`:

    title, source, published (key in published.json), impls, task
    [protocol]   repeats, warmup, budget_s (the slow CPU rows' time budget), checked_rows
    [[workloads]] assign: n, d, k, seed;  batched: rows, points, d, k, seeds, stop
                  ("epsilon" | "iterations"), epsilon, iterations, seed
"""

from __future__ import annotations

import traceback
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from kmbench import registry
from kmbench.data import results
from kmbench.protocol import environment, reference, runner, validate
from kmbench.tasks import assign, batched
from kmbench.errors import UsageError
from kmbench.protocol.timing import host_region, spread_warning, summarize

TASKS = ("assign", "batched")
PROTOCOL_KEYS = {"repeats", "warmup", "budget_s", "checked_rows"}
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


def parse(name: str, raw: dict) -> TaskSuite:
    """Check a task suite's fields: a broken file is one sentence, not a traceback mid-run."""
    task = raw["task"]
    if task not in TASKS:
        raise UsageError(f"Suite {name}: task must be lloyd or one of {', '.join(TASKS)}; got {task!r}.")
    missing = [key for key in ("title", "source", "workloads", "impls") if not raw.get(key)]
    if missing:
        raise UsageError(f"Suite {name} lacks {', '.join(missing)}.")
    protocol = raw.get("protocol", {})
    unknown = set(protocol) - PROTOCOL_KEYS
    if unknown:
        raise UsageError(f"Suite {name}: unknown protocol keys {', '.join(sorted(unknown))}.")
    for spec in raw["workloads"]:
        extra = set(spec) - WORKLOAD_KEYS[task]
        if extra:
            raise UsageError(f"Suite {name}: unknown workload keys {', '.join(sorted(extra))} for the {task} task.")
    return TaskSuite(name, raw["title"], raw["source"], task, raw["workloads"], raw["impls"], raw.get("published"),
                     int(protocol.get("repeats", 5)), int(protocol.get("warmup", 1)),
                     float(protocol.get("budget_s", 30.0)),
                     int(protocol.get("checked_rows", batched.MAX_CHECKED_ROWS)))


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


def make_problem(task: str, spec: dict):
    return assign_problem(**spec) if task == "assign" else batched_problem(**spec)


def make_oracle(task: str, problem, checked_rows: int):
    if task == "assign":
        return assign.AssignOracle.compute(problem)
    return batched.BatchedOracle.compute(problem, max_rows=checked_rows)


def judge(task: str, result, oracle) -> tuple[str, str]:
    return assign.judge(result, oracle) if task == "assign" else batched.judge(result, oracle, "float32")


# ------------------------------------------------------------------ measuring


def configure(impl, suite: TaskSuite):
    """Hand the suite's time budget to the rows that take one."""
    if isinstance(impl, batched.BudgetedBatched):
        impl.budget_s = suite.budget_s
    return impl


def measure(impl, problem, oracle, task: str, repeats: int, warmup: int) -> dict:
    """Set up, warm up, run `repeats` counted runs (each judged); never raises."""
    record: dict = {"warnings": []}
    ready, why = runner.usable(impl)
    if not ready:
        return {**record, "status": validate.SKIPPED, "detail": why}
    times, verdicts, last = [], [], None
    try:
        setup: dict[str, float] = {}
        with host_region(setup, "setup"):
            impl.prepare(problem)
        budgeted = isinstance(impl, batched.BudgetedBatched)  # one long run; its budget bounds it
        for _ in range(0 if budgeted else warmup):
            impl.run(problem)
        for _ in range(1 if budgeted else repeats):
            last = impl.run(problem)
            times.append(impl.phases["iterate"])
            verdicts.append(judge(task, last, oracle))
    except Exception as exc:
        message = str(exc).strip() or type(exc).__name__
        return {**record, "status": validate.ERROR, "detail": message.splitlines()[0][:500],
                "traceback": traceback.format_exc(limit=6)}
    finally:
        try:
            impl.release()
        except Exception:
            pass
    bad = [detail for status, detail in verdicts if status != "ok"]
    stats = summarize(times)
    record.update(status=validate.MISMATCH if bad else validate.OK, detail=bad[0] if bad else "",
                  repeats_done=len(times), times={"run": stats.as_dict(), "values": times, "setup": setup,
                                                  "setup_phases": impl.setup_phases()},
                  seconds=stats.mean, build=impl.build_info())
    if task == "assign":
        record["bytes_per_pass"] = impl.bytes_per_pass(problem) if hasattr(impl, "bytes_per_pass") else None
    else:
        record["rows_done"] = last.rows_done
        record["extrapolated_seconds"] = last.extrapolated_seconds
        whole = last.extrapolated_seconds or stats.mean
        record["rows_per_s"] = problem.rows / whole if whole else None
        record["iterations_mean"] = float(np.mean(last.iterations[:last.rows_done or problem.rows]))
    warning = spread_warning(stats)
    if warning:
        record["warnings"].append(warning)
    return record


def _floor(impls, problem) -> float | None:
    """Seconds of the task's floor on this problem (the same bytes moved, no work), where an
    implementation family offers one (`reference_floor`) and can run here."""
    for impl in impls:
        offer = getattr(impl, "reference_floor", None)
        if offer is not None and runner.usable(impl)[0]:
            try:
                return offer(problem)
            except Exception:
                return None
    return None


def _key(record: dict) -> tuple:
    return record.get("suite"), record.get("workload"), record.get("impl")


def reproduce(suite: TaskSuite, impl_names: str | None, store=None, force: bool = False, data_dir=None,
              reporter=None) -> list[dict]:
    """Every (workload, implementation) cell of a task suite; a cell this code already
    measured on this machine is taken from the store unless `force`."""
    impls = registry.select(impl_names or ",".join(suite.impls), task=suite.task)
    env = environment.capture()
    here = environment.identity(env)
    stored = {_key(r): r for r in results.load(store, task=suite.task)
              if environment.identity(r.get("env") or {}) == here}
    run_id = uuid.uuid4().hex[:12]
    records = []
    for spec in suite.workloads:
        name = workload_name(suite.task, spec)
        problem, oracle, floor = None, None, None
        for impl in impls:
            key = (suite.name, name, impl.name)
            if key in stored and not force:
                records.append(stored[key])
                continue
            if problem is None and runner.usable(impl)[0]:  # no data or oracle for rows that cannot run
                if reporter:
                    reporter(f"{name}: data and float64 oracle")
                problem = make_problem(suite.task, spec)
                oracle = make_oracle(suite.task, problem, suite.checked_rows)
                floor = _floor(impls, problem)
            if reporter:
                reporter(f"{name}: {impl.name}")
            record = {"task": suite.task, "suite": suite.name, "workload": name, "spec": dict(spec),
                      "run_id": run_id, "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                      "impl": impl.name, "label": impl.label or impl.name, "impl_source": impl.source,
                      "description": impl.description, "step": getattr(impl, "step", None),
                      **measure(configure(impl, suite), problem, oracle, suite.task, suite.repeats, suite.warmup),
                      "floor_s": floor, "env": env}
            results.append(record, store)
            records.append(record)
    return records


def latest(suite: TaskSuite, store=None) -> list[dict]:
    """The newest stored record of each of the suite's cells (for --no-run)."""
    found = {}
    for record in results.load(store, task=suite.task):
        if record.get("suite") == suite.name:
            found[_key(record)] = record
    return list(found.values())
