"""The assign and batched tasks end to end on the CPU: task suites parse, problems are built
by the harness, cells are measured, judged, stored with their task (apart from Lloyd's
records) and rendered beside the published figures; a wrong implementation is flagged; the
CUDA sources of both families compile with nvcc."""

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from impls.assign_numpy import AssignNumpy
from impls.batched_sklearn import BatchedSklearn
from kmbench import registry
from kmbench.data import results
from kmbench.plans import suite
from kmbench.report import markdown
from kmbench.report.contents import Contents
from kmbench.tasks import assign, tasks
from kmbench.cli import app
from kmbench.errors import UsageError

IMPLS = Path(__file__).resolve().parent.parent / "impls"
SOURCES = sorted((IMPLS / "assign_ladder").glob("*.cu")) + sorted((IMPLS / "batched_gpu").glob("*.cu"))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_task_kernel_sources_compile_with_nvcc(source, tmp_path):
    done = subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-std=c++17", f"-I{source.parent}",
                           "-o", str(tmp_path / "k.cubin"), str(source)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_ladder_has_a_source_per_step():
    names = {p.name for p in SOURCES}
    assert {"v1_local.cu", "v2_prefetch.cu", "v3_template.cu", "v4_four_points.cu", "v5_unroll_clusters.cu",
            "v6_no_atomic.cu", "fastest.cu", "block_per_row.cu", "warp_per_row.cu"} <= names


@pytest.mark.parametrize("name, task", [("assign-ladder", "assign"), ("batched", "batched")])
def test_task_suites_parse_and_name_implementations_of_their_task(name, task):
    loaded = suite.load(name)
    assert isinstance(loaded, tasks.TaskSuite) and loaded.task == task
    chosen = registry.select(",".join(loaded.impls), task=task)
    assert [impl.name for impl in chosen] == loaded.impls
    assert loaded.cell_count() == len(loaded.workloads) * len(loaded.impls)


def test_a_broken_task_suite_is_one_sentence():
    raw = {"task": "batched", "title": "t", "source": "s", "impls": ["batched-numpy"],
           "workloads": [{"rows": 2, "points": 5, "d": 1, "k": 2, "seeds": 2, "colour": "red"}]}
    with pytest.raises(UsageError, match="unknown workload keys colour"):
        suite.parse("x", raw)
    with pytest.raises(UsageError, match="task must be"):
        suite.parse("x", {**raw, "task": "fft"})


def test_the_assign_problem_is_a_second_pass():
    problem = tasks.assign_problem(n=5000, d=2, k=8, seed=3)
    oracle = assign.AssignOracle.compute(problem)
    assert problem.data.dtype == np.float32 and problem.centroids.shape == (8, 2)
    assert oracle.changed and 0 < (oracle.labels != problem.previous).sum() < 5000


def _tiny(task: str, impls: list, **protocol) -> tasks.TaskSuite:
    if task == "assign":
        workloads = [{"n": 3000, "d": 1, "k": 16, "seed": 0}]
        return suite.parse("assign-ladder", {"task": task, "title": "t", "source": "001", "published": "assign-ladder",
                                             "impls": impls, "workloads": workloads, "protocol": protocol})
    workloads = [{"rows": 40, "points": 30, "d": 1, "k": 3, "seeds": 4, "stop": "epsilon", "epsilon": 0.02,
                  "iterations": 100}]
    return suite.parse("batched", {"task": task, "title": "t", "source": "003", "published": "batched",
                                   "impls": impls, "workloads": workloads, "protocol": protocol})


def test_task_cells_are_stored_apart_from_lloyd_and_reused(tmp_path):
    store = tmp_path / "records.jsonl"
    chosen = _tiny("assign", ["assign-numpy"], repeats=2, warmup=0)
    records = tasks.reproduce(chosen, None, store)
    assert [r["status"] for r in records] == ["ok"]
    assert records[0]["task"] == "assign" and records[0]["times"]["run"]["count"] == 2
    assert results.load(store) == []  # Lloyd's readers do not see task records
    assert len(results.load(store, task="assign")) == 1
    again = tasks.reproduce(chosen, None, store)  # same code, same machine: taken from the store
    assert again[0]["run_id"] == records[0]["run_id"] and len(results.load(store, task="assign")) == 1
    tasks.reproduce(chosen, None, store, force=True)
    assert len(results.load(store, task="assign")) == 2
    text = markdown.render(Contents(tasks.latest(chosen, store), suites={chosen.name: chosen}))
    assert "NumPy (assign)" in text and "| ok |" in text


class OffByOne(AssignNumpy):
    """A wrong kernel: every label one higher, modulo k."""

    name = "assign-off-by-one"

    def run(self, problem):
        result = super().run(problem)
        return assign.AssignResult((result.labels + 1) % problem.k, result.changed)


def test_a_wrong_assign_kernel_is_a_mismatch_in_the_table():
    chosen = _tiny("assign", ["assign-numpy"])
    task = tasks.task_of(chosen)
    problem = task.problem(chosen.workloads[0])
    oracle = task.oracle(chosen.workloads[0], problem)
    record = task.measure(OffByOne(), problem, oracle, chosen.workloads[0], "run")
    assert record["status"] == "mismatch" and "not the nearest centroid" in record["detail"]
    # The header the runner adds (kmbench.protocol.task), which a record's readers need.
    record.update(task="assign", suite=chosen.name, workload="w", spec=chosen.workloads[0], impl="off-by-one",
                  label="off by one", step=None)
    text = task.render([record])
    assert f"~~{record['seconds'] * 1e6:.1f}~~" in text and "**mismatch**" in text


def test_a_budget_cut_row_is_judged_on_its_rows_and_extrapolated():
    chosen = _tiny("batched", ["batched-sklearn"], budget_s=0.0)
    task = tasks.task_of(chosen)
    problem = task.problem(chosen.workloads[0])
    oracle = task.oracle(chosen.workloads[0], problem)
    record = task.measure(BatchedSklearn(), problem, oracle, chosen.workloads[0], "run")
    assert record["status"] == "ok", record["detail"]
    assert record["rows_done"] == 1 and record["repeats_done"] == 1  # one budgeted run, no warm-up
    assert record["extrapolated_seconds"] == pytest.approx(record["seconds"] * 40)
    record.update(task="batched", suite=chosen.name, workload="w", spec=chosen.workloads[0], label="loop",
                  impl="batched-sklearn")
    assert "extrapolated from 1 rows" in task.render([record])


def test_reproduce_batched_from_the_command_line(tmp_path):
    runner = CliRunner()
    store, out = tmp_path / "r.jsonl", tmp_path / "batched.md"
    wrong = runner.invoke(app, ["reproduce", "batched", "--impl", "assign-v1", "--store", str(store)])
    assert wrong.exit_code != 0 and "serves the assign task" in wrong.output
    missing = runner.invoke(app, ["reproduce", "assign-ladder", "--no-run", "--store", str(store),
                                  "--out", str(out)])
    assert missing.exit_code != 0 and "No stored record" in missing.output


def test_rows_that_cannot_run_cost_no_data_and_no_oracle(tmp_path, monkeypatch):
    built = []
    monkeypatch.setattr(tasks.AssignTask, "problem", lambda *args: built.append(args))
    chosen = _tiny("assign", ["assign-v1"])
    monkeypatch.setattr(registry.discover()["assign-v1"].__class__, "available", lambda self: (False, "no GPU here"))
    records = tasks.reproduce(chosen, None, tmp_path / "r.jsonl")
    assert [r["status"] for r in records] == ["skipped"] and records[0]["detail"] == "no GPU here"
    assert built == []
