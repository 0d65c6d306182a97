"""Each row that takes a thread count at its fastest count by default (issue 59, build 3;
kmbench.protocol.threads): the ladder, the climb that stops at the first slower count, the
calibration inside a cell (the same problem, uncounted, unjudged), `--threads N` forcing N,
and the record, report note and run line that name the count. Timing is mocked: the fake row
claims a time per iteration set by the thread count it is handed (and sleeps as long, so the
harness's clock holds the claim), so no outcome rests on how fast this machine is."""

import time
from dataclasses import replace

import numpy as np
import pytest

from impls.cpu.numpy_fast import NumpyFast
from kmbench.cli.output import chosen_threads_line
from kmbench.data import cells
from kmbench.protocol import Options, runner, threads, validate
from kmbench.report import lloyd_markdown, report
from tests.conftest import blob_data, memory_problem

# Issue 59's scikit-learn on a 64-core machine, ms per iteration (2 and 8 filled in between).
SKLEARN_64 = {1: 1.59e-3, 2: 1.35e-3, 4: 1.20e-3, 8: 1.25e-3, 16: 1.42e-3, 32: 2.26e-3, 64: 7.28e-3}


def test_the_ladder_doubles_up_to_the_cores_and_ends_at_them():
    assert threads.ladder(1) == [1]
    assert threads.ladder(2) == [1, 2]
    assert threads.ladder(6) == [1, 2, 4, 6]
    assert threads.ladder(64) == [1, 2, 4, 8, 16, 32, 64]


def _asking(times: dict):
    asked = []

    def per_iteration(count):
        asked.append(count)
        return times[count]

    return per_iteration, asked


def test_the_climb_keeps_the_fastest_count_and_stops_at_the_second_slower_one_in_a_row():
    per_iteration, asked = _asking(SKLEARN_64)
    count, tried, stopped = threads.climb(per_iteration, 64)
    assert count == 4 and asked == [1, 2, 4, 8, 16] and stopped == "slower at 8 and 16"
    assert tried == [(one, SKLEARN_64[one]) for one in (1, 2, 4, 8, 16)]


def test_one_slower_count_does_not_end_the_climb_and_two_in_a_row_do():
    """A 16-core H200 ran scikit-learn slower at 2 threads than at 1, and fastest at 8: a climb that
    stopped at the first slower count would have kept 1, 1.37x slower than its best."""
    per_iteration, asked = _asking({1: 1.12, 2: 1.42, 4: 0.95, 8: 0.82, 16: 1.10})
    assert threads.climb(per_iteration, 16)[0] == 8 and asked == [1, 2, 4, 8, 16]
    per_iteration, asked = _asking({1: 4.0, 2: 5.0, 4: 6.0, 8: 1.0})
    assert threads.climb(per_iteration, 8)[0] == 1 and asked == [1, 2, 4]


def test_a_row_that_scales_climbs_to_the_cores_and_a_tie_keeps_the_fewer_threads():
    count, tried, stopped = threads.climb(lambda count: 1.0 / count, 6)
    assert count == 6 and [one for one, _ in tried] == [1, 2, 4, 6] and stopped == "reached the cores"
    assert threads.climb(lambda count: 1.0, 4)[0] == 1


def test_the_cap_ends_the_climb_at_the_fastest_count_so_far():
    clock = [0.0]

    def per_iteration(count):
        clock[0] += 20.0  # each count takes 20 s of the cap's clock
        return 1.0 / count

    count, tried, stopped = threads.climb(per_iteration, 64, cap_s=30.0, now=lambda: clock[0])
    assert count == 2 and [one for one, _ in tried] == [1, 2] and "cap" in stopped


class ThreadBound(NumpyFast):
    """numpy's correct Lloyd, claiming PER_ITERATION[its thread count] seconds an iteration (and
    sleeping as long); every call logged: (threads, iterations, traced, start)."""

    name = label = "thread-bound"
    PER_ITERATION = {1: 4e-4, 2: 2e-4, 4: 1e-4, 8: 3e-4, 16: 6e-4}

    def __init__(self):
        self.calls = []

    def run(self, problem):
        result = super().run(problem)
        count = problem.options.threads
        self.calls.append((count, problem.iterations, problem.trace, problem.initial_centroids.copy()))
        claimed = self.PER_ITERATION[count] * result.iterations
        time.sleep(claimed)
        result.phases["iterate"] = claimed
        return result


def _cell(impl, options=None, repeats=2, warmup=1):
    data = blob_data(np.random.default_rng(3), n=500, k=3)
    dataset, settings, problem = memory_problem(data, 3, 20, repeats=repeats, warmup=warmup)
    problem = replace(problem, options=options or Options())
    oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, 20)
    return problem, runner.run_cell(impl, problem, oracle, dataset, settings, "t")


@pytest.fixture
def sixteen_cores(monkeypatch):
    monkeypatch.setattr(threads, "usable_cores", lambda: 16)


