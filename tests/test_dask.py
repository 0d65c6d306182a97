"""Lloyd on Dask: a LocalCluster in this process, agreement with the oracle under both stop
rules, and a run against an existing scheduler given by address (kmbench run --scheduler)."""

import numpy as np
import pytest

pytest.importorskip("distributed")

from impls.dask_impl import DaskCudaLloyd, DaskLloyd  # noqa: E402
from kmbench.protocol import Options, runner, validate  # noqa: E402
from kmbench.data.datasets import Dataset  # noqa: E402
from kmbench.tasks import lloyd  # noqa: E402
from tests.conftest import blob_data  # noqa: E402


def _cell(tol=None, iterations=15, n=20_003, impl=None, scheduler=None):
    data = blob_data(np.random.default_rng(8), n=n, d=3, k=6)
    dataset = Dataset("dask", data, None, {"generator": "test"})
    settings = runner.Settings(k=6, iterations=iterations, warmup=0, repeats=1,
                               stop="iterations" if tol is None else "tolerance", tol=tol or 0.0)
    problem = runner.make_problem(dataset, settings, Options(scheduler=scheduler))
    oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, iterations, tol=problem.tol)
    impl = impl or DaskLloyd()
    impl.min_chunk_rows = 1000  # several chunks even on test-sized data
    return oracle, runner.run_cell(impl, problem, oracle, dataset, settings, "t")


def test_dask_row_is_ok_on_a_local_cluster():
    _, record = _cell()
    assert record["status"] == "ok", record.get("detail")
    assert record["build"]["scheduler"] == "LocalCluster in process"
    assert record["build"]["chunks"] > 1 and record["iterations_executed"] == 15


@pytest.mark.gpu
def test_dask_cuda_row_is_ok_with_a_worker_per_gpu():
    pytest.importorskip("dask_cuda")
    _, record = _cell(impl=DaskCudaLloyd(), n=200_003)
    assert record["status"] == "ok", record.get("detail")
    assert record["build"]["workers"] >= 1 and record["build"]["chunks"] > 1


def test_dask_row_stops_by_the_tolerance_rule():
    oracle, record = _cell(tol=0.0, iterations=100)
    assert record["status"] == "ok", record.get("detail")
    assert record["iterations_executed"] == oracle.iterations < 100


def test_an_existing_scheduler_by_address():
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        _, record = _cell(iterations=5, n=5_000, scheduler=cluster.scheduler_address)
    assert record["status"] == "ok", record.get("detail")
    assert record["build"]["scheduler"].startswith(("tcp://", "inproc://"))
    assert record["build"]["workers"] == 2


def test_an_unreachable_scheduler_is_an_error_cell():
    _, record = _cell(iterations=2, n=500, scheduler="tcp://127.0.0.1:1")
    assert record["status"] == "error" and "Dask scheduler" in record["detail"]


class _LosesAWorker(DaskLloyd):
    """The dask row, one of whose workers is closed after its first iteration."""

    name = "dask-loses-a-worker"
    seen: dict = {}

    def run(self, problem):
        self.seen["cluster"] = self._cluster
        return super().run(problem)


def test_a_worker_lost_mid_run_is_one_sentence_and_a_closed_cluster(tmp_path, monkeypatch):
    """The worker takes its scattered chunks with it: the cell ends as an error that says so in
    one sentence, the cluster is closed, and the store holds that whole record and nothing else."""
    import impls.dask_impl as dask_impl
    from kmbench.data import results

    calls = []

    def stop_after_losing_a_worker(changed, n, tol):
        calls.append(changed)
        if len(calls) == 1:  # after the first iteration: close a worker that holds chunks
            cluster = _LosesAWorker.seen["cluster"]
            cluster.sync(next(iter(cluster.workers.values())).close)
        return False

    monkeypatch.setattr(dask_impl, "stop_done", stop_after_losing_a_worker)
    data = blob_data(np.random.default_rng(8), n=20_003, d=3, k=6)
    impl = _LosesAWorker()
    impl.min_chunk_rows = 1000
    store = tmp_path / "records.jsonl"
    records = lloyd.run([impl], [Dataset("dask", data, None, {"generator": "test"})],
                        runner.Settings(k=6, iterations=10, warmup=0, repeats=1), store)
    assert [r["status"] for r in records] == ["error"]
    assert records[0]["detail"].startswith("a Dask worker was lost mid-run") and "\n" not in records[0]["detail"]
    assert len(calls) >= 1
    assert _LosesAWorker.seen["cluster"].status.name == "closed"
    assert not hasattr(impl, "_cluster") and not hasattr(impl, "_client")
    stored = results.load(store)
    assert [(r["impl"], r["status"]) for r in stored] == [("dask-loses-a-worker", "error")]
