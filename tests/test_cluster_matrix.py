"""The benchmark matrix on a Dask cluster (`--scheduler`, kmbench/protocol/placement.py): on a
local cluster of two single-threaded worker processes, the same cells and verdicts as a run
here; every record names its host and worker, and comes back to the client's store, which
no worker writes; a worker lost mid-cell is an error cell, and the rest of the run goes on."""

import os
import platform
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

distributed = pytest.importorskip("distributed")

from kmbench.cli import app  # noqa: E402
from kmbench.data import cells, results  # noqa: E402
from kmbench.data.datasets import Dataset  # noqa: E402
from kmbench.errors import UsageError  # noqa: E402
from kmbench.protocol import Implementation, Result, runner  # noqa: E402
from kmbench.protocol.placement import Cluster  # noqa: E402
from kmbench.plans import suite  # noqa: E402
from kmbench.tasks import lloyd  # noqa: E402

# Three cells for the workers, one that needs a GPU (without one, skipped there as here), and a
# Dask row that spans the cluster.
ROWS = "numpy,sklearn,scipy,cuda-v1,dask"


def local_cluster(folder):
    """Two worker processes of one thread each, on 127.0.0.1, whose own record store (were
    anything to write one) is a file of their own."""
    return distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                    dashboard_address="127.0.0.1:0",
                                    env={"KMBENCH_RESULTS": str(folder / "workers-store.jsonl")})


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cluster")
    with local_cluster(folder) as started:
        started.folder = folder
        yield started


def run(store, *args):
    ran = CliRunner().invoke(app, ["run", "--n", "3000", "--k", "4", "--iters", "8", "--repeats", "1",
                                   "--impl", ROWS, "--store", str(store), *args])
    assert ran.exit_code == 0, ran.output
    return results.load(store)


def test_a_matrix_on_two_workers_has_a_local_runs_cells_and_verdicts(tmp_path, cluster, monkeypatch):
    monkeypatch.delenv("KMBENCH_DASK_SCHEDULER", raising=False)
    here = run(tmp_path / "here.jsonl")
    there = run(tmp_path / "there.jsonl", "--scheduler", cluster.scheduler_address)
    assert "KMBENCH_DASK_SCHEDULER" not in os.environ  # the Dask row had the address in its Problem
    # Cells as planned: the Dask row's workers differ (the cluster's 2; here min(4, cores)).
    verdicts = {cells.cell_of(r).as_planned(): (r["status"], r.get("iterations_executed")) for r in here}
    assert {cells.cell_of(r).as_planned(): (r["status"], r.get("iterations_executed")) for r in there} == verdicts, [
        (r["impl"], r["status"], r.get("detail")) for r in there]
    assert len(verdicts) == 5 and all(r["status"] == "ok" for r in here if r["impl"] != "cuda-v1")
    on_workers = [r for r in there if r["impl"] != "dask"]
    assert {r["worker"] for r in on_workers} <= set(cluster.scheduler_info["workers"]) and len(on_workers) == 4
    assert all(r["env"]["hostname"] == platform.node() for r in there)  # the host each ran on
    spanning = next(r for r in there if r["impl"] == "dask")
    assert "worker" not in spanning and spanning["build"]["workers"] == 2  # the whole cluster, from here
    assert not (cluster.folder / "workers-store.jsonl").exists()  # records came back as data


def test_a_sweeps_finished_cells_are_not_run_again_on_the_cluster(tmp_path, cluster):
    pytest.importorskip("matplotlib")
    store = tmp_path / "store.jsonl"
    args = ["sweep", "--data", "blobs", "--vary", "n=2000", "--k", "3", "--iters", "4", "--repeats", "1",
            "--impl", "numpy,sklearn", "--store", str(store), "--out", str(tmp_path / "sweep.md"),
            "--scheduler", cluster.scheduler_address]
    first, again = CliRunner().invoke(app, args), CliRunner().invoke(app, args)
    assert first.exit_code == 0 and again.exit_code == 0, first.output + again.output
    assert "2 records appended" in first.output
    assert "0 records appended" in again.output and "2 cells skipped" in again.output
    assert len(results.load(store)) == 2


