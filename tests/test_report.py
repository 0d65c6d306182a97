import pytest
import numpy as np

from kmbench.data import datasets
from kmbench.protocol import runner
from kmbench.report import csv, markdown, report
from kmbench.report.contents import Contents
from kmbench.tasks import lloyd
from impls.cpu.numpy_fast import NumpyFast
from tests.test_validate import SkipsLastPoint


class WrongBlog(SkipsLastPoint):
    name, label = "numpy-blog", "Our Python"


def _records(tmp_path):
    data = datasets.blobs(100, 2, 5, seed=0)
    # Put one point far out so that dropping it is a clear error.
    data = datasets.Dataset(data.name, np.vstack([data.data[:-1], [[80.0, 80.0]]]).astype(np.float32),
                            None, data.meta)
    settings = runner.Settings(k=5, iterations=300, warmup=0, repeats=1)
    sklearn_like = NumpyFast()
    sklearn_like.name, sklearn_like.label = "sklearn", "scikit-learn"
    return lloyd.run([WrongBlog(), sklearn_like], [data], settings, store=tmp_path / "r.jsonl")


def test_a_mismatch_is_shown_in_every_table(tmp_path):
    records = _records(tmp_path)
    assert list(report.cells_frame(records)["status"]) == ["mismatch", "ok"]
    md = markdown.render(Contents(records))
    pivot, detail, published = md.split("| Implementation |")[1:4]
    for table in (pivot, detail, published):
        blog_line = next(line for line in table.splitlines() if line.startswith("| Our Python") or "Our Python |" in line)
        assert "MISMATCH" in blog_line.upper(), table
    assert "mismatch" in csv.render(Contents(records))


def test_published_figures_sit_beside_measured(tmp_path):
    cells = report.cells_frame(_records(tmp_path))
    blog = cells[cells["impl"] == "numpy-blog"].iloc[0]
    assert blog["published_s"] == 0.01432
    assert abs(blog["published_speedup_vs_sklearn"] - 0.00137 / 0.01432) < 1e-12
    assert blog["published_source"] == "000_187fd7a8619189e0.txt"


def test_ordering_changes_name_the_reversed_pair():
    import pandas as pd

    cells = pd.DataFrame([
        {"n": 100, "label": "A", "status": "ok", "published_s": 1.0, "mean_s": 3.0},
        {"n": 100, "label": "B", "status": "ok", "published_s": 2.0, "mean_s": 1.0},
        {"n": 100, "label": "C", "status": "ok", "published_s": 5.0, "mean_s": 9.0},
    ])
    changes = report.ordering_changes(cells)
    assert len(changes) == 1 and "published A faster than B" in changes[0]


def test_differences_within_noise_are_not_reversals():
    import pandas as pd

    cells = pd.DataFrame([
        {"n": 100, "label": "A", "status": "ok", "published_s": 1.0, "mean_s": 5.10, "std_s": 0.01},
        {"n": 100, "label": "B", "status": "ok", "published_s": 2.0, "mean_s": 5.09, "std_s": 0.01},
    ])
    assert report.ordering_changes(cells) == []
    cells.loc[1, "mean_s"] = 4.0
    assert len(report.ordering_changes(cells)) == 1


def test_ratios_follow_polarity_and_bandwidth_needs_both_figures():
    import pandas as pd

    cells = pd.DataFrame([
        {"group": "g", "n": 10, "impl": "sklearn", "status": "ok", "mean_s": 2.0, "dist_evals_per_s": 100.0,
         "threads": None},
        {"group": "g", "n": 10, "impl": "fast", "status": "ok", "mean_s": 0.5, "dist_evals_per_s": 400.0,
         "threads": None},
    ])
    assert list(report._speedups(cells, "mean_s")) == [1.0, 4.0]  # lower is better
    assert list(report._speedups(cells, "dist_evals_per_s")) == [1.0, 4.0]  # higher is better
    gpu = {"env": {"gpu": {"copy_bandwidth_Bps": 4e12}}, "bytes_per_iteration": 1e9, "per_iteration_s": 1e-3}
    assert report._roofline(gpu)["memory_fraction"] == 0.25  # 1 TB/s of a 4 TB/s copy rate
    assert report._roofline({"bytes_per_iteration": 1e9, "per_iteration_s": 1e-3})["roofline_fraction"] is None


