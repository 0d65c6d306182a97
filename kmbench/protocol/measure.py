"""The one measuring loop, for every task: one implementation on one problem, never raising.

    setup        prepare(problem), timed on the harness's clock (compile, build, upload)
    threads      a row that takes a thread count runs at the count forced, or else at its
                 fastest, found by a short calibration here (kmbench.protocol.threads): untimed,
                 uncounted, unjudged
    warm-up      uncounted runs (compilation, JIT, caches); the first one's time is kept. Where
                 the task makes one (Task.trace_problem: a row that `traces`), the first is the
                 judge's untimed trace run, kept for the judge: no row runs an extra time to warm up
    counted      `repeats` runs, or fewer where the time budget (`max_time`) runs out, never fewer
                 than `min_repeats`; a row that repeats inside its own process (native programs)
                 is called once
    clock check  every run under the harness's own clock, GPU synchronised on both sides; what
                 the row claims for its timed region is checked against it (the task says how)
    memory       peak host and GPU memory of prepare and every run
    judge        every counted result, by the task's judge, untimed
    release      always, whatever happened before
    errors       anything raised becomes the record's `error` status, one sentence and a traceback

The task (kmbench.protocol.task.Task) supplies what differs: how many runs, what a run claims,
how it is judged, and which record fields its measurements make.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field

from kmbench.protocol import clock, threads, usable, validate
from kmbench.protocol.gpu_state import GpuWatch, notes as gpu_notes
from kmbench.protocol.memory import MemoryWatch
from kmbench.protocol.statistics import spread_warning, summarize


@dataclass(frozen=True)
class Counting:
    """How many runs a cell makes."""

    warmup: int = 1
    repeats: int = 5
    max_time: float | None = None  # seconds of counted runs after which the cell stops repeating
    min_repeats: int = 1  # counted runs made whatever the budget (hyperfine's rule: `run` asks 3)

    def least(self) -> int:
        """The counted runs a budget cannot cut: min_repeats, or every one asked for if fewer."""
        return min(max(1, self.min_repeats), self.repeats)

    def counted_seconds(self, run: float) -> float:
        """Seconds of counted runs, each `run` seconds long: every repeat, or under a budget as
        many as it lets start (the one that overshoots it included), never fewer than least()."""
        if self.max_time is None:
            return self.repeats * run
        return min(self.repeats * run, max(self.least() * run, self.max_time + run))


@dataclass
class Measured:
    """What the loop saw of one implementation on one problem."""

    setup: float | None = None  # seconds of prepare
    first_run: float | None = None  # the first warm-up run's claimed time (a cold start)
    times: list[float] = field(default_factory=list)  # each counted repeat's claimed time
    wall: list[float] = field(default_factory=list)  # the harness's clock around each counted call
    counted: list = field(default_factory=list)  # the result of each counted call
    stopped_by_budget: bool = False
    trace: object = None  # the row's traced warm-up run (a Result), handed to the judge
    validation: float | None = None  # seconds the judge took (untimed)
    row_calls: float = 0.0  # seconds of the row's timed work: its warm-up and counted calls, wall clock
    memory: dict = field(default_factory=dict)  # {"host_bytes", "gpu_bytes"}: peaks above the start
    followed: dict = field(default_factory=dict)  # what task.followed said of the problem as run


def error_fields(exc: Exception) -> dict:
    message = str(exc).strip() or type(exc).__name__
    return {"status": validate.ERROR, "detail": message.splitlines()[0][:500],
            "traceback": traceback.format_exc(limit=6)}


def build_info(impl) -> dict:
    try:
        return impl.build_info()
    except Exception as exc:
        return {"error": str(exc)}


def measure_cell(task, impl, problem, oracle, progress=None) -> dict:
    """One cell's record fields (the header aside); `problem` is None where no row could run
    yet, and then `impl` cannot either: the record says so. progress(text): the judge's steps."""
    record: dict = {"warnings": []}
    ready, why = usable(impl)
    if not ready or problem is None:
        return {**record, "status": validate.SKIPPED, "detail": why or "no problem was made"}
    refused = impl.unsuited(problem)
    if refused:
        return {**record, "status": validate.SKIPPED, "detail": refused}
    measured = Measured()
    problem, measured.followed = task.followed(impl, problem, oracle)
    record.update(measured.followed)
    if hasattr(oracle, "make_room"):
        oracle.make_room()  # the judge's GPU memory for this problem, given back where a row may need it
    watch = MemoryWatch()
    choice = None
    gpus = GpuWatch(impl, problem)  # the clocks and other programs of the GPUs it runs on
    try:
        with watch:
            _prepare(impl, problem, measured)
            problem, choice = threads.choose(task, impl, problem)
            with threads.limit(choice.count if choice else None):
                _runs(task, impl, problem, task.counting(impl, problem), measured, getattr(progress, "expect", None),
                      gpus.before)
            gpus.after()
        record.update(gpus.fields())
        record["warnings"] += gpu_notes(record.get("gpu_state"))
        if not measured.counted or not measured.times:
            raise RuntimeError("the implementation returned no counted repeat")
        # What the timed runs did (strategy, filter counts): before the judge's runs overwrite it.
        record["build"] = build_info(impl)
        if choice is not None:
            record["build"]["threads"] = choice.count  # the count its timed runs were held to
        judging = time.perf_counter()
        verdict = task.judge(measured.counted, oracle, problem, impl, progress, trace=measured.trace)
        measured.validation = time.perf_counter() - judging
    except Exception as exc:
        record.update(error_fields(exc))
        return record  # with the build information `finally` adds
    finally:
        try:
            impl.release()
        except Exception:
            pass
        record.setdefault("build", build_info(impl))
        if choice is not None:
            record["thread_choice"] = choice.as_dict()
    measured.memory = watch.peaks()
    warning = spread_warning(summarize(measured.times))
    if warning:
        record["warnings"].append(warning)
    fields = task.fields(impl, problem, oracle, measured, verdict)
    record["warnings"] += fields.pop("warnings", [])
    record.update(fields)
    return record