def test_a_task_suite_reproduced_on_the_cluster_is_judged_as_here(tmp_path, cluster, monkeypatch):
    """Another task (document 001's assignment pass), through `reproduce --scheduler`: the same
    verdicts as here, and a second run takes every cell from the store."""
    folder = tmp_path / "suites"
    folder.mkdir()
    (folder / "tiny-assign.toml").write_text(
        'task = "assign"\ntitle = "t"\nsource = "001"\nimpls = ["assign-numpy"]\n'
        '[protocol]\nrepeats = 1\nwarmup = 0\n'
        '[[workloads]]\nn = 3000\nd = 2\nk = 16\nseed = 0\n[[workloads]]\nn = 2000\nd = 3\nk = 8\nseed = 1\n')
    monkeypatch.setattr(suite, "_folder", lambda: folder)
    args = ["reproduce", "tiny-assign", "--out", str(tmp_path / "t.md")]
    outputs = [CliRunner().invoke(app, [*args, "--store", str(tmp_path / "here.jsonl")])]
    for _ in range(2):
        outputs.append(CliRunner().invoke(app, [*args, "--store", str(tmp_path / "there.jsonl"),
                                                "--scheduler", cluster.scheduler_address]))
    assert all(out.exit_code == 0 for out in outputs), [out.output for out in outputs]
    here = results.load(tmp_path / "here.jsonl", task="assign")
    there = results.load(tmp_path / "there.jsonl", task="assign")
    assert [(r["workload"], r["status"]) for r in there] == [(r["workload"], r["status"]) for r in here]
    assert {r["status"] for r in there} == {"ok"} and all(r.get("worker") for r in there)
    assert "cells measured before, not run again" in outputs[2].output


def test_workers_running_other_code_are_refused_in_one_sentence(cluster, monkeypatch):
    from kmbench.protocol import environment

    monkeypatch.setattr(environment, "code_hash", lambda: "edited-here")  # this client only: workers are processes
    with pytest.raises(UsageError, match=r"^Dask workers tcp://127\.0\.0\.1:\d+ \(.+\), .+ run other kmbench code"):
        Cluster(cluster.scheduler_address)


def test_the_workers_are_asked_of_the_scheduler_not_of_the_clients_cache(cluster, monkeypatch):
    """The client's periodic refresh leaves a cache that lists no worker: read as the truth, every
    cell in flight looked lost (a sklearn cell was, once, in a full test run)."""
    monkeypatch.setattr(distributed.Client, "scheduler_info", lambda self, *args, **kwargs: {"workers": {}})
    found = Cluster(cluster.scheduler_address)
    try:
        assert len(found.workers) == 2
    finally:
        found.close()


class DiesOnAWorker(Implementation):
    """A row whose process ends mid-cell when it runs on a Dask worker (as an out-of-memory
    kill would end it)."""

    name = "dies-on-a-worker"

    def run(self, problem):
        try:
            distributed.get_worker()
        except ValueError:  # not on a worker
            return Result(centroids=problem.initial_centroids.astype(np.float64), iterations=problem.iterations)
        os._exit(3)


def test_a_worker_lost_mid_cell_is_an_error_cell_and_the_rest_goes_on(tmp_path):
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this file
    from kmbench import registry

    chosen = [registry.select("numpy")[0], DiesOnAWorker(), registry.select("sklearn")[0]]
    data = np.random.default_rng(2).standard_normal((2_000, 2)).astype(np.float32)
    store = tmp_path / "store.jsonl"
    with local_cluster(tmp_path) as dask_cluster:  # its own: this test ends a worker
        cluster = Cluster(dask_cluster.scheduler_address)
        try:
            records = lloyd.run(chosen, [Dataset("lost", data, None, {"generator": "test"})],
                                runner.Settings(k=3, iterations=4, warmup=0, repeats=1), store, cluster=cluster)
        finally:
            cluster.close()
    status = {r["impl"]: (r["status"], r.get("detail", "")) for r in records}
    assert status["numpy"][0] == "ok" and status["sklearn"][0] == "ok"
    assert status["dies-on-a-worker"][0] == "error" and "was lost mid-cell" in status["dies-on-a-worker"][1]
    assert "\n" not in status["dies-on-a-worker"][1]
    assert sorted((r["impl"], r["status"]) for r in results.load(store)) == sorted(
        (name, found[0]) for name, found in status.items())
