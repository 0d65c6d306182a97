"""What a careful user trips over in the first five minutes of `kmbench run` (issue 51, items 3, 4,
5 and 7): its exit code and last line, a busy machine and the threads it reaches, Ctrl-C, and
output that fits a screen (no counter jumps, an estimate before a long cell, lines of at most 100
columns). CliRunner is not a terminal: these are the lines a log gets."""

import io
import re

import pytest
from rich.console import Console
from typer.testing import CliRunner

from impls.cpu.numpy_fast import NumpyFast
from impls.peers.sklearn_kmeans import SklearnKMeans
from kmbench import progress
from kmbench.cli import app
from kmbench.data import results
from kmbench.plans import estimate
from kmbench.protocol import Implementation, environment, runner
from kmbench.protocol.task import run_cells
from kmbench.tasks import lloyd
from tests import wrong_rows
from tests.conftest import blob_data, memory_problem

SMALL = ("--n", 600, "--k", 3, "--iters", 4, "--repeats", 2)


class Missing(Implementation):
    """A row that cannot run anywhere (as a GPU row on a machine without one)."""

    name = "missing-row"
    label = "missing (test)"

    def available(self):
        return False, "the test's row cannot run here"


def invoke(*args):
    return CliRunner().invoke(app, [str(arg) for arg in args])


def lines_of(out) -> list[str]:
    """The output's lines, a line wrapped at 100 columns joined again (its rest is indented)."""
    lines = []
    for line in out.output.splitlines():
        if line.startswith("  ") and lines:
            lines[-1] += " " + line.strip()
        elif line.strip():
            lines.append(line)
    return lines


@pytest.fixture
def plugin_rows(tmp_path):
    with wrong_rows.registered(tmp_path / "entry-points", [wrong_rows.PlainLloyd, wrong_rows.ReturnsStart,
                                                           wrong_rows.ClaimsTooLong, Missing]):
        yield


def test_a_mismatch_or_an_error_exits_1_and_the_last_line_says_which(plugin_rows):
    out = invoke("run", *SMALL, "--impl", "plain-lloyd,wrong-returns-start,wrong-claims-too-long")
    assert out.exit_code == 1, out.output
    last = lines_of(out)[-1]
    assert last.startswith("failed: 2 cells failed") and "wrong-returns-start (mismatch)" in last
    assert "wrong-claims-too-long (error)" in last and "plain-lloyd" not in last
    assert len(results.load()) == 3  # every cell is stored all the same


def test_a_run_in_which_no_row_asked_for_could_run_exits_1(plugin_rows):
    out = invoke("run", *SMALL, "--impl", "missing-row")
    assert out.exit_code == 1, out.output
    assert lines_of(out)[-1] == "failed: no implementation asked for could run here (the reasons are above); exit code 1"


def test_a_run_whose_cells_are_all_ok_exits_0(plugin_rows):
    out = invoke("run", *SMALL, "--impl", "plain-lloyd,missing-row")
    assert out.exit_code == 0, out.output
    assert not lines_of(out)[-1].startswith("failed")


def test_ctrl_c_shows_the_cells_that_finished_and_exits_130(monkeypatch):
    def interrupted(self, problem):
        raise KeyboardInterrupt

    monkeypatch.setattr(SklearnKMeans, "run", interrupted)
    out = invoke("run", *SMALL, "--impl", "numpy,sklearn")
    assert out.exit_code == 130, out.output
    table = [line for line in out.output.splitlines() if line.strip().startswith(("numpy", "sklearn"))]
    assert len(table) == 1 and table[0].split()[:3] == ["numpy", "600", "ok"]  # the row that finished
    assert lines_of(out)[-1].startswith("interrupted (Ctrl-C): 1 record appended to")
    assert [record["impl"] for record in results.load()] == ["numpy"]


def test_a_busy_machine_is_said_below_the_table(monkeypatch):
    monkeypatch.setattr(environment, "busy_cores", lambda: 7.5)
    monkeypatch.setattr(environment.os, "cpu_count", lambda: 8)
    environment.capture.cache_clear()  # the next run looks again
    try:
        out = invoke("run", *SMALL, "--impl", "numpy")
    finally:
        environment.capture.cache_clear()
    assert out.exit_code == 0, out.output
    assert "warning the machine was busy before timing: other programs kept 7.5 of its 8 cores busy" in out.output
    (record,) = results.load()
    assert record["env"]["busy_cores"] == 7.5


