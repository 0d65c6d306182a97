"""The one Task notion (kmbench.protocol.task): Lloyd, assign and batched each fill in the same
interface, run through the one runner (run_cells) and render through the one method, and the
runner treats them alike: a record per cell stored as it exists, a wrong result judged a
mismatch by the task's own judge, a row that cannot run skipped with its reason."""

import numpy as np
import pytest

from impls.assign_numpy import AssignNumpy
from impls.batched_sklearn import BatchedSklearn
from impls.numpy_fast import NumpyFast
from kmbench.data import results
from kmbench.data.datasets import Dataset
from kmbench.plans import suite
from kmbench.protocol import runner, task as task_module
from kmbench.protocol.task import Task, run_cells
from kmbench.tasks import assign, lloyd, tasks
from tests.conftest import blob_data


def _lloyd():
    data = blob_data(np.random.default_rng(5), n=600)
    return lloyd.LloydTask(runner.Settings(k=3, iterations=4, repeats=2, warmup=1)), Dataset("blobs-t", data, None, {"generator": "test"})


def _assign():
    chosen = suite.parse("t-assign", {"task": "assign", "title": "t", "source": "001", "impls": ["assign-numpy"],
                                     "workloads": [{"n": 2000, "d": 2, "k": 8, "seed": 1}],
                                     "protocol": {"repeats": 2, "warmup": 0}})
    return tasks.task_of(chosen), chosen.workloads[0]


def _batched():
    chosen = suite.parse("t-batched", {"task": "batched", "title": "t", "source": "003", "impls": ["batched-sklearn"],
                                      "workloads": [{"rows": 20, "points": 30, "d": 1, "k": 3, "seeds": 3,
                                                     "stop": "iterations", "iterations": 5}],
                                      "protocol": {"repeats": 2, "warmup": 0}})
    return tasks.task_of(chosen), chosen.workloads[0]


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


def _claims_too_long(row_class):
    """The row, claiming far more time for its timed region than the whole call took."""

    class ClaimsTooLong(row_class):
        name = f"{row_class.name}-slow-claim"

        def run(self, problem):
            result = super().run(problem)
            if hasattr(result, "phases"):  # Lloyd: the claim rides on the result
                result.phases["iterate"] = 1e3
            self.phases = {"iterate": 1e3}  # assign and batched: on the row
            return result

    return ClaimsTooLong


@pytest.mark.parametrize("name", list(CASES))
def test_every_task_checks_the_claimed_time_against_the_harness_clock(name, tmp_path):
    task, workload = CASES[name][0]()
    (record,) = run_cells(task, [workload], [_claims_too_long(CASES[name][1])()], tmp_path / "r.jsonl")
    assert record["status"] == "error" and "inside a call the harness timed" in record["detail"]


@pytest.mark.parametrize("name", list(CASES))
def test_every_task_releases_a_row_that_fails_and_records_the_error(name, tmp_path):
    released = []

    class Fails(CASES[name][1]):
        def run(self, problem):
            raise RuntimeError("out of memory on the device\nsecond line")

        def release(self):
            released.append(True)

    task, workload = CASES[name][0]()
    (record,) = run_cells(task, [workload], [Fails()], tmp_path / "r.jsonl")
    assert (record["status"], record["detail"]) == ("error", "out of memory on the device")
    assert "RuntimeError" in record["traceback"] and released == [True] and "build" in record
    assert record["run_id"] and record["label"] and record["timestamp"]  # the one header, whatever went wrong
