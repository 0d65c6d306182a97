"""A quiet, clear first run (issue 34): the table of what ran in 100 columns, with a column for
what a sweep varies; rows that cannot run here summed, one line per reason; a row computing in
less than the data's precision marked; the progress naming the stage it is in; long cells
announced; no Dask INFO lines; messages that name what the user typed, whole."""

import io
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from typer.testing import CliRunner

from impls.cpu.cpp import build
from kmbench import progress
from kmbench.cli import app
from kmbench.cli.output import skipped_lines, summary_table
from kmbench.errors import UsageError
from kmbench.plans import estimate
from kmbench.protocol import runner
from tests.conftest import blob_data, gpu_cell, memory_problem

CUPY = "CuPy is not installed (pip install 'kmbench[cuda12]' or 'kmbench[cuda13]')"
TORCH = "PyTorch is not installed: pip install torch"
FAISS = "faiss is not installed: pip install 'kmbench[peers]' (or faiss-cpu alone)"
SKLEARNEX = "scikit-learn-intelex is not installed: pip install 'kmbench[peers]' (or scikit-learn-intelex alone; x86-64 only)"


def _record(impl, status="ok", k=5, threads=None, n=100_000, detail="", computed="float32", data="float32",
            iterations=300, executed=300):
    return {"impl": impl, "label": impl, "status": status, "detail": detail,
            "dataset": {"name": f"blobs-n{n}", "n": n, "d": 2, "dtype": data, "generator": "blobs"},
            "params": {"k": k, "iterations": iterations, "init": "random", "seed": 0, "stop": "iterations"},
            "iterations_executed": executed if status != "skipped" else None, "reference_iterations": iterations,
            "times": {"iterate": {"mean": 102.034, "median": 1.2, "min": 1.1, "std": 0.1, "cv": 0.05}},
            "per_iteration_s": 102.034 / executed, "repeats_done": 5, "validation": {"dtype": computed},
            "build": {"threads": threads} if threads else {}, "warnings": []}


def _width(table) -> int:
    sink = Console(width=400, file=io.StringIO(), record=True)
    sink.print(table)
    return max(len(line.rstrip()) for line in sink.export_text().splitlines())


def _header(table) -> list[str]:
    return [column.header for column in table.columns]


def test_the_table_of_a_sweep_fits_100_columns_and_shows_what_varies():
    """The widest cells a run makes: the longest row names, 1e7 points, k and threads varying, a
    status with a precision mark, an early stop. Before: 13 columns in a box, 120 and more."""
    records = [_record(name, k=k, threads=threads, n=10_000_000, executed=196)
               for name in ("fast-pytorch-kmeans", "kmbench-gpu-stream")
               for k in (3, 1000) for threads in (1, 16)]
    records += [_record("kmbench-cpu", status="approximate", computed="float16", data="float64", k=1000)]
    table = summary_table(records)
    assert {"k", "threads"} <= set(_header(table)) and "d" not in _header(table)
    assert _width(table) <= 100


def test_a_table_that_varies_nothing_has_no_such_columns_and_no_skipped_rows():
    records = [_record("numpy"), _record("sklearn"), _record("cuda-v1", status="skipped", detail=CUPY)]
    table = summary_table(records)
    assert not {"k", "threads", "d"} & set(_header(table))
    assert table.row_count == 2  # the skipped row is summed below, not a row


def test_the_speedup_is_per_iteration_where_the_baseline_stopped_early():
    """scikit-learn stopped at 150 of 300 iterations in the same total time as numpy's 300: per
    iteration numpy is twice as fast, though their totals are equal."""
    records = [_record("numpy"), _record("sklearn", executed=150)]
    sink = Console(width=200, file=io.StringIO(), record=True)
    sink.print(summary_table(records))
    numpy_line = next(line for line in sink.export_text().splitlines() if line.strip().startswith("numpy"))
    assert numpy_line.rstrip().endswith("2.00x")  # by totals it would read 1.00x


def test_skipped_rows_are_summed_one_line_per_reason():
    records = [_record(f"gpu-{i}", status="skipped", detail=CUPY) for i in range(5)]
    records += [_record("torch", status="skipped", detail=TORCH), _record("numpy")]
    records += [_record("faiss-cpu", status="skipped", detail=FAISS),
                _record("sklearnex", status="skipped", detail=SKLEARNEX)]
    assert skipped_lines(records, gpu_here=False) == [
        "6 GPU rows skipped (gpu-0, gpu-1, gpu-2, gpu-3, gpu-4, torch): no GPU here",
        "2 rows (faiss-cpu, sklearnex) not installed: pip install 'kmbench[peers]'"]
    with_gpu = skipped_lines(records, gpu_here=True)  # then a missing CuPy is the reason to say
    assert ("5 rows (gpu-0, gpu-1, gpu-2, gpu-3, gpu-4) not installed: pip install 'kmbench[cuda12]' or "
            "'kmbench[cuda13]'") in with_gpu


