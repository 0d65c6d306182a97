"""Input checked once at the edge, before anything is written (issue 7, items 5-12)."""

import json
import os
import sys
import warnings

import numpy as np
import pytest
from typer.testing import CliRunner

from kmbench.data import datasets, results
from kmbench.cli import app

cli = CliRunner(env={"COLUMNS": "200", "TERMINAL_WIDTH": "200"})


def invoke(*args):
    return cli.invoke(app, [str(a) for a in args])


def _written(tmp_path):
    """Every file under the test's dataset cache and record store."""
    found = []
    for folder in (tmp_path / "datasets", tmp_path / "results"):
        if folder.exists():
            found += [p for p in folder.rglob("*") if p.is_file()]
    return found


@pytest.mark.parametrize("args", [
    ("--n", 1000, "--k", 1_000_000),
    ("--n", "100,10", "--k", 20),
    ("--n", 100, "--impl", "no-such-impl"),
    ("--n", 100, "--seed", -1),
    ("--n", 100, "--dtype", "float16"),
    ("--n", 100, "--repeats", 0),
])
def test_bad_run_options_write_nothing(tmp_path, args):
    out = invoke("run", "--iters", 2, "--impl", "numpy", *args)
    assert out.exit_code == 2, out.output
    assert "Traceback" not in out.output
    assert _written(tmp_path) == []


def test_seed_minus_one_is_one_sentence():
    out = invoke("run", "--n", 100, "--seed", -1, "--impl", "numpy")
    assert out.exit_code == 2
    assert "--seed must be between 0 and 2**32 - 1; got -1." in out.output


def test_k_against_every_size_names_the_dataset(tmp_path):
    out = invoke("run", "--n", "100,10", "--k", 20, "--impl", "numpy")
    assert out.exit_code == 2 and "larger than the number of points (10)" in out.output
    assert not (tmp_path / "results" / "records.jsonl").exists()


