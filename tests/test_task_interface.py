"""The one Task notion (kmbench.protocol.task): Lloyd, assign and batched each fill in the same
interface, run through the one runner (run_cells) and render through the one method, and the
runner treats them alike: a record per cell stored as it exists, a wrong result judged a
mismatch by the task's own judge, a row that cannot run skipped with its reason."""

import numpy as np
import pytest

from impls.cpu.assign_numpy import AssignNumpy
from impls.peers.batched_sklearn import BatchedSklearn
from impls.cpu.numpy_fast import NumpyFast
from kmbench.data import results
from kmbench.data.datasets import Dataset
from kmbench.protocol import runner, task as task_module
from kmbench.protocol.task import Task, run_cells
from kmbench.tasks import assign, lloyd, tasks
from tests.conftest import blob_data


def _lloyd():
    data = blob_data(np.random.default_rng(5), n=600)
    return lloyd.LloydTask(runner.Settings(k=3, iterations=4, repeats=2, warmup=1)), Dataset("blobs-t", data, None, {"generator": "test"})


def _assign():
    suite = tasks.parse("t-assign", {"task": "assign", "title": "t", "source": "001", "impls": ["assign-numpy"],
                                     "workloads": [{"n": 2000, "d": 2, "k": 8, "seed": 1}],
                                     "protocol": {"repeats": 2, "warmup": 0}})
    return tasks.task_of(suite), suite.workloads[0]


def _batched():
    suite = tasks.parse("t-batched", {"task": "batched", "title": "t", "source": "003", "impls": ["batched-sklearn"],
                                      "workloads": [{"rows": 20, "points": 30, "d": 1, "k": 3, "seeds": 3,
                                                     "stop": "iterations", "iterations": 5}],
                                      "protocol": {"repeats": 2, "warmup": 0}})
    return tasks.task_of(suite), suite.workloads[0]


CASES = {"lloyd": (_lloyd, NumpyFast), "assign": (_assign, AssignNumpy), "batched": (_batched, BatchedSklearn)}


@pytest.mark.parametrize("name", list(CASES))
def test_each_task_fills_every_method_of_the_interface(name):
    make, _ = CASES[name]
    task, _ = make()
    assert isinstance(task, Task) and task.name == name
    for method in ("describe", "problem", "oracle", "judge", "render"):
        assert getattr(type(task), method) is not getattr(Task, method), f"{name} leaves {method} to the base"


@pytest.mark.parametrize("name", list(CASES))
def test_the_one_runner_measures_stores_and_renders_every_task(name, tmp_path):
    make, impl_class = CASES[name]
    task, workload = make()
    store = tmp_path / "r.jsonl"
    records = run_cells(task, [workload], [impl_class()], store)
    assert [r["status"] for r in records] == ["ok"], records[0].get("detail")
    assert records[0]["impl"] == impl_class.name and records[0]["env"]
    stored = results.load(store, task=name)
    assert [r["run_id"] for r in stored] == [records[0]["run_id"]]  # written as it was measured
    text = task.render(records, source=str(store))
    assert records[0]["label"] in text or impl_class.name in text


class _WrongLloyd(NumpyFast):
    name = "numpy-wrong"

    def run(self, problem):
        result = super().run(problem)
        result.centroids = result.centroids + 1.0
        return result


class _WrongAssign(AssignNumpy):
    name = "assign-wrong"

    def run(self, problem):
        result = super().run(problem)
        return assign.AssignResult((result.labels + 1) % problem.k, result.changed)


class _WrongBatched(BatchedSklearn):
    name = "batched-wrong"

    def run(self, problem):
        result = super().run(problem)
        result.inertia = np.asarray(result.inertia) * 2 + 1
        return result


@pytest.mark.parametrize("name, wrong", [("lloyd", _WrongLloyd), ("assign", _WrongAssign), ("batched", _WrongBatched)])
def test_a_wrong_row_is_a_mismatch_by_its_tasks_judge(name, wrong, tmp_path):
    task, workload = CASES[name][0]()
    records = run_cells(task, [workload], [wrong()], tmp_path / "r.jsonl")
    assert records[0]["status"] == "mismatch"


@pytest.mark.parametrize("name", list(CASES))
def test_a_row_that_cannot_run_is_skipped_before_any_problem_exists(name, tmp_path, monkeypatch):
    task, workload = CASES[name][0]()
    impl_class = CASES[name][1]
    made = []
    monkeypatch.setattr(type(task), "problem", lambda self, w: made.append(w))
    monkeypatch.setattr(impl_class, "available", lambda self: (False, "not here"))
    records = run_cells(task, [workload], [impl_class()], tmp_path / "r.jsonl")
    assert [(r["status"], r["detail"]) for r in records] == [("skipped", "not here")]
    assert made == []


def test_usable_turns_a_failing_check_into_a_reason():
    class Broken(NumpyFast):
        def available(self):
            raise OSError("driver gone")

    assert task_module.usable(Broken()) == (False, "availability check failed: driver gone")
