"""What a run prints when its output goes to a log, not a terminal (CliRunner is not one):
tables at full width, implementations that cannot run here in one line, no library INFO
lines, and a line per cell with a heartbeat while a long cell runs."""

import io
import logging
import time

import pytest
from rich.console import Console
from typer.testing import CliRunner

from kmbench import progress
from kmbench.cli import app


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_tables_are_not_cut_and_skips_are_one_line():
    out = invoke("run", "--n", 300, "--k", 2, "--iters", 3, "--repeats", 1,
                 "--impl", "numpy,cuda-v1,cuda-v2,cuda-v3,kmbench-gpu")
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    header = next(line for line in lines if "impl" in line and "status" in line)
    assert "per iter" in header and "speedup" in header  # one row of the table, not wrapped
    from kmbench.protocol.device import cuda_status

    if not cuda_status()[0]:  # the four GPU rows cannot run: one line for all, no row, no progress line
        (summed,) = [line for line in lines if "skipped" in line or "not installed" in line]
        assert "cuda-v1, cuda-v2, cuda-v3, kmbench-gpu" in summed  # named there, and nowhere else
        assert [line for line in lines if "cuda-v1" in line] == [summed]
    assert any("numpy on blobs" in line and ": ok" in line for line in lines)  # one line a cell


def test_a_long_cell_is_never_silent_for_longer_than_the_heartbeat():
    sink = io.StringIO()
    reporter = progress.LineReporter(Console(file=sink, width=200), total=1, heartbeat_s=0.2)

    class Impl:
        name = "slow"

        def available(self):
            return True, ""

    try:
        reporter.start(Impl(), "data")
        reporter.note("float64 reference: iteration 3/9 on data")
        time.sleep(0.9)
        reporter.done({"status": "ok", "per_iteration_s": 0.5})
    finally:
        reporter.close()
    text = sink.getvalue()
    assert "slow on data: still running" in text and "slow on data: ok" in text  # the cell in full, first
    assert "slow: still running" in text and "iteration 3/9" in text  # then the row alone


def test_sklearnex_info_lines_do_not_reach_the_users_log(caplog, capfd):
    pytest.importorskip("sklearnex")
    import numpy as np

    from kmbench.protocol import runner, validate
    from kmbench.data.datasets import Dataset
    from impls.peers.sklearnex_kmeans import SklearnexKMeans

    data = np.random.default_rng(0).standard_normal((2_000, 2)).astype(np.float32)
    dataset = Dataset("t", data, None, {"generator": "test"})
    settings = runner.Settings(k=3, iterations=5, warmup=0, repeats=1)
    problem = runner.make_problem(dataset, settings)
    oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, 5)
    with caplog.at_level(logging.INFO):
        record = runner.run_cell(SklearnexKMeans(), problem, oracle, dataset, settings, "t")
    assert record["build"]["ran"] == "oneDAL"  # its log was still read
    assert not [entry for entry in caplog.records if entry.name.startswith("sklearnex")]
    assert "running accelerated version" not in capfd.readouterr().err  # nor through its own handler


def test_the_heartbeat_slows_down_as_a_cell_goes_on():
    """A busy machine's make run gave 21 heartbeat lines of 60: each gap now doubles (0.1, 0.2,
    0.4 s here), so a long cell says it is alive a few times, not once a gap."""
    sink = io.StringIO()
    reporter = progress.LineReporter(Console(file=sink, width=200), total=1, heartbeat_s=0.1)

    class Impl:
        name = "slow"

        def available(self):
            return True, ""

    try:
        reporter.start(Impl(), "data")
        time.sleep(1.2)  # at a fixed gap, about 11 beats; doubling, beats at 0.1, 0.3 and 0.7 s
        reporter.done({"status": "ok"})
    finally:
        reporter.close()
    beats = sink.getvalue().count("still running")
    assert 1 <= beats <= 4, sink.getvalue()


@pytest.mark.parametrize("gpu_present", [False, True])
def test_without_cupy_the_reason_given_is_the_missing_gpu_where_there_is_none(gpu_present, monkeypatch):
    """`kmbench list`, `report` and the estimator give cuda_status's sentence as it is: on a
    machine with no GPU it must not send the user to install CuPy, which would not help."""
    import sys

    from kmbench.protocol import device

    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    monkeypatch.setattr(device, "nvidia_gpu_present", lambda: gpu_present)
    ready, why = device.cuda_status()
    assert not ready
    assert why.startswith("CuPy is not installed (pip install") == gpu_present
    assert why.startswith("no NVIDIA GPU here") != gpu_present
