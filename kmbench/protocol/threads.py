"""The thread count a row that takes one (Implementation.takes_threads) runs its counted runs at,
chosen in this one place for every such row: the count the user forced (`run --threads N`,
$KMBENCH_THREADS), or else the count where the row is fastest on this very cell.

Every core is no row's best by default: on a 64-core machine scikit-learn's KMeans at 1e5 x 2,
k = 5 took 1.59 / 1.20 / 1.42 / 2.26 / 7.28 ms per iteration at 1 / 4 / 16 / 32 / 64 threads
(issue 59), so at every core it was the strawman every "vs scikit-learn" flattered 5-27x. The
calibration, after the row's prepare and before its warm-up:

    ladder      1, 2, 4, ... up to the cores this process may use (the cores themselves last)
    a count     a few runs of a few iterations of the cell's own problem (the same data and the
                same start), under the count: the row's Problem.options.threads (kmbench-cpu's
                program reads it) and threadpoolctl's limit on this process's BLAS and OpenMP
                pools (numpy, scikit-learn, faiss-cpu); its time is its fastest run's claimed
                time per iteration executed
    stop        at the second count in a row slower than the fastest so far (one slower count is
                not enough: on a 16-core H200 scikit-learn took 1.12 / 1.42 / 0.95 / 0.82 ms per
                iteration at 1 / 2 / 4 / 8 threads), at the cores, or at CAP_S
    choice      the fastest count seen (the fewer threads on a tie)

Its runs are untimed, uncounted and unjudged: the counted runs that follow, at the chosen count,
are measured and judged as any others. The record keeps what was tried (`thread_choice`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field, replace

from kmbench.data.records import THREADS_FASTEST, THREADS_FORCED
from kmbench.protocol import Problem, clock

RUN_TARGET_S = 0.05  # a calibration run lasts at least this long (its iterations sized to it) ...
GROWTH = 1.5  # ... and this many times as long as one of half its iterations ...
LONG_RUN_S = 0.25  # ... or at least this long
RUNS_PER_COUNT = 3  # runs at each count, the fastest kept (the first may start the threads) ...
COUNT_BUDGET_S = 0.5  # ... fewer where they pass this: one run of a slow cell is timed well
CAP_S = 30.0  # no count is started after the calibration has taken this long
PATIENCE = 2  # slower counts in a row that end the climb


def usable_cores() -> int:
    """The cores this process may run on (its affinity), else every core the machine has."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def ladder(cores: int) -> list[int]:
    """1, 2, 4, ... below `cores`, then `cores` itself: 1, 2, 4, 6 on six cores."""
    counts = [1 << power for power in range(max(1, cores).bit_length()) if 1 << power < cores]
    return counts + [max(1, cores)]


@dataclass
class ThreadChoice:
    """The count a row's counted runs ran at, and how it was chosen (the record's `thread_choice`)."""

    count: int
    how: str  # THREADS_FORCED (--threads) or THREADS_FASTEST (the calibration's)
    cores: int  # the cores this process could use
    tried: list[tuple[int, float]] = field(default_factory=list)  # (count, seconds per iteration)
    iterations: int | None = None  # of each calibration run
    seconds: float | None = None  # the calibration's wall time, outside every timed region
    stopped: str = ""  # why the ladder ended

    def as_dict(self) -> dict:
        out = {"count": self.count, "how": self.how, "cores": self.cores}
        if self.how == THREADS_FASTEST:
            out.update(tried=[[count, seconds] for count, seconds in self.tried], iterations=self.iterations,
                       seconds=self.seconds, stopped=self.stopped)
        return out


def limit(count: int | None):
    """Around a row's runs: the BLAS and OpenMP pools of this process limited to `count`
    (threadpoolctl), so the count reaches the rows computing here (numpy's BLAS, scikit-learn's
    and faiss's OpenMP) as Problem.options.threads reaches kmbench-cpu's program. The judge's
    runs are untimed and keep every core."""
    if count is None:
        return nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=count)


def at_count(problem, count: int):
    """The problem with its rows' thread count set to `count`."""
    return replace(problem, options=replace(problem.options, threads=count))


