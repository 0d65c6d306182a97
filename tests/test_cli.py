import json

import numpy as np
import pytest
from typer.testing import CliRunner

from kmbench.data import results
from kmbench.cli import app

cli = CliRunner()


def invoke(*args):
    return cli.invoke(app, [str(a) for a in args])


def test_list_shows_every_implementation():
    out = invoke("list")
    assert out.exit_code == 0
    for name in ("numpy-blog", "numpy", "sklearn", "scipy"):
        assert name in out.output


def test_gen_data_then_run_then_report(tmp_path):
    assert invoke("gen-data", "blobs", "--n", 400, "--seed", 2).exit_code == 0
    radial = invoke("gen-data", "radial", "--branches1", 3, "--branches2", 2, "--cluster-size", 50)
    assert radial.exit_code == 0 and "300 x 2" in radial.output
    out = invoke("run", "--n", "300,600", "--iters", 8, "--repeats", 2, "--impl", "numpy,sklearn")
    assert out.exit_code == 0, out.output
    assert len(results.load()) == 4
    md = invoke("report")
    assert md.exit_code == 0 and "| Implementation | n = 300 | n = 600 |" in md.output
    csv_out = tmp_path / "r.csv"
    assert invoke("report", "--format", "csv", "--out", csv_out).exit_code == 0
    assert csv_out.read_text().count("\n") == 5  # header + 4 cells
    js = invoke("report", "--format", "json")
    cells = json.loads(js.output)["cells"]
    assert {c["impl"] for c in cells} == {"numpy", "sklearn"} and all(c["status"] == "ok" for c in cells)


def test_run_on_a_user_text_file(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "100.csv"
    np.savetxt(path, np.hstack([rng.standard_normal((120, 2)), rng.integers(0, 3, (120, 1))]))
    out = invoke("run", "--dataset", path, "--label-column", "--k", 3, "--iters", 5, "--repeats", 1,
                 "--impl", "numpy")
    assert out.exit_code == 0, out.output
    (record,) = results.load()
    assert record["dataset"]["d"] == 2 and record["status"] == "ok"


def _bad_file(tmp_path, kind):
    path = tmp_path / f"bad-{kind}.npy"
    if kind == "nan":
        np.save(path, np.array([[1.0, np.nan], [2.0, 3.0]]))
    elif kind == "inf":
        np.save(path, np.array([[1.0, np.inf], [2.0, 3.0]]))
    elif kind == "1d":
        np.save(path, np.arange(4.0))
    elif kind == "3d":
        np.save(path, np.zeros((2, 2, 2)))
    elif kind == "empty":
        path = tmp_path / "empty.txt"
        path.write_text("")
    elif kind == "text":
        path = tmp_path / "words.txt"
        path.write_text("1 2\nthree four\n")
    elif kind == "unreadable":
        path.write_bytes(b"garbage")
    elif kind == "empty-npy":  # np.load raised EOFError, which click took for Ctrl-D: "Aborted.", exit 1
        path.write_bytes(b"")
    elif kind == "missing":
        path = tmp_path / "nothing-here.npy"
    return path


@pytest.mark.parametrize("kind", ["nan", "inf", "1d", "3d", "empty", "text", "unreadable", "empty-npy",
                                  "missing"])
def test_bad_dataset_exits_2_with_one_sentence(tmp_path, kind):
    out = invoke("run", "--dataset", _bad_file(tmp_path, kind), "--k", 1, "--repeats", 1)
    assert out.exit_code == 2
    assert "Error:" in out.output and "Traceback" not in out.output
    assert not results.store_path().exists()  # nothing written


@pytest.mark.parametrize("args,needle", [
    (["--k", 0], "--k"),
    (["--k", 500, "--n", 100], "larger than the number of points"),
    (["--iters", 0], "--iters"),
    (["--impl", "numpy,warp-drive"], "Unknown implementation 'warp-drive'"),
    (["--n", "ten"], "--n"),
    (["--init", "psychic"], "--init"),
])
def test_bad_options_exit_2(args, needle):
    out = invoke("run", "--n", 100, *args)
    assert out.exit_code == 2
    assert needle in out.output
    assert not results.store_path().exists()


def test_report_without_records_is_a_clear_error():
    out = invoke("report")
    assert out.exit_code == 2 and "No record store" in out.output


def test_report_draws_a_plot(tmp_path):
    pytest.importorskip("matplotlib")
    assert invoke("run", "--n", 200, "--iters", 3, "--repeats", 1, "--impl", "numpy").exit_code == 0
    png = tmp_path / "chart.png"
    out = invoke("report", "--out", tmp_path / "r.md", "--plot", png)
    assert out.exit_code == 0, out.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args, needle", [
    (["--tol", "0.01"], "--tol apply only with --stop tolerance"),
    (["--max-iters", "50"], "--max-iters apply only with --stop tolerance"),
    (["--tol", "0.01", "--max-iters", "50"], "--tol and --max-iters apply only"),
    (["--label-column"], "--label-column applies to a --dataset file"),
])
def test_options_that_would_change_nothing_are_refused(args, needle):
    out = invoke("run", "--n", 200, "--k", 2, "--iters", 3, "--repeats", 1, "--impl", "numpy", *args)
    assert out.exit_code == 2, out.output
    assert needle in " ".join(out.output.split())
    assert results.load() == []


