"""How the one loop sequences a cell's runs (kmbench.protocol.measure): a row that reports its
trajectory warms up with the judge's trace run, so it runs no extra time; `run`'s time budget
stops a slow row after at least 3 counted runs and says so; reproduce's suites keep their
documents' protocol (no budget where the suite names none)."""

from dataclasses import replace

import numpy as np
import pytest

from impls.cpu.numpy_fast import NumpyFast
from kmbench.data.datasets import Dataset
from kmbench.plans import suite
from kmbench.protocol import Problem, measure, runner
from kmbench.report.formatting import repeats_text
from kmbench.tasks import lloyd
from tests.conftest import blob_data


class Counted(NumpyFast):
    """A correct row that traces, and logs each call: "trace", or "plain" for any other run. It
    takes no thread count, so no calibration runs come first (tests/test_threads.py has those)."""

    name = label = "counted"
    takes_threads = False

    def __init__(self, traces=True):
        self.traces = traces
        self.calls = []

    def run(self, problem):
        self.calls.append("trace" if problem.trace else ("step" if problem.iterations == 1 else "plain"))
        return super().run(problem)


def _dataset():
    return Dataset("unit", blob_data(np.random.default_rng(5), n=600), None, {"generator": "test"})


def _record(impl, tmp_path, **settings):
    (record,) = lloyd.run([impl], [_dataset()], runner.Settings(k=5, iterations=6, **settings),
                          store=tmp_path / "r.jsonl")
    return record


@pytest.mark.parametrize("warmup", [1, 2, 3])
def test_a_tracing_row_warms_up_with_its_trace_run_and_runs_nothing_more(tmp_path, warmup):
    row = Counted()
    record = _record(row, tmp_path, warmup=warmup, repeats=3)
    assert record["status"] == "ok", record["detail"]
    # The trace run first (the first warm-up), the other warm-ups, the counted runs; the judge runs nothing.
    assert row.calls == ["trace"] + ["plain"] * (warmup - 1) + ["plain"] * 3
    assert record["repeats_done"] == 3 and len(record["times"]["iterate_values"]) == 3


def test_without_a_warm_up_the_judge_makes_the_trace_run_after_the_counted_runs(tmp_path):
    row = Counted()
    record = _record(row, tmp_path, warmup=0, repeats=2)
    assert record["status"] == "ok", record["detail"]
    assert row.calls == ["plain", "plain", "trace"]


def test_a_row_that_does_not_trace_warms_up_with_plain_runs(tmp_path):
    row = Counted(traces=False)
    record = _record(row, tmp_path, warmup=1, repeats=2)
    assert record["status"] == "ok", record["detail"]
    assert row.calls[:3] == ["plain", "plain", "plain"]  # warm-up and counted runs; then the judge steps it
    assert set(row.calls[3:]) == {"step"} and len(row.calls[3:]) >= 6


class FakeClock:
    """time.perf_counter for the measuring loop: each call of the row moves it by `run` seconds."""

    def __init__(self, run):
        self.now, self.run = 0.0, run

    def perf_counter(self):
        return self.now


class Slow(NumpyFast):
    """A row whose every run takes `clock.run` seconds on the fake clock (and claims as much); no
    thread calibration, whose runs would spend the fake clock too."""

    name = label = "slow"
    takes_threads = False

    def __init__(self, clock):
        self.clock, self.counted = clock, 0

    def run(self, problem):
        result = super().run(problem)
        self.clock.now += self.clock.run
        return result


def _budgeted(monkeypatch, tmp_path, run_s, **settings):
    clock = FakeClock(run_s)
    monkeypatch.setattr(measure, "time", clock)
    return _record(Slow(clock), tmp_path, warmup=1, **settings)


def test_runs_budget_stops_a_slow_row_after_three_counted_runs_and_says_so(monkeypatch, tmp_path):
    # Each run takes 60 s against a 10 s budget: spent after the first, yet three are made.
    record = _budgeted(monkeypatch, tmp_path, 60.0, repeats=5, max_time=runner.RUN_BUDGET_S,
                       min_repeats=runner.RUN_MIN_REPEATS)
    assert record["status"] == "ok", record["detail"]
    assert record["repeats_done"] == 3 and record["stopped_by_budget"]
    assert repeats_text({"repeats": record["repeats_done"], "stopped_by_budget": True}) == "3 (time budget)"


def test_a_fast_row_makes_every_repeat_within_the_budget(monkeypatch, tmp_path):
    record = _budgeted(monkeypatch, tmp_path, 1.0, repeats=5, max_time=10.0, min_repeats=3)
    assert record["repeats_done"] == 5 and not record["stopped_by_budget"]


def test_the_budget_lets_runs_start_until_it_is_spent(monkeypatch, tmp_path):
    # 4 s runs, 10 s budget: 4 s, 8 s, then 12 s after the third, which is past it: three, cut.
    record = _budgeted(monkeypatch, tmp_path, 4.0, repeats=5, max_time=10.0, min_repeats=3)
    assert record["repeats_done"] == 3 and record["stopped_by_budget"]
    record = _budgeted(monkeypatch, tmp_path, 3.0, repeats=5, max_time=10.0, min_repeats=3)
    assert record["repeats_done"] == 4 and record["stopped_by_budget"]


