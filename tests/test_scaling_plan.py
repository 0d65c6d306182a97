"""The strong-scaling plan (kmbench/plans/scaling.py) and its command, `kmbench scale`: its
arguments, the sizes of its workloads, data identical to the cached generator's, and a whole
run on the CPU with the `dask` row standing in for the GPU rows: one oracle per k judges every
GPU set."""

import numpy as np
import pytest
from typer.testing import CliRunner

from kmbench.cli import app
from kmbench.data import datasets, results
from kmbench.errors import UsageError
from kmbench.plans import scaling
from kmbench.protocol import validate


def scale(*args):
    return CliRunner().invoke(app, ["scale", *(str(a) for a in args)])


def test_gpu_sets_are_space_separated_lists_of_distinct_gpus():
    assert scaling.gpu_sets("0 0,1") == ["0", "0,1"]
    assert scaling.gpu_sets(" 0,1,2,3 ") == ["0,1,2,3"]
    for bad in ("", "0,0", "a", "0;1", "0,"):
        with pytest.raises(UsageError, match="--gpus"):
            scaling.gpu_sets(bad)


def test_the_workloads_keep_their_size_and_shrink_by_scale():
    radial, blobs = scaling.WORKLOADS["radial-1e9"], scaling.WORKLOADS["blobs-1e8x128"]
    assert scaling.rows_of(radial, 1.0) == 10**9 and scaling.rows_of(blobs, 1.0) == 10**8
    assert scaling.rows_of(radial, 1e-4) == 100_000
    assert scaling.rows_of(radial, 1e-9) == 50  # one point per cluster at least
    assert scaling.rows_of(blobs, 0.01) == 10**6
    with pytest.raises(UsageError, match="--scale"):
        scaling.rows_of(radial, 0.0)


