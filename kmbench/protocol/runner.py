"""Lloyd's measuring and judging under the fair protocol: the same problem for everyone, warm-up,
counted repeats, validation, one record per cell; a cell that fails becomes a record with
status `error` and the run goes on.

LloydProtocol fills the task interface's measuring part (kmbench.protocol.task) for Lloyd, and
the one loop (kmbench.protocol.measure) measures it as it measures every task. The task that
adds its tables, kmbench.tasks.lloyd's LloydTask, sits above report in the layering (a view is
drawn with report's pieces, and the protocol may not import report)."""

from __future__ import annotations

from dataclasses import asdict, replace

from kmbench.data.datasets import Dataset
from kmbench.judge import precision, trajectory
from kmbench.protocol import (Implementation, Options, Problem, Result, ceilings, clock, explain, oracles, overflow,
                              reference, validate)
from kmbench.protocol.measure import Counting, Measured
from kmbench.protocol.settings import (INITS, RUN_BUDGET_S, RUN_MIN_REPEATS, Settings, check_settings, check_sizes,
                                       choose_start, initial_centroids, make_problem)
from kmbench.protocol.task import Task, cell_record, usable
from kmbench.protocol.statistics import summarize

# Settings and problems are made in settings.py; callers read them from the runner that uses them.
__all__ = ["INITS", "LloydProtocol", "RUN_BUDGET_S", "RUN_MIN_REPEATS", "Settings", "check_settings", "check_sizes", "choose_start", "describe_dataset",
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


def judgement(results: list[Result], oracle: validate.Oracle, problem: Problem,
              impl: Implementation, progress=None, trace: Result | None = None) -> validate.Verdict:
    """The verdict of a row's counted results: certified in the precision it declares.
    trace: the row's traced run, where it was made as the warm-up (else the judge makes it)."""
    broken = [end for end in (validate.malformed(result.centroids, oracle) for result in results) if end]
    if broken:
        return broken[0]
    # The data where the judge computes, shared with the reference and every other verdict on
    # this problem (the oracle keeps them until released); the pools' spare blocks given back.
    iterations = max((int(result.iterations) for result in results), default=1)
    space = oracle.workspace_for(problem.data, reference.judge_module(problem.data, problem.k, iterations))
    try:
        certificate = trajectory.certify(impl, problem, results, impl.dtype or str(problem.dtype), xp=space.xp,
                                         progress=progress, data=space.data, bank=oracle.seeds,
                                         spread=oracle.spread, geometry=space.geometry, traced=trace)
        oracle.remember(certificate.inertias)
        ends = [validate.figures(result.centroids, oracle, problem.data) for result in results]
        return validate.worst([validate.verdict(certificate, end, oracle, impl.approximate) for end in ends])
    finally:
        reference.release(space.xp)


class LloydProtocol(Task):
    """Lloyd's algorithm under the fair protocol, as the one loop measures it: a workload is a
    dataset; the settings (k, iterations, stop rule, start) and the rows' options are the same
    for every row. The oracle comes from the cache under `data_dir` where an earlier run left it."""

    name = "lloyd"

    def __init__(self, settings: Settings | None = None, data_dir=None, options: Options = Options()):
        """settings: what every cell runs (not needed to render records)."""
        self.settings, self.data_dir, self.options = settings, data_dir, options

    def describe(self, dataset: Dataset, problem: Problem | None = None) -> dict:
        return {"dataset": describe_dataset(dataset), "params": asdict(self.settings),
                "seeding": problem.seeding if problem is not None else {}}

    def workload_name(self, dataset: Dataset) -> str:
        return f"{dataset.name}, k={self.settings.k}"  # a sweep runs one dataset at several k

    def problem(self, dataset: Dataset) -> Problem:
        return make_problem(dataset, self.settings, self.options)

    def oracle(self, dataset: Dataset, problem: Problem, progress=None) -> validate.Oracle:
        if progress:
            progress("float64 reference")
        oracle = oracles.get(dataset, problem, self.data_dir, progress=progress)[0]
        if progress:  # the stage it is in now, not the reference's last iteration (issue 34)
            progress("timed runs")
        return oracle

    def counting(self, impl: Implementation, problem: Problem) -> Counting:
        return self.settings.counting()

    def trace_problem(self, impl: Implementation, problem: Problem) -> Problem | None:
        """A row that reports its trajectory (`traces`) warms up with the judge's trace run."""
        return replace(problem, trace=True) if impl.traces else None

    def cannot(self, impl: Implementation, problem: Problem) -> str | None:
        """Points or squared distances the row's precision cannot hold (kmbench.protocol.overflow)."""
        return overflow.cannot_hold(problem.data, problem.initial_centroids, impl.dtype or str(problem.dtype))

    def label(self, impl: Implementation, problem: Problem | None) -> str:
        """A row that takes a thread count is named by the count asked for, so a scaling run's rows differ."""
        label = super().label(impl, problem)
        threads = problem.options.threads if problem is not None and impl.takes_threads else None
        return f"{label} ({threads} thread{'' if threads == 1 else 's'})" if threads else label

    def followed(self, impl: Implementation, problem: Problem, oracle) -> tuple[Problem, dict]:
        """The problem as this implementation will run it. One that cannot stop by the tolerance
        rule itself gets the oracle's iteration count under the iterations rule: the same work,
        said so in the record and the tables, never silently compared."""
        if problem.tol is None or impl.follows_tolerance(problem.tol):
            return problem, {"stop": {**problem.stop, "followed": "own"}}
        given = replace(problem, iterations=oracle.iterations, tol=None)
        return given, {"stop": {**given.stop, "followed": "reference count"}}

    def claims(self, impl: Implementation, problem: Problem, result: Result, wall: float) -> list[float]:
        """Its iterate times, checked against the wall clock and the physical floor."""
        clock.check(impl, problem, result, wall)
        return clock.claims_of(result)

    def judge(self, results: list[Result], oracle: validate.Oracle, problem: Problem, impl: Implementation,
              progress=None, trace: Result | None = None) -> validate.Verdict:
        """The row's trajectory certified step by step (untimed validation runs), every counted
        repeat's end checked against it; the float64 figures of each repeat beside (the oracle
        remembers the inertia of centroids it has seen); the cell shows the worst."""
        return judgement(results, oracle, problem, impl, progress, trace)

    def fields(self, impl: Implementation, problem: Problem, oracle: validate.Oracle, measured: Measured,
               verdict: validate.Verdict) -> dict:
        last = measured.counted[-1]
        iterate = summarize(measured.times)
        iterations = last.iterations
        dtype = impl.dtype or str(problem.dtype)
        if verdict.status == validate.MISMATCH:
            reasons = explain.causes(oracle, dtype, last.notes, impl.relocates_empty_clusters, last.iterations,
                                     known=[overflow.expanded_cause(problem.data, dtype)])
            verdict = replace(verdict, detail=explain.detail(verdict.detail, reasons))
        fields = dict(
            status=verdict.status,
            detail=verdict.detail,
            validation={**verdict.as_dict(), "dtype": dtype, "reference_inertia": oracle.inertia},
            iterations_executed=iterations,
            repeats_done=len(measured.times),
            stopped_by_budget=measured.stopped_by_budget,
            times={
                "iterate": iterate.as_dict(),
                "wall": summarize(measured.wall).as_dict(),
                "setup": measured.setup,
                "validation": measured.validation,  # untimed: stepping the row and certifying each step
                "row_calls": measured.row_calls,  # the warm-up and counted runs, on the harness's clock
                "setup_phases": impl.setup_phases(),
                "first_run": measured.first_run,
                "phases": _phase_stats(measured.counted),
                "iterate_values": measured.times,
            },
            per_iteration_s=iterate.mean / max(1, iterations),
            bytes_per_iteration=impl.bytes_per_iteration(problem),
            roofline_on=impl.roofline_on,
            fp32_per_distance=impl.fp32_per_distance(problem),
            arithmetic=ceilings.declared_arithmetic(impl.arithmetic(problem)),
            distance_evals_per_s=problem.k * problem.n * iterations / iterate.mean if iterate.mean else None,
            notes=last.notes + explain.empty_cluster_note(oracle, impl.relocates_empty_clusters),
            memory=measured.memory,
        )
        if fields["bytes_per_iteration"]:
            fields["achieved_bandwidth_Bps"] = fields["bytes_per_iteration"] / fields["per_iteration_s"]
        fields["reference_iterations"] = oracle.iterations
        fields["warnings"] = iteration_warnings(iterations, oracle.iterations, measured.followed["stop"]["followed"])
        if precision.narrower(dtype, str(problem.dtype)):  # --dtype float64 does not make it compute so
            fields["warnings"].append(f"computes in {dtype} on {problem.dtype} data: judged by {dtype}'s bounds")
        return fields


def run_cell(impl: Implementation, problem: Problem, oracle: validate.Oracle | None, dataset: Dataset,
             settings: Settings, run_id: str, progress=None) -> dict:
    """Measure and validate one implementation on one problem (the problem as given: its
    options too); never raises."""
    return cell_record(LloydProtocol(settings), impl, problem, oracle, dataset, run_id, progress)


def iteration_warnings(executed: int, reference: int, followed: str) -> list[str]:
    """What a row's iteration count means for its times, in the words the tables use
    (export.iterations_text): given the reference's count, and/or stopped early."""
    given = followed == "reference count"
    if executed == reference:
        return ["cannot stop by the tolerance rule itself: given the reference's count"] if given else []
    head = "given the reference's count, " if given else ""
    return [f"{head}stopped early: ran {executed} of {reference} iterations; compare it per iteration"]