def _gpu_record(impl, per_iter, k, n=1_000_000):
    """A GPU cell as the runner writes it: declared bytes and FP32 instructions per distance."""
    evals = k * n / per_iter
    return {"impl": impl, "label": impl, "status": "ok", "dataset": {"name": "r", "generator": "radial",
            "parameters": {}, "n": n, "d": 2, "dtype": "float32"},
            "params": {"k": k, "iterations": 10, "init": "random", "seed": 0},
            "times": {"iterate": {"mean": per_iter * 10}}, "per_iteration_s": per_iter,
            "iterations_executed": 10, "distance_evals_per_s": evals, "fp32_per_distance": 5.0,
            "bytes_per_iteration": n * 8, "achieved_bandwidth_Bps": n * 8 / per_iter,
            "env": {"gpu": {"name": "G", "copy_bandwidth_Bps": 4e12, "fp32_issue_rate": 3.3e13}}}


def test_a_cell_measured_twice_shows_its_newest_record(tmp_path):
    """The store appends records as cells finish; where one cell was measured twice, the report
    shows the later measurement, whichever way the two differ, and keeps every other cell."""
    from kmbench.data import results

    store = tmp_path / "twice.jsonl"
    first = dict(_gpu_record("v", 4e-3, k=10), timestamp="2024-01-01T00:00:00+00:00")
    other = dict(_gpu_record("w", 2e-3, k=10), timestamp="2024-01-02T00:00:00+00:00")
    second = dict(_gpu_record("v", 1e-3, k=10), status="mismatch", timestamp="2024-01-03T00:00:00+00:00")
    for record in (first, other, second):
        results.append(record, store)
    cells = report.cells_frame(results.load(store)).set_index("impl")
    assert sorted(cells.index) == ["v", "w"]
    assert cells.loc["v", "per_iter_s"] == second["per_iteration_s"]
    assert cells.loc["v", "status"] == "mismatch" and cells.loc["v", "timestamp"] == second["timestamp"]
    assert cells.loc["w", "per_iter_s"] == other["per_iteration_s"]


def test_roofline_names_the_limit_the_cell_is_near():
    compute_bound = report._roofline(_gpu_record("v", 400e-6, k=1000))
    assert compute_bound["roofline_limit"] == "FP32 issue"
    assert compute_bound["arithmetic_fraction"] == pytest.approx(1000 * 1e6 / 400e-6 * 5 / 3.3e13)
    assert compute_bound["memory_fraction"] < 0.01  # the misleading "0.3% of copy bandwidth"
    memory_bound = report._roofline(_gpu_record("v", 4e-6, k=3))
    assert memory_bound["roofline_limit"] == "memory"
    assert memory_bound["roofline_fraction"] == pytest.approx(8e6 / 4e-6 / 4e12)


def test_markdown_shows_the_roofline_position():
    md = markdown.render(Contents([_gpu_record("v", 400e-6, k=1000)]))
    assert "of FP32 issue" in md and "37.9% of FP32 issue" in md


def test_each_row_says_what_it_is_built_on_and_computes_in():
    peer = dict(_gpu_record("pykeops", 1e-3, k=10), build={"library": "pykeops 2.3", "precision": "fp32"})
    older = dict(_gpu_record("faiss-cpu", 2e-3, k=10), build={"library": "faiss 1.8", "computes_in": "float32"})
    silent = _gpu_record("numpy", 3e-3, k=10)  # declares neither: no line of its own
    md = markdown.render(Contents([peer, older, silent]))
    assert "| pykeops | pykeops 2.3 | fp32 |" in md
    assert "| faiss-cpu | faiss 1.8 | float32 |" in md  # records written before the key was renamed
    table = md.split("What each row is built on and computes in:")[1]
    assert "| numpy |" not in table.split("\n\n")[1]