def test_store_that_cannot_be_written_is_found_first(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    out = invoke("run", "--n", 100, "--iters", 2, "--impl", "numpy", "--store", blocker / "records.jsonl")
    assert out.exit_code == 2
    assert "Cannot write the record store" in out.output and "Traceback" not in out.output
    assert _written(tmp_path) == []  # no dataset generated, no cell computed


@pytest.mark.parametrize("command", [["report"], ["report", "--format", "csv"],
                                     ["reproduce", "python-cpp-cuda", "--no-run", "--out", "r.md"]])
def test_a_folder_given_as_the_store_to_read_is_one_sentence(tmp_path, command):
    """`report --store FOLDER` ended in a 65-line traceback (IsADirectoryError)."""
    out = invoke(*command, "--store", tmp_path)
    assert out.exit_code == 2, out.output
    assert f"The record store {tmp_path} is a folder" in out.output and "Traceback" not in out.output


def test_a_store_folder_that_does_not_exist_is_said_before_it_is_made(tmp_path):
    """A mistyped --store folder was made silently; now a warning names it before any cell runs."""
    typo = tmp_path / "reslts" / "records.jsonl"
    with pytest.warns(results.StoreWarning, match=f"the folder {tmp_path / 'reslts'} does not exist"):
        out = invoke("run", "--n", 100, "--iters", 2, "--repeats", 1, "--impl", "numpy", "--store", typo)
    assert out.exit_code == 0, out.output
    assert typo.exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error", results.StoreWarning)  # the folder exists now: nothing to say
        assert invoke("run", "--n", 100, "--iters", 2, "--repeats", 1, "--impl", "numpy",
                      "--store", typo).exit_code == 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_store_folder(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        out = invoke("run", "--n", 100, "--iters", 2, "--impl", "numpy", "--store", folder / "r.jsonl")
    finally:
        folder.chmod(0o755)
    assert out.exit_code == 2 and "Cannot write the record store" in out.output


def test_fortran_ordered_npy_is_valid_data_for_every_row(tmp_path):
    rng = np.random.default_rng(3)
    data = np.asfortranarray(rng.standard_normal((300, 2)) + [[4.0, 0.0]] * (rng.random((300, 1)) > 0.5))
    path = tmp_path / "fortran.npy"
    np.save(path, data)
    assert np.load(path).flags.f_contiguous
    loaded = datasets.load_file(path)
    assert loaded.data.flags.c_contiguous
    assert loaded.path is None  # subprocesses get a copy of what was validated, not the raw file
    out = invoke("run", "--dataset", path, "--k", 2, "--iters", 5, "--repeats", 1, "--impl", "numpy,cpp")
    assert out.exit_code == 0, out.output
    statuses = {r["impl"]: r["status"] for r in results.load()}
    assert statuses["numpy"] == "ok"
    assert statuses["cpp"] in ("ok", "skipped"), statuses  # skipped only without a compiler


def test_c_ordered_npy_keeps_its_path(tmp_path):
    path = tmp_path / "c.npy"
    np.save(path, np.random.default_rng(0).standard_normal((50, 3)))
    assert datasets.load_file(path).path == path


def test_csv_with_a_header_line(tmp_path):
    path = tmp_path / "points.csv"
    rng = np.random.default_rng(4)
    rows = rng.standard_normal((40, 2))
    path.write_text("x,y\n" + "\n".join(f"{a},{b}" for a, b in rows) + "\n")
    loaded = datasets.load_file(path)
    assert loaded.data.shape == (40, 2)
    np.testing.assert_allclose(loaded.data, rows)
    assert any("header" in note for note in loaded.meta["notes"])
    out = invoke("run", "--dataset", path, "--k", 2, "--iters", 2, "--repeats", 1, "--impl", "numpy")
    assert out.exit_code == 0, out.output
    assert "header" in out.output


def test_header_only_csv_is_refused(tmp_path):
    path = tmp_path / "empty.csv"
    path.write_text("x,y\n")
    out = invoke("run", "--dataset", path, "--k", 1, "--impl", "numpy")
    assert out.exit_code == 2 and "no points" in out.output


def test_square_brackets_survive_in_help():
    run_help = " ".join(invoke("run", "--help").output.split())
    assert "[default: all]" in run_help
    assert "[default: $KMBENCH_DATA or ./datasets]" in run_help
    assert "[default: $KMBENCH_RESULTS or results/records.jsonl]" in run_help
    report_help = " ".join(invoke("report", "--help").output.split())
    assert "pip install 'kmbench[plot]'" in report_help


def test_square_brackets_survive_in_error_messages(tmp_path, monkeypatch):
    invoke("run", "--n", 100, "--iters", 2, "--repeats", 1, "--impl", "numpy")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if matplotlib were not installed
    out = invoke("report", "--out", tmp_path / "r.md", "--plot", tmp_path / "p.png")
    assert out.exit_code == 2
    assert "pip install 'kmbench[plot]'" in out.output


def test_report_plot_without_matplotlib_writes_nothing(tmp_path, monkeypatch):
    invoke("run", "--n", 100, "--iters", 2, "--repeats", 1, "--impl", "numpy")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    out = invoke("report", "--out", tmp_path / "r.md", "--plot", tmp_path / "p.png")
    assert out.exit_code == 2
    assert not (tmp_path / "r.md").exists()


def test_dataset_by_path_reads_its_sidecar(tmp_path):
    made = datasets.blobs(200, 2, 3, 1.0, 1, "float32", tmp_path / "datasets")
    loaded = datasets.load_file(made.path)
    assert loaded.meta["generator"] == "blobs"
    assert loaded.meta["parameters"]["centers"] == 3
    out = invoke("run", "--dataset", made.path, "--k", 3, "--iters", 2, "--repeats", 1, "--impl", "numpy")
    assert out.exit_code == 0, out.output
    (record,) = results.load()
    assert record["dataset"]["generator"] == "blobs"
    md = invoke("report").output
    assert "blobs" in md and "file float32" not in md


def test_a_sidecar_for_other_data_is_ignored(tmp_path):
    made = datasets.blobs(200, 2, 3, 1.0, 1, "float32", tmp_path / "datasets")
    meta = json.loads(made.path.with_suffix(".json").read_text())
    meta["checksum"] = "sha256:0"
    made.path.with_suffix(".json").write_text(json.dumps(meta))
    assert datasets.load_file(made.path).meta["generator"] == "file"