@pytest.mark.parametrize("option, value", [("--n", "500"), ("--d", 3), ("--centers", 4), ("--dtype", "float64")])
def test_generation_options_with_a_dataset_are_refused(tmp_path, option, value):
    path = tmp_path / "points.npy"
    np.save(path, np.random.default_rng(0).standard_normal((100, 2)).astype(np.float32))
    out = invoke("run", "--dataset", path, "--k", 2, "--iters", 3, "--repeats", 1, "--impl", "numpy", option, value)
    assert out.exit_code == 2, out.output
    assert f"{option} describe generated blobs" in " ".join(out.output.split())


def test_sweep_refuses_a_parameter_its_generator_lacks(tmp_path):
    out = invoke("sweep", "--data", "radial", "--vary", "d=2,4", "--k", 2, "--iters", 2, "--impl", "numpy",
                 "--out", tmp_path / "s.md")
    assert out.exit_code == 2, out.output
    assert "a radial dataset has no parameter d" in " ".join(out.output.split())


def test_counts_in_scientific_notation_and_sklearns_init_spelling_are_accepted():
    out = invoke("run", "--n", "2e2,3_00", "--k", 2, "--iters", 3, "--repeats", 1, "--impl", "numpy",
                 "--init", "k-means++")
    assert out.exit_code == 0, out.output
    loaded = results.load()
    assert sorted(r["dataset"]["n"] for r in loaded) == [200, 300]
    assert {r["params"]["init"] for r in loaded} == {"kmeans++"}
    made = invoke("gen-data", "blobs", "--n", "1e3")
    assert made.exit_code == 0 and "1,000 x 2" in made.output
    assert invoke("run", "--n", "150.5", "--k", 2, "--impl", "numpy").exit_code == 2  # not a whole number


def test_flags_show_as_flags_in_help():
    for command in (["run", "--help"], ["reproduce", "--help"], ["sweep", "--help"]):
        text = invoke(*command).output
        assert "<bool>" not in text, command
    assert "--label-column" in invoke("run", "--help").output


def test_version_names_the_package_version():
    from importlib.metadata import version

    out = invoke("--version")
    assert out.exit_code == 0 and out.output.startswith(f"kmbench {version('kmbench')}")


def test_list_as_json_and_only_what_can_run_here():
    everything = json.loads(invoke("list", "--json").output)
    assert {"numpy", "sklearn", "cuda-v1"} <= {row["name"] for row in everything}
    assert set(everything[0]) == {"name", "tasks", "label", "available", "reason", "description", "source"}
    runnable = json.loads(invoke("list", "--json", "--available").output)
    assert runnable and all(row["available"] for row in runnable)
    assert [row for row in everything if row["available"]] == runnable
    table = invoke("list", "--available").output
    # The names column, not the whole text: an unavailable row's name may be part of an available
    # one's ("dask" in "dask-cuda") or of a description ("torch" in fast-pytorch-kmeans's).
    listed = {line.split("│")[1].strip() for line in table.splitlines() if line.startswith("│")} - {""}
    names = {row["name"] for row in runnable}
    assert not listed & {row["name"] for row in everything if not row["available"]}
    assert all(any(part in name for name in names) for part in listed)  # a long name may wrap


def test_the_csv_carries_every_counted_repeat(tmp_path):
    import csv
    import io

    assert invoke("run", "--n", 300, "--iters", 4, "--repeats", 3, "--impl", "numpy").exit_code == 0
    (row,) = csv.DictReader(io.StringIO(invoke("report", "--format", "csv").output))
    repeats = json.loads(row["repeat_times_s"])
    assert len(repeats) == 3 and float(row["mean_s"]) == pytest.approx(np.mean(repeats))
    (cell,) = json.loads(invoke("report", "--format", "json").output)["cells"]
    assert cell["repeat_times_s"] == pytest.approx(repeats)


def test_sweep_progress_lines_name_k(tmp_path):
    pytest.importorskip("matplotlib")
    out = invoke("sweep", "--data", "blobs", "--vary", "n=300", "--k", "2,3", "--iters", 3, "--repeats", 1,
                 "--impl", "numpy", "--out", tmp_path / "sweep.md")
    assert out.exit_code == 0, out.output
    ended = [line.split(" on ")[1].split(": ")[0] for line in out.output.splitlines() if ": ok, " in line]
    assert ended == ["blobs-n300-d2-c5-std1-s0-float32, k=2", "blobs-n300-d2-c5-std1-s0-float32, k=3"]


def test_list_off_a_terminal_wraps_its_long_cells_and_keeps_names_whole():
    """CliRunner is not a terminal: there a run's console is as wide as its tables need, and the
    list's descriptions made lines of over 1,200 characters."""
    from kmbench.cli.commands import LIST_WIDTH

    out = invoke("list")
    assert out.exit_code == 0
    assert max(len(line) for line in out.output.splitlines()) <= LIST_WIDTH
    for name in ("flash-kmeans-multi-gpu", "kmbench-gpu-stream", "numpy-blog"):
        assert any(line.startswith(f"│ {name} ") for line in out.output.splitlines()), name
