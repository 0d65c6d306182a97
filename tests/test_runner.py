import numpy as np
import pytest

from kmbench.data import results
from kmbench.protocol import runner
from kmbench.data.datasets import Dataset
from kmbench.errors import UsageError
from kmbench.protocol import Implementation
from kmbench.tasks import lloyd
from impls.cpu.numpy_fast import NumpyFast
from tests.conftest import blob_data


class Spy(NumpyFast):
    """A correct implementation that remembers what the harness handed it. It takes no thread
    count, so no calibration runs come before its warm-up (tests/test_threads.py has those)."""

    takes_threads = False

    def __init__(self, name):
        self.name = self.label = name
        self.starts, self.calls, self.prepared, self.steps = [], 0, 0, 0

    def prepare(self, problem):
        self.prepared += 1

    def run(self, problem):
        if problem.iterations == 1 or problem.trace:  # the judge's untimed validation runs
            self.steps += 1
        else:
            self.calls += 1
            self.starts.append(problem.initial_centroids.copy())
        return super().run(problem)


class Explodes(Implementation):
    name = "explodes"

    def run(self, problem):
        raise RuntimeError("kernel fell over")


class Missing(Implementation):
    name = "missing"

    def available(self):
        return False, "needs a GPU"


class Slow(NumpyFast):
    name = "slow"

    def run(self, problem):
        import time

        result = super().run(problem)
        time.sleep(0.05)
        result.phases["iterate"] = 0.05
        return result


def _dataset(n=600):
    return Dataset("unit", blob_data(np.random.default_rng(5), n=n), None, {"generator": "test"})


def test_everyone_gets_the_same_start_and_counted_repeats(tmp_path):
    a, b = Spy("a"), Spy("b")
    settings = runner.Settings(k=5, iterations=12, warmup=2, repeats=3)
    records = lloyd.run([a, b], [_dataset()], settings, store=tmp_path / "r.jsonl")
    assert a.calls == b.calls == 4  # the second warm-up + 3 counted
    assert a.steps == b.steps == 1  # the first warm-up: the judge's run that reports the trajectory (numpy traces)
    assert a.prepared == 1
    for start in a.starts + b.starts:
        np.testing.assert_array_equal(start, a.starts[0])
    assert [r["repeats_done"] for r in records] == [3, 3]
    assert all(r["iterations_executed"] == 12 for r in records)
    assert len(records[0]["times"]["iterate_values"]) == 3


def test_initial_centroids_are_distinct_points_and_seeded():
    data = _dataset().data
    first = runner.initial_centroids(data, 7, "random", 11)
    assert len({tuple(row) for row in first}) == 7
    assert all(any((row == data).all(1)) for row in first)
    np.testing.assert_array_equal(first, runner.initial_centroids(data, 7, "random", 11))
    plus = runner.initial_centroids(data, 7, "kmeans++", 11)
    assert plus.shape == (7, 2) and plus.dtype == data.dtype


def test_failures_become_statuses_and_the_run_goes_on(tmp_path):
    store = tmp_path / "r.jsonl"
    settings = runner.Settings(k=5, iterations=5, warmup=0, repeats=2)
    records = lloyd.run([Explodes(), Missing(), Spy("fine")], [_dataset()], settings, store=store)
    statuses = {r["impl"]: r["status"] for r in records}
    assert statuses == {"explodes": "error", "missing": "skipped", "fine": "ok"}
    assert "kernel fell over" in records[0]["detail"]
    assert records[1]["detail"] == "needs a GPU"
    assert len(results.load(store)) == 3


def test_time_budget_stops_repeating(tmp_path):
    settings = runner.Settings(k=5, iterations=2, warmup=0, repeats=50, max_time=0.12)
    (record,) = lloyd.run([Slow()], [_dataset()], settings, store=tmp_path / "r.jsonl")
    assert record["stopped_by_budget"] and 1 <= record["repeats_done"] < 50


def test_record_carries_environment_and_throughput(tmp_path):
    settings = runner.Settings(k=5, iterations=4, warmup=0, repeats=1)
    (record,) = lloyd.run([Spy("x")], [_dataset(n=800)], settings, store=tmp_path / "r.jsonl")
    env = record["env"]
    for key in ("cpu", "cores", "ram_bytes", "os", "python", "libraries", "threads", "command", "git_commit"):
        assert key in env
    assert "threadpools" in env["threads"]
    expected = 5 * 800 * 4 / record["times"]["iterate"]["mean"]
    assert record["distance_evals_per_s"] == pytest.approx(expected)


@pytest.mark.parametrize("settings,message", [
    (runner.Settings(k=0), "--k"),
    (runner.Settings(iterations=0), "--iters"),
    (runner.Settings(repeats=0), "--repeats"),
    (runner.Settings(init="magic"), "--init"),
])
def test_bad_settings(settings, message):
    with pytest.raises(UsageError, match=message):
        runner.check_settings(settings)


def test_k_larger_than_n():
    with pytest.raises(UsageError, match="larger than the number of points"):
        runner.initial_centroids(np.zeros((3, 2)), 4, "random", 0)


class AvailabilityRaises(Implementation):
    name = "raises-on-check"

    def available(self):
        raise OSError("driver library missing")


def test_an_availability_check_that_raises_is_a_skip(tmp_path):
    settings = runner.Settings(k=5, iterations=2, warmup=0, repeats=1)
    (record,) = lloyd.run([AvailabilityRaises()], [_dataset()], settings, store=tmp_path / "r.jsonl")
    assert record["status"] == "skipped" and "driver library missing" in record["detail"]


def test_the_progress_line_follows_the_judges_steps(tmp_path):
    from kmbench.protocol.task import run_cells

    class Notes:
        def __init__(self):
            self.seen = []

        def start(self, impl, workload):
            pass

        def note(self, text):
            self.seen.append(text)

        def done(self, record):
            pass

    notes = Notes()
    settings = runner.Settings(k=5, iterations=3, warmup=0, repeats=1)
    run_cells(lloyd.LloydTask(settings, tmp_path), [_dataset()], [Spy("spy")], tmp_path / "r.jsonl", reporter=notes)
    assert "validating spy: step 3/3" in notes.seen


class NumpyTimes(NumpyFast):
    """A correct row that reports its iterate time as a NumPy scalar, as a row timing with NumPy may."""

    name = "numpy-times"

    def run(self, problem):
        result = super().run(problem)
        result.phases["iterate"] = np.float32(result.phases["iterate"])
        result.iterate_times = None
        return result


def test_a_row_that_reports_numpy_scalar_times_is_judged_not_refused(tmp_path):
    settings = runner.Settings(k=5, iterations=4, warmup=0, repeats=2)
    (record,) = lloyd.run([NumpyTimes()], [_dataset()], settings, store=tmp_path / "r.jsonl")
    assert record["status"] == "ok", record.get("detail")
    assert all(type(t) is float for t in record["times"]["iterate_values"])
