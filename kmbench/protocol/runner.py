"""Run the fair protocol: same problem for everyone, warm-up, counted repeats, validation,
one record per cell. A cell that fails becomes a record with status `error`; the run goes on.

This is Lloyd's measuring (run_cell) and judging (judgement); the task that puts them to work,
with its tables, is kmbench.tasks.lloyd's LloydTask, above report in the layering (a view is
drawn with report's pieces, and the protocol may not import report)."""

from __future__ import annotations

import time
import traceback
from dataclasses import asdict, replace
from datetime import datetime, timezone

from kmbench.data.datasets import Dataset
from kmbench.judge import precision, trajectory
from kmbench.protocol import Implementation, Problem, Result, ceilings, clock, explain, reference, validate
from kmbench.protocol.memory import MemoryWatch
from kmbench.protocol.settings import (INITS, Settings, check_settings, check_sizes, choose_start, initial_centroids,
                                       make_problem)
from kmbench.protocol.task import usable
from kmbench.protocol.timing import spread_warning, summarize

# Settings and problems are made in settings.py; callers read them from the runner that uses them.
__all__ = ["INITS", "Settings", "check_settings", "check_sizes", "choose_start", "describe_dataset", "gemm_floor",
           "initial_centroids", "iteration_warnings", "judgement", "make_problem", "run_cell", "usable"]

def describe_dataset(dataset: Dataset) -> dict:
    meta = dataset.meta
    return {
        "name": dataset.name,
        "generator": meta.get("generator"),
        "parameters": meta.get("parameters", {}),
        "n": dataset.n,
        "d": dataset.d,
        "dtype": str(dataset.data.dtype),
        "checksum": meta.get("checksum"),
        "path": str(dataset.path) if dataset.path else None,
    }


def _phase_stats(runs: list[Result]) -> dict:
    names = sorted({name for run in runs for name in run.phases if name != "iterate"})
    return {name: summarize([run.phases[name] for run in runs if name in run.phases]).as_dict()
            for name in names}


class _Cell:
    """Measurements of one implementation on one problem, filled as it runs."""

    def __init__(self):
        self.setup = None
        self.first_run = None
        self.iterate: list[float] = []
        self.wall: list[float] = []
        self.counted: list[Result] = []
        self.stopped_by_budget = False
        self.validation = None


def _timed_run(impl: Implementation, problem: Problem) -> tuple[Result, float]:
    """One run under the harness's own clock; a claimed time that clock rules out raises."""
    result, wall = clock.timed(lambda: impl.run(problem))
    clock.check(impl, problem, result, wall)
    return result, wall


def _measure(impl: Implementation, problem: Problem, settings: Settings, cell: _Cell) -> None:
    start = time.perf_counter()
    impl.prepare(problem)
    cell.setup = time.perf_counter() - start
    if impl.runs_repeats_itself:
        # Native programs repeat inside their own process and report each counted repeat.
        result, wall = _timed_run(impl, problem)
        cell.iterate = list(result.iterate_times or [])
        cell.first_run = result.phases.get("first_run")
        cell.wall = [wall]
        cell.counted = [result]
        cell.stopped_by_budget = len(cell.iterate) < settings.repeats
        return
    for index in range(settings.warmup):
        result, _ = _timed_run(impl, problem)
        if index == 0:
            cell.first_run = result.phases.get("iterate")
    budget_start = time.perf_counter()
    for _ in range(settings.repeats):
        result, wall = _timed_run(impl, problem)
        cell.counted.append(result)
        cell.iterate.append(result.phases.get("iterate", wall))
        cell.wall.append(wall)
        over = settings.max_time is not None and time.perf_counter() - budget_start > settings.max_time
        if over and len(cell.counted) < settings.repeats:
            cell.stopped_by_budget = True
            break


def _judge(cell: _Cell, problem: Problem, oracle: validate.Oracle, impl: Implementation, progress=None):
    """The row's trajectory certified step by step (untimed validation runs), every counted
    repeat's end checked against it; the float64 figures of each repeat beside (the oracle
    remembers the inertia of centroids it has seen); the cell shows the worst."""
    return judgement(cell.counted, oracle, problem, impl, progress), impl.dtype or str(problem.dtype)


def judgement(results: list[Result], oracle: validate.Oracle, problem: Problem,
              impl: Implementation, progress=None) -> validate.Verdict:
    """The verdict of a row's counted results: certified in the precision it declares."""
    # One copy of the data where the judge computes, for the figures and every step.
    xp = reference.array_module(problem.n, problem.k, max((int(result.iterations) for result in results), default=1))
    data = reference.resident(problem.data, xp)
    ends = [validate.figures(result.centroids, oracle, data) for result in results]
    broken = [end for end in ends if end.status != validate.OK]
    if broken:
        return broken[0]
    certificate = trajectory.certify(impl, problem, results, impl.dtype or str(problem.dtype), xp=xp,
                                     progress=progress, data=data)
    return validate.worst([validate.verdict(certificate, end, oracle, impl.approximate) for end in ends])


def _build_info(impl: Implementation) -> dict:
    try:
        return impl.build_info()
    except Exception as exc:
        return {"error": str(exc)}


