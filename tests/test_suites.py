"""Suites as data, sweeps that skip finished cells, and the plots they draw (issue 9)."""

import numpy as np
import pytest
from typer.testing import CliRunner

from kmbench.data import results
from kmbench.plans import plan, suite
from kmbench.protocol import runner
from kmbench.report import published
from kmbench.tasks import tasks
from kmbench.cli import app
from kmbench.errors import UsageError

cli = CliRunner(env={"COLUMNS": "200"})


def invoke(*args):
    return cli.invoke(app, [str(a) for a in args])


def test_every_shipped_suite_loads_and_expands():
    assert {"python-cpp-cuda", "radial-tree"} <= set(suite.names())
    for name in suite.names():
        loaded = suite.load(name)
        if loaded.published:
            assert published.table(loaded.published)["source"] == loaded.source
        if isinstance(loaded, tasks.TaskSuite):
            continue  # test_tasks.py
        steps = loaded.steps()
        assert steps and all(step.impls for step in steps)


def test_radial_tree_suite_is_document_002s_protocol():
    loaded = suite.load("radial-tree")
    steps = loaded.steps()
    assert sorted({step.settings.k for step in steps}) == [3, 10, 30, 100, 1000]
    assert {plan.dataset_name(step.spec)[1] for step in steps} == {1_000_000, 100_000_000}
    assert all(step.settings.stop == "tolerance" and step.settings.tol == 0 and step.settings.iterations == 30
               for step in steps)
    big = [step for step in steps if plan.dataset_name(step.spec)[1] == 100_000_000]
    assert all(impl.name.startswith("cuda") for step in big for impl in step.impls)


@pytest.mark.parametrize("raw, message", [
    ({"title": "t", "source": "s", "datasets": [{}]}, "lacks protocol"),
    ({"title": "t", "source": "s", "protocol": {"k": 3}, "datasets": [{}]}, "non-empty list"),
    ({"title": "t", "source": "s", "protocol": {"k": [3], "speed": 1}, "datasets": [{}]}, "unknown protocol"),
    ({"title": "t", "source": "s", "protocol": {"k": [3]}, "datasets": [{}], "plots": ["pie"]}, "plots"),
])
def test_a_broken_suite_is_one_sentence(raw, message):
    with pytest.raises(UsageError, match=message):
        suite.parse("broken", raw)


def test_adding_a_suite_is_adding_one_file(tmp_path, monkeypatch):
    folder = tmp_path / "suites"
    folder.mkdir()
    (folder / "tiny.toml").write_text(
        'title = "tiny"\nsource = "mine"\nplots = ["sweep"]\nimpls = ["numpy"]\n'
        '[protocol]\nk = [2, 3]\niterations = 4\nrepeats = 1\n'
        '[[datasets]]\ngenerator = "blobs"\nn = [150, 300]\n')
    monkeypatch.setattr(suite, "_folder", lambda: folder)
    assert suite.names() == ["tiny"]
    out = invoke("reproduce", "tiny", "--out", tmp_path / "tiny.md")
    assert out.exit_code == 0, out.output
    assert len(results.load()) == 4
    assert (tmp_path / "tiny-log.png").stat().st_size > 0 and (tmp_path / "tiny-linear.png").exists()
    assert "tiny" in (tmp_path / "tiny.md").read_text()


@pytest.mark.parametrize("content", [b"\xff\xfe\x00binary", b"", b"title = ", b"[[datasets]]\nn = 'x'\n"],
                         ids=["not-text", "empty", "cut-short", "wrong-types"])
def test_a_damaged_suite_file_is_one_sentence_and_exit_2(tmp_path, monkeypatch, content):
    folder = tmp_path / "suites"
    folder.mkdir()
    (folder / "broken.toml").write_bytes(content)
    monkeypatch.setattr(suite, "_folder", lambda: folder)
    out = invoke("reproduce", "broken", "--out", tmp_path / "b.md")
    assert out.exit_code == 2, out.output
    assert "Traceback" not in out.output and "broken" in out.output


def test_reproduce_list_and_unknown_name():
    listed = invoke("reproduce", "--list")
    assert listed.exit_code == 0 and "radial-tree" in listed.output and "python-cpp-cuda" in listed.output
    unknown = invoke("reproduce", "nope")
    assert unknown.exit_code == 2 and "Unknown suite" in unknown.output


def _sweep(tmp_path, *extra):
    return invoke("sweep", "--data", "blobs", "--vary", "n=300,600", "--k", "2,4", "--iters", "3,6",
                  "--repeats", 1, "--impl", "numpy", "--out", tmp_path / "s.md", *extra)