def climb(per_iteration: Callable[[int], float], cores: int, cap_s: float = CAP_S,
          now: Callable[[], float] = time.perf_counter) -> tuple[int, list[tuple[int, float]], str]:
    """(the fastest count, every (count, seconds per iteration) tried, why the climb ended):
    up the ladder, per_iteration(count) at each rung, to the PATIENCE-th rung in a row slower than
    the fastest so far, the cores, or `cap_s` seconds."""
    start, tried, best, slower = now(), [], None, []
    for count in ladder(cores):
        if tried and now() - start > cap_s:
            return best[0], tried, f"the calibration's cap of {cap_s:g} s"
        seconds = per_iteration(count)
        tried.append((count, seconds))
        if best is not None and seconds > best[1]:
            slower.append(count)
            if len(slower) == PATIENCE:
                return best[0], tried, "slower at " + " and ".join(map(str, slower))
            continue
        slower = []
        if best is None or seconds < best[1]:
            best = (count, seconds)
    return best[0], tried, "reached the cores"


def choose(task, impl, problem) -> tuple[object, ThreadChoice | None]:
    """(the problem the counted runs are handed, how its count was chosen): unchanged and None
    for a row that takes no count, or a problem that is not Lloyd's; the count forced where the
    options name one; else the fastest by the calibration, run here (the row already prepared)."""
    if not impl.takes_threads or not isinstance(problem, Problem):
        return problem, None
    cores = usable_cores()
    if problem.options.threads is not None:
        return problem, ThreadChoice(problem.options.threads, THREADS_FORCED, cores)
    started = time.perf_counter()
    trial = _Trial(task, impl, problem)
    count, tried, stopped = climb(trial.per_iteration, cores)
    choice = ThreadChoice(count, THREADS_FASTEST, cores, tried, trial.iterations,
                          time.perf_counter() - started, stopped)
    return at_count(problem, count), choice


class _Trial:
    """The calibration's runs of one row on one problem. At the first count: a warm-up run (the
    process's first call of a row pays its imports and caches), then runs that size the
    iterations of every later run (about RUN_TARGET_S each, so the row's fixed cost per call
    weighs little); then per_iteration(count) times a few runs at each count."""

    def __init__(self, task, impl, problem: Problem):
        self.task, self.impl, self.problem = task, impl, problem
        self.native = impl.runs_repeats_itself
        self.iterations: int | None = None
        self.repeats = RUNS_PER_COUNT  # runs at each count: one where a run is slow

    def _call(self, count: int, iterations: int, repeats: int = 1) -> list[float]:
        """One call at `count`: the row's claimed seconds per iteration executed, of each of the
        `repeats` runs a native program makes in its own process (after a warm-up run of its
        own: each process starts cold), else of the one run."""
        repeats = repeats if self.native else 1
        # The iterations rule, no trace, no budget: the same work at every count.
        problem = replace(at_count(self.problem, count), iterations=iterations, tol=None, trace=False,
                          warmup=1, repeats=repeats, max_time=None)
        with limit(count):
            result, wall = clock.timed(lambda: self.impl.run(problem))
        claims = self.task.claims(self.impl, problem, result, wall) or [wall]  # a row that times nothing: the wall
        return [claim / max(1, int(result.iterations)) for claim in claims]

    def _size(self, count: int) -> None:
        """The iterations of a calibration run, doubled from 1 up to the problem's until a run is
        long (LONG_RUN_S), or takes RUN_TARGET_S and GROWTH times the run of half its iterations:
        the iterations then weigh at least as much as the row's fixed cost per call (scikit-learn's
        fit took 57 ms for 1 iteration and 64 ms for 2 on a busy machine), so that cost, the same
        at every count, does not drown the differences between counts."""
        if not self.native:
            self._call(count, 1)  # the warm-up (each native call warms up in its own process)
        iterations, most, previous = 1, self.problem.iterations, None
        while True:
            run_s = min(self._call(count, iterations)) * iterations
            grew = previous is not None and run_s >= GROWTH * previous
            if iterations >= most or run_s >= LONG_RUN_S or (run_s >= RUN_TARGET_S and grew):
                break
            previous, iterations = run_s, min(most, 2 * iterations)
        self.iterations = iterations
        if (RUNS_PER_COUNT + 1) * run_s > COUNT_BUDGET_S:
            self.repeats = 1  # a slow cell: one run of it is timed well enough

    def per_iteration(self, count: int) -> float:
        if self.iterations is None:
            self._size(count)
        if self.native:
            return min(self._call(count, self.iterations, self.repeats))
        seconds: list[float] = []
        while len(seconds) < self.repeats and (not seconds or sum(seconds) * self.iterations < COUNT_BUDGET_S):
            seconds += self._call(count, self.iterations)
        return min(seconds)