def _prepare(impl, problem, measured: Measured) -> None:
    """The setup phase: prepare(problem) on the harness's clock."""
    start = time.perf_counter()
    impl.prepare(problem)
    measured.setup = time.perf_counter() - start


def _timed_run(task, impl, problem):
    """(result, wall seconds, the times it claims): one run under the harness's clock."""
    result, wall = clock.timed(lambda: impl.run(problem))
    return result, wall, task.claims(impl, problem, result, wall)


def _still_to_time(counting: Counting, wall: float) -> float:
    """Seconds the cell's other warm-up and counted runs should take, each as long as the first."""
    return (counting.warmup - 1) * wall + counting.counted_seconds(wall)


def _warm_up(task, impl, problem, counting: Counting, measured: Measured, expect=None) -> None:
    """The uncounted runs. The first is the judge's trace run where the task makes one: it
    compiles, fills caches and touches memory as any warm-up does, and the judge then needs no
    run of its own (the trajectory is the same row's on the same problem). Its time is kept as
    the cold start, as the first warm-up's always was; no warm-up is counted or timed for the
    table, so the counted runs' region is unchanged."""
    traced = task.trace_problem(impl, problem)
    for index in range(counting.warmup):
        given = traced if index == 0 and traced is not None else problem
        result, wall, claims = _timed_run(task, impl, given)
        measured.row_calls += wall
        if given is traced:
            measured.trace = result
        if index == 0:
            measured.first_run = claims[0] if claims else None
            if expect is not None:
                expect(_still_to_time(counting, wall), wall)


def _runs(task, impl, problem, counting: Counting, measured: Measured, expect=None, before_counted=None) -> None:
    """expect(seconds, warm-up seconds): told, after the first warm-up run, how long the rest of
    the timed runs should take (kmbench.progress says so where that is long); before_counted():
    called just before the counted runs (the GPUs' clocks are read there). The row is prepared."""
    if impl.runs_repeats_itself:
        # Native programs repeat inside their own process and report each counted repeat.
        if before_counted:
            before_counted()
        result, wall, claims = _timed_run(task, impl, problem)
        measured.times, measured.wall, measured.counted = list(claims), [wall], [result]
        measured.row_calls = wall
        measured.first_run = result.phases.get("first_run")
        measured.stopped_by_budget = len(claims) < counting.repeats
        return
    _warm_up(task, impl, problem, counting, measured, expect)
    if before_counted:
        before_counted()
    budget_start = time.perf_counter()
    for _ in range(counting.repeats):
        result, wall, claims = _timed_run(task, impl, problem)
        measured.counted.append(result)
        measured.times.append(claims[0] if claims else wall)  # a row that times nothing: the wall
        measured.wall.append(wall)
        measured.row_calls += wall
        over = counting.max_time is not None and time.perf_counter() - budget_start > counting.max_time
        if over and counting.least() <= len(measured.counted) < counting.repeats:
            measured.stopped_by_budget = True
            break