def test_rows_are_set_against_the_floors_of_their_own_arithmetic():
    """A tensor-core row's compute floor is taken at the TF32 rate, an FP32 row's at the FP32
    issue rate (from the FP32 instructions older records declare); both against the copy rate."""
    from kmbench.report.formatting import seconds_text

    tensor_env = {"gpu": {"name": "G", "copy_bandwidth_Bps": 4e12, "fp32_issue_rate": 3.3e13, "tf32_flops": 4e14}}
    ours = dict(_gpu_record("kmbench-gpu", 4e-3, k=1024), env=tensor_env,
                arithmetic={"unit": "tf32", "per_distance": 256.0})
    peer = dict(_gpu_record("torch", 12e-3, k=1024), env=tensor_env)
    md = markdown.render(Contents([ours, peer], comparisons=("best-peer",)))
    table = md.split("Against the floors of each row's own work")[1]
    tf32_floor, fp32_floor = 1e6 * 1024 * 256 / 4e14, 1e6 * 1024 * 5 / 3.3e13
    assert (f"| kmbench-gpu | 1,000,000 | 4.000ms | {seconds_text(tf32_floor)} (TF32 peak) | "
            f"{4e-3 / tf32_floor:.2f}x | {seconds_text(8e6 / 4e12)} | 2000.00x |") in table
    assert f"| torch | 1,000,000 | 12.000ms | {seconds_text(fp32_floor)} (FP32 issue) | {12e-3 / fp32_floor:.2f}x |" in table
    assert f"| {4e-3 / tf32_floor:.2f}x |" in md.split("against the best peer")[1]  # the x compute floor column
    assert "Against the floors" not in markdown.render(Contents([dict(_gpu_record("v", 4e-4, k=10), env={})]))


class Declared(NumpyFast):
    """A third party's row that declares itself first in reports and its task's baseline."""
    name, label = "declared", "Declared"
    row_order = 5
    ranked_in_reports = True
    baseline = True


def test_rows_are_ordered_and_compared_as_they_declare(tmp_path, monkeypatch):
    from importlib.metadata import EntryPoint

    from kmbench import registry

    entry = EntryPoint(name="declared", value="tests.test_report:Declared", group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "entry_points", lambda group: [entry] if group == registry.ENTRY_POINT_GROUP else [])
    sklearn_like = NumpyFast()
    sklearn_like.name, sklearn_like.label = "sklearn", "scikit-learn"
    settings = runner.Settings(k=3, iterations=2, warmup=0, repeats=1)
    records = lloyd.run([sklearn_like, Declared()], [datasets.blobs(60, 2, 3, seed=0)], settings,
                        store=tmp_path / "r.jsonl")
    cells = report.cells_frame(records)
    assert list(cells["impl"]) == ["declared", "sklearn"]  # row_order 5 ranks before scikit-learn's
    assert cells.loc[0, "speedup_vs_sklearn"] == 1.0  # the declared baseline is everyone's yardstick


def test_rows_that_could_not_run_are_summed_in_one_note_per_reason_not_in_the_tables():
    """On a machine without a GPU the report was mostly skipped rows: each a line of every table,
    then a note per size repeating its reason. Now the tables hold the cells that ran, and the
    notes end with one line per reason, every skipped row named once."""
    cupy, torch = "CuPy is not installed", "PyTorch is not installed"
    skipped = [dict(_gpu_record(name, 1e-3, k=10, n=1000), status="skipped", detail=why, per_iteration_s=None)
               for name, why in (("gpu-a", cupy), ("gpu-b", cupy), ("torch", torch))]
    md = markdown.render(Contents([_gpu_record("numpy", 3e-3, k=10, n=1000)] + skipped))
    tables = md.split("Notes:")[0]
    assert "gpu-a" not in tables and "torch" not in tables and "| numpy |" in tables
    notes = md.split("Notes:")[1].strip().split("\n\n")[0].splitlines()
    assert set(notes[-2:]) == {f"- 2 rows skipped (gpu-a, gpu-b): {cupy}", f"- 1 row skipped (torch): {torch}"}
    assert md.count(cupy) == 1
    alone = markdown.render(Contents(skipped))  # nothing ran: no tables, the reasons alone
    assert "| Implementation |" not in alone and f"- 2 rows skipped (gpu-a, gpu-b): {cupy}" in alone