def test_radial_data_in_memory_are_the_cached_generators(tmp_path):
    workload = scaling.WORKLOADS["radial-1e9"]
    n = scaling.rows_of(workload, 1e-5)
    data = np.empty((n, 2), dtype=np.float32)
    name, meta = scaling.fill(workload, n, 3, data)
    cached = datasets.radial(cluster_size=n // 50, seed=3, directory=tmp_path)
    assert name == cached.name
    assert np.array_equal(data, np.asarray(cached.data))
    assert meta["parameters"]["n"] == n and meta["parameters"]["cluster_size"] == n // 50


def test_a_run_judges_every_gpu_set_by_one_oracle_per_k(tmp_path, monkeypatch):
    pytest.importorskip("distributed")
    computed = []
    compute = validate.Oracle.compute.__func__

    def counted(cls, data, *args, **kwargs):
        computed.append(data.shape)
        return compute(cls, data, *args, **kwargs)

    monkeypatch.setattr(validate.Oracle, "compute", classmethod(counted))
    store, out = tmp_path / "records.jsonl", tmp_path / "scaling.md"
    ran = scale("--workload", "radial-1e9", "--scale", "1e-4", "--k", "3", "--gpus", "0 0,1",
                "--impl", "dask", "--alone", "numpy", "--repeats", "1", "--store", store, "--out", out)
    assert ran.exit_code == 0, ran.output
    stored = results.load(store)
    assert [r["impl"] for r in stored] == ["numpy", "dask", "dask"]
    assert all(r["status"] == "ok" and r["dataset"]["n"] == 100_000 and r["params"]["k"] == 3 for r in stored)
    assert computed == [(100_000, 2)]
    table = out.read_text()
    assert "| numpy | radial-b10x20-b5x2-m2000-sc0.1-s0-float32 | 100,000 | 3 | 1 |" in table
    assert ran.output.endswith(table)  # printed as written
    # Progress as every command reports it: the plan's own steps and each cell, counted out of all three.
    assert "[0/3] making 100,000 x 2" in ran.output and "[1/3] GPU set 0" in ran.output
    assert "[3/3] dask on radial" in ran.output


def test_help_says_what_it_measures_and_names_every_option():
    shown = scale("--help")
    assert shown.exit_code == 0
    text = " ".join(shown.output.split())
    assert "Strong scaling of the multi-GPU rows per GPU set" in text
    for option in ("--workload", "--gpus", "--k", "--scale", "--impl", "--alone", "--iters", "--warmup",
                   "--repeats", "--seed", "--store", "--out"):
        assert option in text


@pytest.mark.parametrize("args, sentence", [
    (["--workload", "radial-1e10"], "Error: unknown workload radial-1e10; known: radial-1e9, blobs-1e8x128."),
    (["--k", "three"], "Error: --k takes whole numbers, comma-separated; got 'three'."),
    (["--gpus", "0,0"], "Error: --gpus: '0,0' is not a list of distinct GPU numbers such as 0,1."),
    (["--scale", "2"], "Error: --scale must be in (0, 1]; got 2.0."),
    (["--repeats", "0"], "Error: --repeats must be at least 1; got 0."),
])
def test_a_bad_argument_is_one_sentence_and_exit_2_before_any_data_are_made(tmp_path, args, sentence):
    ran = scale(*args, "--store", tmp_path / "r.jsonl")
    assert ran.exit_code == 2
    assert " ".join(ran.output.split()) == sentence and "Traceback" not in ran.output
    assert not (tmp_path / "r.jsonl").exists()


def test_data_the_host_cannot_hold_are_one_sentence_before_any_are_made(tmp_path, monkeypatch):
    from kmbench.plans import in_memory

    monkeypatch.setattr(in_memory, "available_host_bytes", lambda: 2**30)
    ran = scale("--workload", "blobs-1e8x128", "--store", tmp_path / "r.jsonl")
    assert ran.exit_code == 2
    assert ("100,000,000 x 128 does not fit: the data take 48 GiB; this host has 1 GiB of memory available."
            in " ".join(ran.output.split()))
    assert not (tmp_path / "r.jsonl").exists()


def test_a_gpu_set_that_fails_to_start_is_filed_under_its_own_worker_count():
    """A Dask GPU row reports the workers it asked for until its cluster says otherwise, so an
    error in prepare on GPUs 0,1 is the two-worker cell's, not the last good (one-worker) cell's."""
    pytest.importorskip("distributed")
    from impls.distributed.dask_lloyd import DaskCudaLloyd, asked_workers
    from kmbench.protocol import Options, runner

    assert asked_workers(Options(gpus="0,1")) == {"workers": 2} and asked_workers(Options()) == {}
    row = DaskCudaLloyd()
    row._info = {"workers": 1}  # the last cell, on GPU 0, went well

    def lost(options):
        raise RuntimeError("the cluster could not start")  # as a set that cannot hold its share

    row._start_cluster = lost
    problem = runner.make_problem(datasets.blobs(200, 2, 3, seed=0), runner.Settings(k=3, iterations=2),
                                  options=Options(gpus="0,1"))
    with pytest.raises(RuntimeError):
        row.prepare(problem)
    assert row.build_info()["workers"] == 2


def test_each_gpu_set_gets_the_gpus_back_and_a_second_run_skips_what_is_finished(tmp_path, monkeypatch):
    """The plan's process hands its GPU memory back before each set's cluster starts; run again,
    the plan makes no data and measures nothing it finished, and --force measures it all again."""
    distributed = pytest.importorskip("distributed")
    from impls.distributed.dask_lloyd import DaskLloyd

    def one_worker_per_gpu(self, options):  # the dask row standing in for a GPU row: its workers follow the set
        cluster = distributed.LocalCluster(n_workers=len(options.gpus.split(",")), threads_per_worker=1,
                                           processes=False, dashboard_address="127.0.0.1:0")
        return cluster, distributed.Client(cluster)

    monkeypatch.setattr(DaskLloyd, "_start_cluster", one_worker_per_gpu)
    given_back, made = [], []
    monkeypatch.setattr(scaling, "give_back_gpus", lambda: given_back.append(len(results.load(store))) or 2**30)
    fill = scaling.fill
    monkeypatch.setattr(scaling, "fill", lambda *args: made.append(args[1]) or fill(*args))
    store = tmp_path / "records.jsonl"
    args = ("--workload", "radial-1e9", "--scale", "1e-5", "--k", "3", "--gpus", "0 0,1", "--impl", "dask",
            "--alone", "numpy", "--repeats", "1", "--store", store)
    first = scale(*args)
    assert first.exit_code == 0, first.output
    assert given_back == [1, 2]  # after the alone row, and after the first set's cell: before each set
    assert "GPU set 0,1: GPU memory given back; 1.0 GiB of GPU 0 in use" in first.output
    again = scale(*args)
    assert again.exit_code == 0 and "3 cells measured before, not run again" in again.output
    assert made == [10_000] and len(results.load(store)) == 3  # no data made, nothing appended
    forced = scale(*args, "--force")
    assert forced.exit_code == 0 and made == [10_000, 10_000] and len(results.load(store)) == 6


def test_an_oracle_that_cannot_be_made_is_an_error_in_each_cell_and_the_next_k_still_runs(tmp_path, monkeypatch):
    """The judge's memory ran out making the 1e8 x 128 oracle on an H200 and the whole command
    ended with a traceback: a failing oracle is its workload's cells' error, not the run's."""
    compute = validate.Oracle.compute.__func__
    tried = []

    def failing_at_k3(cls, data, initial_centroids, *args, **kwargs):
        tried.append(len(initial_centroids))
        if len(initial_centroids) == 3:
            raise MemoryError("Out of memory allocating 1,073,741,824 bytes")
        return compute(cls, data, initial_centroids, *args, **kwargs)

    monkeypatch.setattr(validate.Oracle, "compute", classmethod(failing_at_k3))
    store = tmp_path / "records.jsonl"
    ran = scale("--workload", "radial-1e9", "--scale", "1e-5", "--k", "3,1000", "--gpus", "0", "--impl", "",
                "--alone", "numpy,sklearn", "--repeats", "1", "--store", store)
    stored = results.load(store)
    # k = 1,000 ran and was judged: numpy `ok`; scikit-learn measured too, `ok` or, where a float32
    # tie empties a cluster that it then moves (OpenBLAS's Sandybridge and Prescott kernels),
    # `mismatch`: which one depends on the BLAS kernel, not on what this test asks.
    assert [(r["impl"], r["params"]["k"], r["status"]) for r in stored[:3]] == [
        ("numpy", 3, "error"), ("sklearn", 3, "error"), ("numpy", 1000, "ok")]
    assert (stored[3]["impl"], stored[3]["params"]["k"]) == ("sklearn", 1000) and stored[3]["status"] in ("ok", "mismatch")
    assert tried == [3, 1000]  # tried once for both cells of k = 3
    assert all("float64 reference could not be made: MemoryError: Out of memory" in r["detail"] for r in stored[:2])
    # An error cell is a cell like any (in_memory.exit_status): only a mismatch sets the exit code.
    assert ran.exit_code == (0 if stored[3]["status"] == "ok" else 1), ran.output
    assert "| error: the float64 reference could not be made: MemoryError" in ran.output