def test_the_rows_that_cannot_run_here_make_no_progress_lines():
    sink = io.StringIO()
    reporter = progress.LineReporter(Console(file=sink, width=200), total=2, heartbeat_s=60)

    class Missing:
        name = "missing"

        def available(self):
            return False, CUPY

    try:
        reporter.start(Missing(), "data")
        reporter.done({"status": "skipped", "detail": CUPY})
    finally:
        reporter.close()
    assert sink.getvalue() == ""


def test_after_the_reference_the_progress_names_the_timed_runs():
    """The note stayed at "float64 reference: iteration 10/10" while the row ran for 90 s."""
    from kmbench.tasks.lloyd import LloydTask

    dataset, settings, problem = memory_problem(blob_data(np.random.default_rng(0), n=500), 3, 4)
    notes = []
    LloydTask(settings).oracle(dataset, problem, progress=notes.append)
    assert notes[0] == "float64 reference" and "iteration 4/4" in notes[-2] and notes[-1] == "timed runs"


@pytest.mark.skipif(build.find_compiler()[0] is None, reason="no C++ compiler on PATH")
def test_a_row_computing_in_float32_on_float64_data_says_so(monkeypatch):
    from impls.cpu.cpp import CppPlain

    monkeypatch.setenv("KMBENCH_CPP_PRECISION", "float32")  # the plain C++ row, built to compute in float32
    data = blob_data(np.random.default_rng(2), n=3_000).astype(np.float64)
    _, record = gpu_cell(CppPlain(), data, 5, 6)
    assert record["status"] == "ok", record.get("detail")
    assert any("computes in float32 on float64 data" in warning for warning in record["warnings"])
    sink = Console(width=400, file=io.StringIO(), record=True)
    sink.print(summary_table([record]))
    assert "ok (fp32)" in sink.export_text()
    _, exact = gpu_cell(CppPlain(), data.astype(np.float32), 5, 6)  # its own precision: no mark
    assert not any("computes in" in warning for warning in exact["warnings"])


def test_dask_says_nothing_below_a_warning(tmp_path):
    pytest.importorskip("distributed")
    env = {key: value for key, value in os.environ.items() if not key.startswith("DASK_")}
    # This checkout's kmbench first (the child runs in tmp_path), then whatever the parent's path held
    # (a machine whose Dask lives in a `pip --target` folder on PYTHONPATH).
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]),
                                                      os.environ.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-m", "kmbench", "run", "--n", "300", "--k", "2", "--iters", "2",
                           "--repeats", "1", "--warmup", "0", "--impl", "dask", "--store", "records.jsonl",
                           "--data-dir", "data"], capture_output=True, text=True, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "distributed." not in done.stdout + done.stderr


def test_a_long_cell_is_announced_with_its_estimate():
    settings = runner.Settings(k=5000, iterations=20, warmup=1, repeats=5)
    big = estimate.Planned("blobs-n300000-d408", 300_000, 408, settings, rows=3)
    (line,) = estimate.long_cells([big])
    assert line.startswith("blobs-n300000-d408 (300,000 x 408, k = 5,000, 20 iterations): about ")
    # Said as the yardstick's time, so that a slower row's own, longer line does not contradict it.
    assert "if its 3 rows are as fast as NumPy in float64 here (" in line
    assert line.endswith("a slower row says its own time once its warm-up has run")
    small = estimate.Planned("small", 1_000, 2, runner.Settings(k=3, iterations=5), rows=3)
    assert estimate.long_cells([small]) == []
    whole, row = estimate.seconds(big)
    # The reference's 20 iterations once, then per row 7 runs (warm-up, 5 counted, the judge's
    # stepping) and the judge's certified steps, so one run is under a seventh of a row.
    assert row * 3 < whole < row * 3 + row / 7