def test_sweep_runs_the_grid_skips_on_rerun_and_plots(tmp_path):
    first = _sweep(tmp_path)
    assert first.exit_code == 0, first.output
    records = results.load()
    assert len(records) == 8
    assert {(r["dataset"]["n"], r["params"]["k"], r["params"]["iterations"]) for r in records} == \
        {(n, k, t) for n in (300, 600) for k in (2, 4) for t in (3, 6)}
    for png in ("s-log.png", "s-linear.png"):
        assert (tmp_path / png).stat().st_size > 10_000
    again = _sweep(tmp_path)
    assert again.exit_code == 0 and len(results.load()) == 8
    assert "8 cells skipped" in " ".join(again.output.split())
    forced = _sweep(tmp_path, "--force")
    assert forced.exit_code == 0 and len(results.load()) == 16


def test_a_plans_records_are_the_newest_of_each_cell(tmp_path):
    """`--no-run` reports the stored records of a plan's cells: of a cell measured twice, the
    later record; a cell outside the plan, not at all."""
    from dataclasses import asdict
    from types import SimpleNamespace

    step = plan.Step(plan._filled({"generator": "blobs", "n": 300}), runner.Settings(k=2, iterations=3),
                     [SimpleNamespace(name="numpy")])

    def record(impl, k, mean):
        return {"impl": impl, "label": impl, "status": "ok", "params": asdict(runner.Settings(k=k, iterations=3)),
                "dataset": {"name": step.name, "n": 300, "d": 2}, "times": {"iterate": {"mean": mean}}}

    store = tmp_path / "plan.jsonl"
    for written in (record("numpy", 2, 3.0), record("numpy", 3, 2.0), record("sklearn", 2, 4.0),
                    record("numpy", 2, 1.0)):
        results.append(written, store)
    (chosen,) = plan.latest_records([step], store)
    assert chosen["params"]["k"] == 2 and chosen["times"]["iterate"]["mean"] == 1.0


def test_sweep_does_not_skip_cells_measured_by_other_code(tmp_path, monkeypatch):
    from kmbench.protocol import environment
    assert _sweep(tmp_path).exit_code == 0
    environment.capture.cache_clear()
    monkeypatch.setattr(environment, "code_hash", lambda: "other-code")
    try:
        assert _sweep(tmp_path).exit_code == 0
        assert len(results.load()) == 16
    finally:
        environment.capture.cache_clear()


def test_sweep_checks_the_whole_grid_before_writing(tmp_path):
    out = invoke("sweep", "--data", "blobs", "--vary", "n=300,5", "--k", "2,6", "--impl", "numpy",
                 "--out", tmp_path / "s.md")
    assert out.exit_code == 2 and "larger than the number of points (5)" in out.output
    assert not (tmp_path / "datasets").exists() and results.load() == []


def test_radial_size_by_n():
    spec = plan._filled({"generator": "radial", "n": 100_000})
    assert spec["cluster_size"] == 2000 and plan.dataset_name(spec)[1] == 100_000


def test_peak_rates_table_sets_published_beside_measured():
    from kmbench.report import comparisons, report
    record = {"impl": "cpp", "label": "Our C++", "status": "ok",
              "dataset": {"name": "radial-x", "generator": "radial", "parameters": {}, "n": 1_000_000, "d": 2,
                          "dtype": "float32"},
              "params": {"k": 100, "iterations": 30, "stop": "tolerance", "tol": 0.0, "init": "random", "seed": 0},
              "times": {"iterate": {"mean": 2.0}}, "iterations_executed": 20, "reference_iterations": 20,
              "distance_evals_per_s": 100 * 1e6 * 20 / 2.0, "per_iteration_s": 0.1}
    md = "\n".join(comparisons.rates_markdown(report.cells_frame([record]), "radial-tree"))
    assert "| sequential code, one CPU core, peak over all parameters | cpp | 0.95 | 1 |" in md
    assert "h = 20" in md


def test_numpy_blog_refuses_what_memory_cannot_hold():
    from impls.cpu.numpy_blog import NumpyBlog
    from kmbench.data.datasets import Dataset
    from kmbench.errors import ImplementationError

    data = np.zeros((1, 2), dtype=np.float32) + np.arange(2)
    big = runner.make_problem(Dataset("t", np.repeat(data, 3, 0), None, {}), runner.Settings(k=2, iterations=1))
    from dataclasses import replace

    huge = replace(big, data=np.lib.stride_tricks.as_strided(big.data, (10**9, 2), (0, 4)))
    with pytest.raises(ImplementationError, match="GiB"):
        NumpyBlog().prepare(huge)


def test_yinyang_suite_is_document_004s_protocol():
    steps = suite.load("yinyang").steps()
    gpu, cpu = steps[:2]
    assert plan.dataset_name(gpu.spec)[1] == 300_000 and gpu.spec["d"] == 408
    assert (gpu.settings.k, gpu.settings.stop, gpu.settings.tol) == (5000, "tolerance", 0.01)
    assert {"yinyang-gpu", "kmbench-gpu", "kmcuda", "kmcuda-yinyang"} <= {impl.name for impl in gpu.impls}
    # the CPU rows: a budget of two iterations under the iterations rule, one counted repeat
    assert (cpu.settings.stop, cpu.settings.iterations, cpu.settings.repeats) == ("iterations", 2, 1)
    assert cpu.settings.k == 5000 and cpu.name == gpu.name


