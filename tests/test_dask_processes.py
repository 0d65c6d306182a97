"""kmbench-gpu-dask on a cluster of separate processes, as a user on several hosts runs it (issue
49): a `dask scheduler` and one `dask cuda worker` per GPU, each its own process on 127.0.0.1,
reached through `kmbench run --scheduler`, the NCCL communicator set up between the worker
processes. Its record must be `ok` and match the record of the same cell on dask-cuda's
LocalCUDACluster (same shards, ranks and sums: the same answer). The same scaffolding, with
`dask worker` processes and the dask row, runs without a GPU."""

import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
START_S = 120  # the scheduler's file and every worker, on a machine that imports CuPy slowly


def _dask(*args, env=None) -> subprocess.Popen:
    """`dask ...` as a process of its own, kmbench importable in it as here."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.Popen([sys.executable, "-m", "dask", *args], env={**os.environ, "PYTHONPATH": path, **(env or {})},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _address(scheduler_file: Path, scheduler: subprocess.Popen) -> str:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline and scheduler.poll() is None:
        if scheduler_file.exists():
            try:
                return json.loads(scheduler_file.read_text())["address"]
            except (ValueError, KeyError):
                pass  # written but not yet whole
        time.sleep(0.2)
    raise AssertionError("dask scheduler did not start")


@contextmanager
def separate_processes(tmp_path, worker: list, envs: list):
    """A `dask scheduler` and one `dask <worker...>` per entry of envs, each its own process on
    127.0.0.1; yields the scheduler's address once every worker has joined, ends them after."""
    from distributed import Client

    scheduler_file = tmp_path / "scheduler.json"
    local = ["--host", "127.0.0.1", "--dashboard-address", "127.0.0.1:0"]
    started = [_dask("scheduler", "--port", "0", "--scheduler-file", str(scheduler_file), *local)]
    try:
        address = _address(scheduler_file, started[0])
        started += [_dask(*worker, address, "--nthreads", "1", "--memory-limit", "0", *local, env=env) for env in envs]
        with Client(address) as client:
            client.wait_for_workers(len(envs), timeout=START_S)
        yield address
    finally:
        for process in reversed(started):  # the workers first, while their scheduler can still see them go
            process.terminate()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:  # a worker closing gracefully can wait on timeouts: end it
                process.kill()
                process.wait()


def run(*args):
    from kmbench.cli import app

    ran = CliRunner().invoke(app, ["run", *args])
    assert ran.exit_code == 0, ran.output


def test_the_dask_row_on_a_scheduler_and_workers_started_as_processes(tmp_path):
    """The same scaffolding on the CPU: `dask worker` processes, the dask row through --scheduler."""
    pytest.importorskip("distributed")
    from kmbench.data import results

    store = tmp_path / "records.jsonl"
    with separate_processes(tmp_path, ["worker", "--no-nanny"], [{}, {}]) as address:
        run("--n", "20000", "--k", "5", "--iters", "5", "--repeats", "1", "--impl", "dask", "--store", str(store),
            "--scheduler", address)
    (record,) = results.load(store)
    assert record["status"] == "ok", record.get("detail")
    assert record["build"]["scheduler"] == address and record["build"]["workers"] == 2


@pytest.mark.gpu
def test_kmbench_gpu_dask_on_a_scheduler_and_a_dask_cuda_worker_per_gpu(tmp_path):
    pytest.importorskip("dask_cuda")
    import cupy

    from kmbench.data import results

    gpus = cupy.cuda.runtime.getDeviceCount()
    store = tmp_path / "records.jsonl"
    cell = ["--n", "400003", "--d", "3", "--centers", "20", "--k", "100", "--iters", "10", "--repeats", "2",
            "--impl", "kmbench-gpu-dask", "--store", str(store)]
    one_gpu_each = [{"CUDA_VISIBLE_DEVICES": str(gpu)} for gpu in range(gpus)]
    with separate_processes(tmp_path, ["cuda", "worker"], one_gpu_each) as address:
        run(*cell, "--scheduler", address)
    run(*cell)  # the same cell on LocalCUDACluster, every GPU
    on_scheduler, on_local_cluster = results.load(store)
    for record in (on_scheduler, on_local_cluster):
        assert record["status"] == "ok", record.get("detail")
        assert record["build"]["gpus"] == gpus and record["build"]["collective"].startswith("NCCL")
    assert on_scheduler["build"]["scheduler"] == address and on_local_cluster["build"]["scheduler"] == "LocalCUDACluster"
    assert on_scheduler["build"]["rows_per_gpu"] == on_local_cluster["build"]["rows_per_gpu"]
    assert on_scheduler["iterations_executed"] == on_local_cluster["iterations_executed"] == 10
    # The same shards on the same ranks, summed by the same all-reduce: one answer, to float64's last bits.
    assert on_scheduler["validation"]["inertia"] == pytest.approx(on_local_cluster["validation"]["inertia"], rel=1e-12)