def test_sweep_without_matplotlib_writes_its_tables_and_says_how_to_get_the_plots(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib then fails
    out = CliRunner().invoke(app, ["sweep", "--vary", "n=300", "--k", "2", "--iters", "2", "--impl", "numpy",
                                   "--out", str(tmp_path / "sweep.md"), "--store", str(tmp_path / "r.jsonl")])
    assert out.exit_code == 0, out.output
    said = " ".join(out.output.split())
    note = "drawing kmbench sweep's plots needs matplotlib: pip install 'kmbench[plot]'; the tables are written without them."
    assert said.count(note) == 2 and "--plot" not in said  # before the run and at its end
    assert "| NumPy (matmul + bincount) | 300 | ok |" in (tmp_path / "sweep.md").read_text()
    assert not list(tmp_path.glob("*.png"))


def test_a_damaged_oracle_entry_is_said_in_whole_sentences(tmp_path):
    from kmbench.protocol import oracles

    entry = tmp_path / "entry.npz"
    entry.write_bytes(b"PK garbage " * 100)  # not an archive: numpy takes it for a pickle, refused at length
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert oracles._load(entry, np.zeros((3, 2)), {}) is None
    (message,) = [str(w.message) for w in caught]
    assert message.endswith("(ValueError: This file contains pickled (object) data); recomputing it")


def test_text_that_is_not_a_number_ends_with_one_period(tmp_path):
    from kmbench.data import datasets

    path = tmp_path / "bad.txt"
    path.write_text("1 2 3\n4 5 x\n")
    with pytest.raises(UsageError) as caught:
        datasets.load_file(path)
    assert str(caught.value).endswith("column 3.") and ".." not in str(caught.value)


def test_zero_iterations_names_only_options_the_command_has():
    with pytest.raises(UsageError, match=r"^--iters must be at least 1"):
        runner.check_settings(runner.Settings(iterations=0))
    with pytest.raises(UsageError, match=r"--iters \(or --max-iters\)"):
        runner.check_settings(runner.Settings(iterations=0, stop="tolerance"))


def test_every_table_shows_the_precision_a_row_was_certified_in():
    """Issue 51, item 11: kmbench-gpu (certified in float32) and flash-kmeans's rows (certified only
    within TF32's or float16's bounds) all read `ok`; the precision was in a note below."""
    import csv

    from kmbench.report import exporters, html
    from kmbench.report.contents import Contents

    records = [_record("kmbench-gpu"), _record("flash-kmeans", computed="tf32"),
               _record("flash-kmeans-fp16", computed="float16"), _record("sklearn")]
    sink = Console(width=400, file=io.StringIO(), record=True)
    sink.print(summary_table(records))
    terminal = {line.split()[0]: line.split()[2:4] for line in sink.export_text().splitlines()[3:] if line.strip()}
    assert terminal["kmbench-gpu"][0] == "ok" and terminal["kmbench-gpu"][1] != "(fp32)"
    assert terminal["flash-kmeans"] == ["ok", "(tf32)"] and terminal["flash-kmeans-fp16"] == ["ok", "(fp16)"]
    contents = Contents(records, "test")
    page = exporters.FORMATS["markdown"](contents)
    assert "| flash-kmeans | 100,000 | ok (tf32) |" in page and "| flash-kmeans-fp16 | 100,000 | ok (fp16) |" in page
    assert "| kmbench-gpu | 100,000 | ok |" in page
    rows = {row["impl"]: row for row in csv.DictReader(io.StringIO(exporters.FORMATS["csv"](contents)))}
    assert rows["flash-kmeans"]["status"] == "ok" and rows["flash-kmeans"]["certified_in"] == "tf32"
    assert rows["kmbench-gpu"]["certified_in"] == "float32"
    pytest.importorskip("plotly")
    assert ">ok (tf32)</span>" in html.render(contents) and ">ok (fp16)</span>" in html.render(contents)


def test_the_spread_warning_names_each_cell_by_what_differs(capsys):
    """A sweep's cells read "numpy n=1,000 (38%), numpy n=1,000 (127%)": k and d were left out."""
    from kmbench.cli.output import show_warnings
    from kmbench.protocol.statistics import SPREAD

    records = []
    for k, d, cv in ((3, 2, 0.38), (30, 2, 1.27), (30, 8, 0.5)):
        record = _record("numpy", k=k, n=1_000)
        record["dataset"]["d"] = d
        record["times"]["iterate"]["cv"] = cv
        record["warnings"] = [f"{SPREAD} (CV {cv:.0%} over 5 repeats)"]
        records.append(record)
    show_warnings(records)
    said = " ".join(capsys.readouterr().err.split())
    assert "in numpy d=2 k=3 (38%), numpy d=2 k=30 (127%), numpy d=8 k=30 (50%):" in said
    show_warnings(records[:2])  # d the same: not said; n the same: not said, as before
    assert "in numpy k=3 (38%), numpy k=30 (127%):" in " ".join(capsys.readouterr().err.split())


def test_a_missing_dask_is_hinted_by_kmbench_s_own_extra(monkeypatch):
    """The hint named dask[distributed] where kmbench[dask] exists (and pins what the row needs)."""
    import tomllib

    from impls.distributed.dask_lloyd import DaskLloyd

    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed then fails
    ready, why = DaskLloyd().available()
    assert not ready
    record = _record("dask", status="skipped", detail=why)
    assert skipped_lines([record], gpu_here=False) == ["1 row (dask) not installed: pip install 'kmbench[dask]'"]
    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    assert "dask" in pyproject["project"]["optional-dependencies"]