def _as_followed(impl: Implementation, problem: Problem, oracle) -> tuple[Problem, str]:
    """The problem as this implementation will run it. One that cannot stop by the tolerance
    rule itself gets the oracle's iteration count under the iterations rule: the same work,
    said so in the record and the tables, never silently compared."""
    if problem.tol is None:
        return problem, "own"
    if impl.follows_tolerance(problem.tol):
        return problem, "own"
    return replace(problem, iterations=oracle.iterations, tol=None), "reference count"


def run_cell(impl: Implementation, problem: Problem, oracle: validate.Oracle | None,
             dataset: Dataset, settings: Settings, run_id: str, progress=None) -> dict:
    """Measure and validate one implementation on one problem; never raises."""
    record = {
        "run_id": run_id,
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "impl": impl.name,
        "label": impl.label or impl.name,
        "impl_source": impl.source,
        "dataset": describe_dataset(dataset),
        "params": asdict(settings),
        "seeding": problem.seeding if problem is not None else {},
        "warnings": [],
    }
    ready, why = usable(impl)
    if not ready or problem is None:
        record.update(status=validate.SKIPPED, detail=why or "no problem was made")
        return record
    problem, followed = _as_followed(impl, problem, oracle)
    record["stop"] = {**problem.stop, "followed": followed}
    cell = _Cell()
    watch = MemoryWatch()
    try:
        with watch:  # peak host and GPU memory of prepare and every run
            _measure(impl, problem, settings, cell)
        if not cell.counted or not cell.iterate:
            raise RuntimeError("the implementation returned no counted repeat")
        # What the timed runs did (strategy, filter counts): before validation's one-step runs
        # overwrite it.
        record["build"] = _build_info(impl)
        judging = time.perf_counter()
        verdict, dtype = _judge(cell, problem, oracle, impl, progress)
        cell.validation = time.perf_counter() - judging
    except Exception as exc:
        message = str(exc).strip() or type(exc).__name__
        record.update(status=validate.ERROR, detail=message.splitlines()[0][:500],
                      traceback=traceback.format_exc(limit=6))
        return record
    finally:
        try:
            impl.release()
        except Exception:
            pass
        record.setdefault("build", _build_info(impl))
    last = cell.counted[-1]
    iterate = summarize(cell.iterate)
    iterations = last.iterations
    if verdict.status == validate.MISMATCH:
        reasons = explain.causes(oracle, dtype, last.notes, impl.relocates_empty_clusters, last.iterations)
        verdict = replace(verdict, detail=explain.detail(verdict.detail, reasons))
    record.update(
        status=verdict.status,
        detail=verdict.detail,
        validation={**verdict.as_dict(), "dtype": dtype, "reference_inertia": oracle.inertia},
        iterations_executed=iterations,
        repeats_done=len(cell.iterate),
        stopped_by_budget=cell.stopped_by_budget,
        times={
            "iterate": iterate.as_dict(),
            "wall": summarize(cell.wall).as_dict(),
            "setup": cell.setup,
            "validation": cell.validation,  # untimed: stepping the row and certifying each step
            "setup_phases": impl.setup_phases(),
            "first_run": cell.first_run,
            "phases": _phase_stats(cell.counted),
            "iterate_values": cell.iterate,
        },
        per_iteration_s=iterate.mean / max(1, iterations),
        bytes_per_iteration=impl.bytes_per_iteration(problem),
        roofline_on=impl.roofline_on,
        fp32_per_distance=impl.fp32_per_distance(problem),
        distance_evals_per_s=problem.k * problem.n * iterations / iterate.mean if iterate.mean else None,
        notes=last.notes + explain.empty_cluster_note(oracle, impl.relocates_empty_clusters),
        memory=watch.peaks(),
    )
    if record["bytes_per_iteration"]:
        record["achieved_bandwidth_Bps"] = record["bytes_per_iteration"] / record["per_iteration_s"]
    warning = spread_warning(iterate)
    if warning:
        record["warnings"].append(warning)
    if precision.narrower(dtype, str(problem.dtype)):  # --dtype float64 does not make it compute so
        record["warnings"].append(f"computes in {dtype} on {problem.dtype} data: judged by {dtype}'s bounds")
    record["reference_iterations"] = oracle.iterations
    record["warnings"] += iteration_warnings(iterations, oracle.iterations, record["stop"]["followed"])
    return record


def iteration_warnings(executed: int, reference: int, followed: str) -> list[str]:
    """What a row's iteration count means for its times, in the words the tables use
    (export.iterations_text): given the reference's count, and/or stopped early."""
    given = followed == "reference count"
    if executed == reference:
        return ["cannot stop by the tolerance rule itself: given the reference's count"] if given else []
    head = "given the reference's count, " if given else ""
    return [f"{head}stopped early: ran {executed} of {reference} iterations; compare it per iteration"]


def gemm_floor(problem: Problem, env: dict) -> dict | None:
    """cuBLAS's FP32 and TF32 GEMM of a high-d cell's shape on this machine's GPU (ceilings.py),
    every row's yardstick in the report; None for low-d cells or without a GPU."""
    if problem.d <= ceilings.HIGH_DIM or not env.get("gpu"):
        return None
    return ceilings.gemm_floor(problem.n, problem.d, problem.k)