def test_busy_cores_counts_what_other_programs_spent_on_our_cores(monkeypatch):
    ticks = iter([(100, 1000), (100 + 150, 1000 + 200)])  # 150 of 200 jiffies busy while we slept
    monkeypatch.setattr(environment, "_cpu_ticks", lambda cpus: next(ticks))
    monkeypatch.setattr(environment.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert environment.busy_cores(look_s=0) == pytest.approx(1.5)


def test_threads_reach_numpy_and_scikit_learn_and_the_run_says_which_rows_not(monkeypatch):
    """scikit-learn ran at 18.1 ms per iteration on a busy machine and 0.34 ms with one thread:
    --threads reached kmbench-cpu alone."""
    from threadpoolctl import threadpool_info

    seen = []
    for row in (NumpyFast, SklearnKMeans):
        def spying(self, problem, run=row.run):
            seen.append((self.name, {pool["num_threads"] for pool in threadpool_info()}))
            return run(self, problem)

        monkeypatch.setattr(row, "run", spying)
    out = invoke("run", *SMALL, "--warmup", 1, "--impl", "numpy,sklearn,cpp", "--threads", 1)
    assert out.exit_code == 0, out.output
    for name in ("numpy", "sklearn"):
        timed = [pools for impl, pools in seen if impl == name][:3]  # the warm-up and 2 counted runs
        assert timed == [{1}] * 3, seen
    assert {record["impl"]: record["build"].get("threads") for record in results.load()}["sklearn"] == 1
    assert "--threads 1 set the threads of numpy, sklearn; not of cpp, which chooses its own" in out.output


def test_the_counter_counts_only_the_cells_that_can_run_here(plugin_rows):
    """It jumped from [5/29] to [25/29] past the GPU rows of a machine without a GPU."""
    out = invoke("run", *SMALL, "--impl", "plain-lloyd,missing-row,numpy")
    counters = re.findall(r"\[(\d+)/(\d+)\]", out.output)
    assert counters and {total for _, total in counters} == {"2"}
    done = [int(count) for count, _ in counters]
    assert done == sorted(done) and max(done) == 2


def test_every_line_fits_100_columns(monkeypatch, tmp_path):
    """A log's lines ran to 167 columns (the estimate) and 139 (each warning); a dataset of a long
    name makes long progress lines too."""
    import numpy as np

    monkeypatch.setattr(estimate, "seconds", lambda planned: (4000.0, 570.0))  # announce the step
    monkeypatch.setattr(environment, "busy_cores", lambda: 2.0, raising=False)  # and a busy machine
    environment.capture.cache_clear()
    data = tmp_path / f"points-measured-at-the-{'north-' * 8}station.npy"
    np.save(data, blob_data(np.random.default_rng(1), n=600))
    try:
        out = invoke("run", "--dataset", data, "--k", 3, "--iters", 4, "--repeats", 2, "--impl", "numpy,sklearn,cpp")
    finally:
        environment.capture.cache_clear()
    assert out.exit_code == 0, out.output
    assert any(line.startswith("long ") for line in out.output.splitlines())
    assert max(len(line.rstrip()) for line in out.output.splitlines()) <= 100


def test_a_cells_timed_runs_are_estimated_once_its_warm_up_has_shown_its_speed(tmp_path):
    """numpy-blog's 77 s cell began without a word: the float64 yardstick cannot know a slow row."""

    class Reporter:
        def __init__(self):
            self.expected = []

        def start(self, impl, where):
            pass

        def note(self, text):
            pass

        def expect(self, seconds, warmup):
            self.expected.append((seconds, warmup))

        def done(self, record):
            pass

    dataset, settings, _ = memory_problem(blob_data(__import__("numpy").random.default_rng(0), n=500), 3, 4,
                                          repeats=5, warmup=2)
    reporter = Reporter()
    run_cells(lloyd.LloydTask(settings, tmp_path), [dataset], [NumpyFast()], tmp_path / "r.jsonl", reporter=reporter)
    ((seconds, warmup),) = reporter.expected
    assert seconds == pytest.approx((2 - 1 + 5) * warmup)  # the other warm-up run and the five counted

    sink = io.StringIO()
    line_reporter = progress.LineReporter(Console(file=sink, width=200), total=1, heartbeat_s=60)
    try:
        line_reporter.start(NumpyFast(), "data")
        line_reporter.expect(20.0, 4.0)  # short: nothing to say
        line_reporter.expect(90.0, 15.0)
    finally:
        line_reporter.close()
    said = [line for line in sink.getvalue().splitlines() if "timed runs" in line]
    assert len(said) == 1 and said[0].endswith("[0/1] numpy: timed runs about 90 s more (warm-up 15 s), "
                                               "then validation")



def test_a_baseline_at_several_thread_counts_is_held_against_each_row_at_its_own_count():
    """`run --threads 1,2` with sklearn among the rows ended in a TypeError (two baselines per
    problem); a row with no count is held against the baseline's best."""
    from kmbench.report import report

    def cell(impl, threads, per_iter):
        return {"impl": impl, "label": impl, "status": "ok", "dataset": {"name": "b", "n": 1000, "d": 2,
                "dtype": "float32", "generator": "blobs"}, "params": {"k": 5, "iterations": 10, "init": "random", "seed": 0},
                "iterations_executed": 10, "per_iteration_s": per_iter,
                "times": {"iterate": {"mean": 10 * per_iter}}, "build": {"threads": threads} if threads else {}}

    cells = report.cells_frame([cell("sklearn", 1, 1e-3), cell("sklearn", 2, 8e-3), cell("numpy", 1, 5e-4),
                                cell("numpy", 2, 2e-3), cell("cpp", None, 2.5e-4)])
    speedup = {(row["impl"], row["threads"] if row["threads"] == row["threads"] else None):
               row["speedup_per_iter_vs_sklearn"] for _, row in cells.iterrows()}
    assert speedup[("numpy", 1)] == pytest.approx(2.0) and speedup[("numpy", 2)] == pytest.approx(4.0)
    assert speedup[("cpp", None)] == pytest.approx(4.0)  # against sklearn's 1 ms, not its 8
