"""kmbench-gpu-dask (impls/distributed/kmbench_gpu_dask.py). Without a GPU: the shards, and the collective's
set-up driven through a real Dask cluster of two threads, with the per-worker functions standing
in as NumPy Lloyd steps joined by an in-process all-reduce: every rank gets its own rank, the same
unique id, its own shard on its own worker, and the ranks together compute the oracle's answer.
With a GPU (make test-gpu): the real row on a cluster of the GPUs present (one is a valid one)."""

import platform
import threading

import numpy as np
import pytest

from impls.distributed import kmbench_gpu_dask
from kmbench.protocol import Problem, reference, validate
from tests.conftest import blob_data, gpu_cell, memory_problem

distributed = pytest.importorskip("distributed")


def test_shards_are_contiguous_and_even():
    assert kmbench_gpu_dask.shard_rows(10, 3) == [(0, 4), (4, 3), (7, 3)]
    assert kmbench_gpu_dask.shard_rows(2, 2) == [(0, 1), (1, 1)]
    for n, world in [(1_000_003, 4), (7, 7), (9, 2)]:
        bounds = kmbench_gpu_dask.shard_rows(n, world)
        assert sum(rows for _, rows in bounds) == n
        assert all(first + rows == after for (first, rows), (after, _) in zip(bounds, bounds[1:]))
        assert max(rows for _, rows in bounds) - min(rows for _, rows in bounds) <= 1


@pytest.mark.parametrize("d, k", [(2, 3), (2, 1000), (16, 100), (128, 1024)])
def test_the_row_declares_the_distances_its_shards_compute(d, k):
    """The judge holds the row to the distance form it declares (a direct form's bounds are far
    tighter); it must be the form of the kmbench-gpu strategy every shard runs."""
    problem = Problem(np.zeros((100, d), np.float32), np.zeros((k, d)), 1)
    shard = kmbench_gpu_dask.ShardLloyd(None, 100, np.zeros(d, np.float32))
    assert kmbench_gpu_dask.DaskNcclLloyd().distance_form(problem) == shard.distance_form(problem)


class _HostAllReduce:
    """The stand-in collective: each rank's part summed in rank order, seen by every rank."""

    def __init__(self, world):
        self.parts, self.barrier = [None] * world, threading.Barrier(world, timeout=30)

    def __call__(self, rank, part):
        self.parts[rank] = part
        self.barrier.wait()
        total = sum(self.parts)
        self.barrier.wait()  # nobody writes the next round's part before all have read this one
        return total


# The stand-ins run on the workers (threads of this process) and record what each rank got
# here; module-level, so Dask sends them by reference.
_SEEN: dict = {}
_LOCK = threading.Lock()


def _unique_id():
    _SEEN["ids"] = _SEEN.get("ids", 0) + 1
    return f"id-{_SEEN['ids']}"


def _join(token, shard, uid, rank, world, points_total, shift, start):
    with _LOCK:
        collective = _SEEN.setdefault((token, "collective"), _HostAllReduce(world))
        _SEEN[rank] = {"uid": uid, "world": world, "rows": shard.shape[0], "total": points_total,
                       "worker": distributed.get_worker().address, "first": shard[0].copy()}
        _SEEN[(token, rank)] = (shard, collective)
    return {"rank": rank, "rows": shard.shape[0], "gpu": "none", "strategy": "numpy"}


def _run_shard(token, start, iterations, tol):
    """NumPy Lloyd on this rank's shard, the partial sums (and changed count) joined by the
    stand-in all-reduce: what ShardLloyd does with kmbench-gpu's kernels and NCCL."""
    rank = next(r for r in range(2) if _SEEN[r]["worker"] == distributed.get_worker().address)
    shard, collective = _SEEN[(token, rank)]
    centroids, labels, k = start.copy(), None, start.shape[0]
    for done in range(1, iterations + 1):
        new, _ = reference.nearest(shard, centroids)
        changed = len(new) if labels is None else int((new != labels).sum())
        labels = new
        part = np.zeros((k, shard.shape[1] + 2))
        for dim in range(shard.shape[1]):
            part[:, dim] = np.bincount(labels, weights=shard[:, dim].astype(np.float64), minlength=k)
        part[:, -2] = np.bincount(labels, minlength=k)
        part[0, -1] = changed
        total = collective(rank, part)
        filled = total[:, -2] > 0
        centroids[filled] = total[filled, :-2] / total[filled, -2:-1]
        if tol is not None and total[0, -1] <= tol * _SEEN[rank]["total"]:
            break
    return centroids, done, 1.0, 0.25