def test_fewer_repeats_asked_than_the_least_are_all_made(monkeypatch, tmp_path):
    record = _budgeted(monkeypatch, tmp_path, 60.0, repeats=2, max_time=10.0, min_repeats=3)
    assert record["repeats_done"] == 2 and not record["stopped_by_budget"]


def test_counted_seconds_follow_the_same_rule():
    counting = measure.Counting(warmup=1, repeats=5, max_time=10.0, min_repeats=3)
    assert counting.counted_seconds(60.0) == 180.0  # three, whatever the budget
    assert counting.counted_seconds(1.0) == 5.0  # every repeat
    assert measure.Counting(repeats=5).counted_seconds(60.0) == 300.0  # no budget


def test_run_gives_every_cell_its_budget_by_default(monkeypatch):
    from typer.testing import CliRunner

    from kmbench.cli import commands
    from kmbench.cli.app import app

    seen = []
    monkeypatch.setattr(commands, "run_and_show", lambda passes, made, settings, *rest: seen.append(settings) or 0)
    monkeypatch.setattr(commands.plan, "check_before_writing", lambda *args, **kwargs: None)
    assert CliRunner().invoke(app, ["run", "--n", "100", "--impl", "numpy"]).exit_code == 0
    assert CliRunner().invoke(app, ["run", "--n", "100", "--impl", "numpy", "--budget", "inf"]).exit_code == 0
    default, unbounded = seen
    assert (default.max_time, default.min_repeats) == (runner.RUN_BUDGET_S, runner.RUN_MIN_REPEATS)
    assert unbounded.max_time == float("inf")


@pytest.mark.parametrize("name", suite.names())
def test_reproduce_keeps_each_documents_protocol(name):
    """A suite's cells get no budget it does not name, and a budget it names may stop after one
    run as before (its document's protocol), never `run`'s least of three."""
    loaded = suite.load(name)
    if not isinstance(loaded, suite.Suite):
        pytest.skip("a task suite: its own protocol and budget (kmbench.tasks.tasks)")
    named = {spec.get("max_time", loaded.protocol.get("max_time")) for spec in loaded.datasets}
    for step in loaded.steps():
        counting = step.settings.counting()
        assert counting.least() == 1
        assert counting.max_time in named


def test_document_000_is_the_mean_of_five_unbudgeted_runs():
    (document,) = [name for name in suite.names() if suite.load(name).source.startswith("000_")]
    counting = suite.load(document).settings().counting()
    assert (counting.repeats, counting.max_time, counting.least()) == (5, None, 1)


def _trace_is_the_trajectory(row, problem):
    """The trace a row reports is its run's trajectory: iteration i's centroids are where a run of
    i iterations from the same start ends, and the last is the run's own end."""
    traced = row.run(replace(problem, trace=True))
    assert traced.trace is not None and len(traced.trace) == traced.iterations == problem.iterations
    np.testing.assert_array_equal(traced.trace[-1], traced.centroids)
    for count in (1, 2, problem.iterations):
        shorter = row.run(replace(problem, iterations=count))
        np.testing.assert_array_equal(traced.trace[count - 1], np.asarray(shorter.centroids, np.float64))


def _small_problem():
    data = blob_data(np.random.default_rng(9), n=500)
    return Problem(data=data, initial_centroids=data[:4].copy(), iterations=4)


def _reports_its_trajectory(row):
    problem = _small_problem()
    assert row.traces
    row.prepare(problem)
    try:
        _trace_is_the_trajectory(row, problem)
    finally:
        row.release()


def test_numpy_blog_reports_its_trajectory():
    from impls.cpu.numpy_blog import NumpyBlog

    _reports_its_trajectory(NumpyBlog())


def test_the_dask_row_reports_its_trajectory():
    pytest.importorskip("distributed")
    from impls.distributed.dask_lloyd import DaskLloyd

    _reports_its_trajectory(DaskLloyd())


def test_runs_summary_says_which_rows_the_budget_stopped(monkeypatch, tmp_path):
    from rich.console import Console

    from kmbench.cli.output import summary_table

    cut = _budgeted(monkeypatch, tmp_path, 60.0, repeats=5, max_time=10.0, min_repeats=3)
    whole = _budgeted(monkeypatch, tmp_path, 1.0, repeats=5, max_time=10.0, min_repeats=3)
    whole = {**whole, "impl": "whole", "label": "whole"}
    console = Console(width=200, record=True)
    console.print(summary_table([cut, whole]))
    lines = {line.split()[0]: line for line in console.export_text().splitlines() if line.strip()}
    assert "(3 runs, budget)" in lines["slow"] and "budget" not in lines["whole"]


def test_a_native_row_keeps_the_least_of_three_runs_under_its_own_clock(tmp_path, monkeypatch):
    """The C++ harness stops by --max-time itself: any run outlasts a nanosecond's budget, so it
    would stop after one run; --min-repeats 3 makes it three (and one where the least is 1)."""
    from impls.cpu.cpp import CppPlain, build

    if build.find_compiler()[0] is None:
        pytest.skip("no C++ compiler on PATH")
    monkeypatch.setenv("KMBENCH_CACHE", str(tmp_path / "cache"))
    done = {}
    for least in (1, 3):
        record = _record(CppPlain(), tmp_path, warmup=1, repeats=5, max_time=1e-9, min_repeats=least)
        assert record["status"] == "ok", record["detail"]
        done[least] = (record["repeats_done"], record["stopped_by_budget"])
    assert done == {1: (1, True), 3: (3, True)}