def test_a_cell_runs_at_the_count_where_its_row_is_fastest_and_the_record_says_how(sixteen_cores):
    row = ThreadBound()
    problem, record = _cell(row, repeats=2, warmup=1)
    assert record["status"] == "ok", record["detail"]
    choice = record["thread_choice"]
    assert (choice["count"], choice["how"], choice["cores"]) == (4, "fastest", 16)
    assert [count for count, _ in choice["tried"]] == [1, 2, 4, 8, 16] and choice["stopped"] == "slower at 8 and 16"
    assert [seconds for _, seconds in choice["tried"]] == pytest.approx([4e-4, 2e-4, 1e-4, 3e-4, 6e-4])
    assert choice["iterations"] >= 1 and choice["seconds"] > 0
    assert record["build"]["threads"] == 4
    # Every call after the calibration's last count (16) ran at 4: the warm-up, the counted
    # repeats and the judge's untimed traced run.
    counts = [count for count, *_ in row.calls]
    after = counts[len(counts) - counts[::-1].index(16):]
    assert set(after) == {4} and len(after) >= 1 + 2
    # Only the counted runs are timed: two repeats of 20 iterations at 4 threads.
    assert record["repeats_done"] == 2
    assert record["times"]["iterate_values"] == pytest.approx([20 * 1e-4] * 2)
    # The same problem throughout: the calibration's runs started where the counted ones did.
    for _, _, _, start in row.calls:
        np.testing.assert_array_equal(start, problem.initial_centroids)
    assert record["label"] == "thread-bound"  # the label names no count the user did not ask for


def test_threads_forced_by_the_user_are_run_as_given_without_calibrating(sixteen_cores):
    row = ThreadBound()
    _, record = _cell(row, options=Options(threads=2))
    assert record["status"] == "ok", record["detail"]
    assert record["thread_choice"] == {"count": 2, "how": "forced", "cores": 16}
    assert {count for count, *_ in row.calls} == {2} and record["build"]["threads"] == 2
    assert record["label"] == "thread-bound (2 threads)"


class WrongAtItsBest(ThreadBound):
    """Wrong in every untraced run at 4 threads, its fastest count: the counted runs are judged."""

    name = "wrong-at-its-best"

    def run(self, problem):
        result = super().run(problem)
        if problem.options.threads == 4 and not problem.trace:
            result.centroids = result.centroids + 0.5
        return result


class WrongWhileCalibrating(ThreadBound):
    """Wrong only at 8 threads, a count the calibration tries and does not choose."""

    name = "wrong-while-calibrating"

    def run(self, problem):
        result = super().run(problem)
        if problem.options.threads == 8:
            result.centroids = result.centroids + 0.5
        return result


def test_the_counted_runs_at_the_chosen_count_are_judged_and_the_calibration_runs_are_not(sixteen_cores):
    assert _cell(WrongAtItsBest())[1]["status"] == "mismatch"
    record = _cell(WrongWhileCalibrating())[1]
    assert record["status"] == "ok" and record["thread_choice"]["count"] == 4


def test_a_row_that_takes_no_count_is_not_calibrated():
    class OneThread(ThreadBound):
        name = "one-thread"
        takes_threads = False
        PER_ITERATION = {None: 1e-4}

    row = OneThread()
    record = _cell(row)[1]
    assert "thread_choice" not in record and {count for count, *_ in row.calls} == {None}


def _record(impl, per_iteration, count, how="fastest", cores=64, tried=None):
    choice = {"count": count, "how": how, "cores": cores}
    if how == "fastest":
        choice.update(tried=tried or [[count, per_iteration]], iterations=20, seconds=0.5, stopped="slower at 8")
    return {"impl": impl, "label": {"sklearn": "scikit-learn"}.get(impl, impl), "status": "ok",
            "dataset": {"name": "b", "n": 100_000, "d": 2, "dtype": "float32", "generator": "blobs"},
            "params": {"k": 5, "iterations": 300, "init": "random", "seed": 0}, "iterations_executed": 300,
            "per_iteration_s": per_iteration, "times": {"iterate": {"mean": 300 * per_iteration}},
            "build": {"threads": count}, "thread_choice": choice, "warnings": []}


SKLEARN_TRIED = [[1, 1.59e-3], [2, 1.35e-3], [4, 1.20e-3], [8, 1.25e-3]]


def test_the_report_names_the_chosen_count_and_holds_rows_against_scikit_learn_at_its_best():
    stored = [_record("sklearn", 1.35e-3, 2, how="forced"), _record("sklearn", 1.20e-3, 4, tried=SKLEARN_TRIED),
              _record("numpy", 0.6e-3, 2)]
    frame = report.cells_frame(stored)
    numpy = frame[frame["impl"] == "numpy"].iloc[0]
    # numpy ran at 2 threads as its best, not as a count asked for: against scikit-learn's best
    # (4 threads, 1.20 ms), not scikit-learn forced to 2 (1.35 ms).
    assert numpy["speedup_per_iter_vs_sklearn"] == pytest.approx(2.0)
    text = "\n".join(lloyd_markdown.page(frame).splitlines())
    assert ("- scikit-learn (n=100,000): at 4 of 64 threads, its fastest (per iteration at 1: 1.590ms, "
            "2: 1.350ms, 4: 1.200ms, 8: 1.250ms)") in text
    assert "- numpy (n=100,000): at 2 of 64 threads, its fastest" in text
    assert "scikit-learn (n=100,000): at 2" not in text  # a forced count is in the label, not a note


def test_a_calibrated_cell_is_one_cell_whatever_count_won_and_a_forced_count_another():
    first, second = _record("sklearn", 1.2e-3, 4), _record("sklearn", 1.3e-3, 2)
    forced = _record("sklearn", 1.2e-3, 4, how="forced")
    assert cells.cell_of(first) == cells.cell_of(second) != cells.cell_of(forced)
    assert cells.newest([first, second, forced]) == [second, forced]


def test_the_run_names_each_rows_chosen_count():
    line = chosen_threads_line([_record("sklearn", 1.2e-3, 4), _record("numpy", 6e-4, 2),
                                _record("kmbench-cpu", 1e-4, 64, how="forced")])
    assert line.endswith(": sklearn 4 of 64, numpy 2 of 64")
    assert chosen_threads_line([_record("sklearn", 1.2e-3, 4, how="forced")]) is None