def test_a_dataset_entry_may_set_its_own_protocol():
    steps = plan.expand([{"generator": "blobs", "n": 100, "stop": "tolerance", "tol": 0.5, "warmup": 0},
                         {"generator": "blobs", "n": 100}], runner.Settings(k=3, iterations=7), [3],
                        impl_names="numpy")
    assert (steps[0].settings.stop, steps[0].settings.tol, steps[0].settings.warmup) == ("tolerance", 0.5, 0)
    assert (steps[1].settings.stop, steps[1].settings.warmup) == ("iterations", 1)


def _whole_run_record(impl, status, stop, iterations, per_iteration, reference=40):
    return {"impl": impl, "label": impl, "status": status,
            "dataset": {"name": "blobs-x", "generator": "blobs", "parameters": {}, "n": 300_000, "d": 408,
                        "dtype": "float32"},
            "params": {"k": 5000, "iterations": 500 if stop == "tolerance" else iterations, "stop": stop,
                       "tol": 0.01, "init": "random", "seed": 0},
            "times": {"iterate": {"mean": per_iteration * iterations}}, "iterations_executed": iterations,
            "reference_iterations": reference if stop == "tolerance" else iterations,
            "per_iteration_s": per_iteration, "memory": {"host_bytes": 2e6, "gpu_bytes": 3.5e9}}


def test_whole_run_table_extrapolates_budget_rows_and_says_so():
    from kmbench.report import comparisons, report
    records = [_whole_run_record("kmcuda", "ok", "tolerance", 40, 0.5),
               _whole_run_record("sklearn", "mismatch", "iterations", 2, 3.0)]
    md = "\n".join(comparisons.whole_run_markdown(report.cells_frame(records), "yinyang"))
    sklearn_line = next(line for line in md.splitlines() if line.startswith("| sklearn"))
    assert "~2m 00s (extrapolated from 2 iterations to 40)" in sklearn_line  # 3 s x 40
    assert "MISMATCH" in sklearn_line and "> 3h 00m" in sklearn_line
    kmcuda_line = next(line for line in md.splitlines() if line.startswith("| kmcuda"))
    assert "3.5 GB" in kmcuda_line and "1.0 GB" in kmcuda_line  # measured and published memory
    assert "KMeansRex" in md.split("Published rows not measured here")[1]


def test_embeddings_suite_has_the_issues_eight_shapes_and_every_gpu_row():
    steps = suite.load("embeddings").steps()
    shapes = {(step.spec["n"], step.spec["d"], step.settings.k) for step in steps}
    assert shapes == {(1_000_000, 128, 1024), (1_000_000, 64, 1000), (300_000, 408, 5000),
                      (10_000_000, 128, 4096), (1_000_000, 768, 4096),
                      (1_000_000, 128, 16_384), (1_000_000, 96, 8192),  # the two large-k shapes of issue 50
                      (1_000_000, 256, 4096)}  # issue 64's: where flashlib's CuTe DSL path runs
    names = {impl.name for step in steps for impl in step.impls}
    assert {"kmbench-gpu", "flash-kmeans", "flash-kmeans-fp16", "flashlib", "flashlib-fp16", "triton-fused",
            "yinyang-gpu", "torch"} <= names


def test_a_plan_asked_for_a_thread_count_runs_a_row_stored_only_at_another():
    """kmbench-cpu stored at 1 thread; a sweep asked for 4 (--threads, $KMBENCH_THREADS) must
    run it, and one asked for no count, or for 1, finds it measured."""
    from kmbench.data import cells
    from kmbench.protocol import Options
    from kmbench.registry import discover

    row, other = discover()["kmbench-cpu"], discover()["scipy"]  # scipy: its threads are its own
    step = plan.Step({"generator": "blobs", "n": 1000, "d": 2, "centers": 5, "seed": 0, "std": 1.0, "dtype": "float32"},
                     runner.Settings(k=5, iterations=10), [row, other])
    stored = [{"impl": impl.name, "status": "ok", "build": {"threads": 1} if impl is row else {},
               "dataset": {"name": step.name},
               "params": {"k": 5, "iterations": 10, "stop": "iterations", "tol": 0.0, "init": "random", "seed": 0}}
              for impl in (row, other)]
    done = set(cells.finished(stored, lambda record: True))
    assert plan.remaining(step, done, Options(threads=4)) == [row]
    assert plan.remaining(step, done, Options(threads=1)) == []
    assert plan.remaining(step, done) == []