def _leave(token):
    _SEEN.pop((token, "collective"), None)


class _ThreadCluster(kmbench_gpu_dask.DaskNcclLloyd):
    def _start_cluster(self, options):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0")
        return cluster, distributed.Client(cluster)


@pytest.mark.parametrize("tol", [None, 1e-3])
def test_collective_set_up_through_dask(monkeypatch, tol):
    _SEEN.clear()
    for name in ("unique_id", "join", "run_shard", "leave"):
        monkeypatch.setattr(kmbench_gpu_dask, name, globals()[f"_{name}"])
    data = blob_data(np.random.default_rng(4), n=3_001, d=2, k=6, dtype=np.float64)
    _, _, problem = memory_problem(data, 6, 40, tol=tol)
    impl = _ThreadCluster()
    impl.prepare(problem)
    try:
        result = impl.run(problem)
        info = impl.build_info()
    finally:
        impl.release()
    joined = [_SEEN[rank] for rank in range(2)]
    assert [seen["uid"] for seen in joined] == ["id-1", "id-1"]  # made once, handed to both by Dask
    assert [seen["worker"] for seen in joined] == impl._workers  # rank r on the r-th worker
    assert [seen["rows"] for seen in joined] == [1501, 1500] and {seen["total"] for seen in joined} == {3001}
    np.testing.assert_array_equal(joined[1]["first"], data[1501])
    assert info["gpus"] == 2 and info["bytes_between_gpus_per_iteration"] == 2 * info["allreduce_bytes_per_iteration"]
    assert set(info["gpu_links"]) == {platform.node()}  # both ranks on this host: its links, once
    oracle = reference.lloyd(data, problem.initial_centroids, 40, tol=tol)
    assert result.iterations == oracle.iterations
    np.testing.assert_allclose(result.centroids, oracle.centroids, rtol=1e-12)
    assert result.phases["iterate"] == 1.0 and result.phases["compute"] == 0.75


def test_a_share_that_does_not_fit_says_what_it_needed_and_what_was_free():
    """The sentence issue 49's full-size run lacked: CuPy said only the allocation and its own total."""
    from impls.distributed.gpu_share import out_of_memory

    cupy_says = "Out of memory allocating 4,000,000,000 bytes (allocated so far: 133,669,540,352 bytes)."
    said = out_of_memory(cupy_says, "rank 0 (GPU 0 of h200, 1,000,000,000 points)", 2_500_000_000, 150_000_000_000)
    assert said == ("rank 0 (GPU 0 of h200, 1,000,000,000 points) cannot hold its share: it needed 4,000,000,000 "
                    "bytes more, with 2,500,000,000 of the GPU's 150,000,000,000 bytes free, 133,669,540,352 "
                    "already its own")
    assert "needed more memory, with 1 of" in out_of_memory("a message CuPy never wrote", "rank 1", 1, 2)


@pytest.mark.gpu
def test_a_rank_that_cannot_hold_its_share_says_so_in_one_sentence():
    import cupy

    from impls.distributed.gpu_share import share_must_fit
    from kmbench.errors import ImplementationError

    total = cupy.cuda.runtime.memGetInfo()[1]
    with pytest.raises(ImplementationError, match=r"^rank 3 \(GPU \d+ of .+, 7 points\) cannot hold its share: it "
                                                  r"needed [\d,]+ bytes more, with [\d,]+ of the GPU's [\d,]+ bytes free"):
        with share_must_fit("rank 3", 7):
            cupy.empty(2 * total, dtype=cupy.uint8)


@pytest.mark.gpu
@pytest.mark.parametrize("d, k", [(2, 5), (3, 100), (64, 200)])
def test_on_the_gpus_present(d, k):
    data = blob_data(np.random.default_rng(d), n=40_003, d=d, k=k)
    oracle, record = gpu_cell(kmbench_gpu_dask.DaskNcclLloyd(), data, k, iterations=6)
    assert record["status"] == validate.OK, record.get("detail")
    build = record["build"]
    assert build["gpus"] >= 1 and build["collective"].startswith("NCCL") and sum(build["rows_per_gpu"]) == 40_003
    assert "communicate" in record["times"]["phases"] and not record["notes"]  # no note: the ranks agreed


@pytest.mark.gpu
def test_tolerance_rule_counts_every_shard():
    data = blob_data(np.random.default_rng(9), n=30_001, d=2, k=20)
    oracle, record = gpu_cell(kmbench_gpu_dask.DaskNcclLloyd(), data, 20, iterations=100, tol=1e-3)
    assert record["status"] == validate.OK, record.get("detail")
    assert record["iterations_executed"] == oracle.iterations < 100
