"""kmbench-gpu on every GPU of a Dask cluster (`kmbench-gpu-dask`): one worker per GPU, each
running kmbench-gpu's own kernels on its shard, the partial sums combined every iteration by
an NCCL all-reduce between the GPUs (CuPy's cupy.cuda.nccl), never through the scheduler.

Dask places the shards and starts the workers (dask-cuda's LocalCUDACluster, or the scheduler
at the problem's options.scheduler); it also hands out the communicator: rank 0's worker makes NCCL's
unique id, and every rank's set-up task receives it as an argument, so the ranks meet without
any other rendezvous. After that, a run is one task per worker. Each runs all the iterations
on its own: assign its shard, sum by cluster, all-reduce the k x (d + 1) float64 sums (and the
changed count) in place, then make the new centroids from the totals, the same on every rank.
All shards are centred by one shift (the data's mean), so their sums add up.

The run's time is the slowest rank's CUDA-event time of its iterations; the all-reduces within
it are timed by events too, so the record splits each iteration into compute and
communication, and names the NCCL version and how each host's GPUs are linked (`nvidia-smi
topo -m`). A rank whose share does not fit says how many bytes it needed and how many its GPU
had free (gpu_share.py). The per-iteration Dask reduction (the `dask-cuda` row) stays as the baseline.
"""

from __future__ import annotations

import uuid
from dataclasses import replace

import numpy as np

from impls.distributed.dask_lloyd import (asked_workers, dask_cuda_status, start_cuda_cluster,
                                          worker_loss_is_one_sentence)
from impls.distributed.gpu_share import gpu_links, share_must_fit
from impls.gpu.kmbench_gpu import KINDS, KmbenchGpu, Strategy, pass_strategy
from kmbench.errors import ImplementationError
from kmbench.protocol import Implementation, Options, Problem, Result, reference
from kmbench.protocol.cluster import connect
from kmbench.protocol.timing import host_region

# This worker process's shards, by run token (a worker may serve several runs in turn).
_SHARDS: dict[str, "ShardLloyd"] = {}


class ShardLloyd(KmbenchGpu):
    """kmbench-gpu on one rank's shard: the shift every rank shares, the sums all-reduced
    before each iteration's centroids are made, the tolerance rule counted over all points."""

    def __init__(self, comm, points_total: int, shift: np.ndarray):
        super().__init__()
        self.use_graph = False  # launches per iteration, with the all-reduce between them
        self.comm, self._points_total, self.common_shift = comm, points_total, shift
        self._exchanges: list = []  # (start, end) events around each all-reduce
        self.combine = self._all_reduce

    def strategy_for(self, problem: Problem) -> str:
        return pass_strategy(problem.d, problem.k)

    def points_total(self, problem: Problem) -> int:
        return self._points_total

    def _all_reduce(self, *buffers) -> None:
        import cupy
        from cupy.cuda import nccl

        types = {np.dtype(np.float64): nccl.NCCL_FLOAT64, np.dtype(np.int32): nccl.NCCL_INT32,
                 np.dtype(np.uint64): nccl.NCCL_UINT64}
        stream = cupy.cuda.get_current_stream()
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        for buffer in buffers:
            self.comm.allReduce(buffer.data.ptr, buffer.data.ptr, buffer.size, types[buffer.dtype], nccl.NCCL_SUM,
                                stream.ptr)
        end.record(stream)
        self._exchanges.append((start, end))

    def line_up(self) -> None:
        """Every rank leaves here together, so each rank's timed region starts at one moment.
        The ranks' tasks start as Dask hands them out, up to milliseconds apart; without this
        the first to start waited in its first all-reduce for the last, and the slowest rank's
        time (the row's) held that wait: the all-reduce of 72 bytes read 0.30 ms an iteration
        at 1e9 x 2, k = 3 on two GPUs. A one-number all-reduce, waited for (as an MPI benchmark
        meets at a barrier before it starts its clock)."""
        import cupy
        from cupy.cuda import nccl

        token = cupy.zeros(1, dtype=cupy.float64)
        stream = cupy.cuda.get_current_stream()
        self.comm.allReduce(token.data.ptr, token.data.ptr, 1, nccl.NCCL_FLOAT64, nccl.NCCL_SUM, stream.ptr)
        cupy.cuda.Device().synchronize()

    def run(self, problem: Problem) -> Result:
        import cupy

        self._exchanges = []
        result = super().run(problem)
        result.phases["communicate"] = sum(cupy.cuda.get_elapsed_time(a, b) for a, b in self._exchanges) / 1e3
        return result


def unique_id():
    """NCCL's id for a new communicator (on rank 0's worker; Dask takes it to the others)."""
    from cupy.cuda import nccl

    return nccl.get_unique_id()


def join(token: str, shard: np.ndarray, uid, rank: int, world: int, points_total: int, shift: np.ndarray,
         start: np.ndarray) -> dict:
    """On each worker, at once on all: join the communicator (it returns when every rank has),
    upload the shard and compile (ShardLloyd.prepare), and keep both for the runs."""
    import cupy
    from cupy.cuda import nccl

    comm = nccl.NcclCommunicator(world, uid, rank)
    impl = ShardLloyd(comm, points_total, shift)
    problem = Problem(data=shard, initial_centroids=start, iterations=1)
    with share_must_fit(f"rank {rank}", shard.shape[0]):
        impl.prepare(problem)
    _SHARDS[token] = impl
    impl._problem, impl._rank = problem, rank
    return {"rank": rank, "rows": shard.shape[0], "gpu": cupy.cuda.runtime.getDeviceProperties(
        cupy.cuda.Device().id)["name"].decode(), "strategy": impl._strategy}


def run_shard(token: str, start: np.ndarray, iterations: int, tol: float | None):
    """One run on this rank: (centroids, iterations, seconds iterating, seconds communicating)."""
    impl = _SHARDS[token]
    with share_must_fit(f"rank {impl._rank}", impl._problem.n):
        result = impl.run(replace(impl._problem, initial_centroids=start, iterations=iterations, tol=tol))
    return result.centroids, result.iterations, result.phases["iterate"], result.phases["communicate"]


def leave(token: str) -> None:
    impl = _SHARDS.pop(token, None)
    if impl is not None:
        impl.release()
        impl.comm.destroy()


def shard_rows(n: int, world: int) -> list[tuple[int, int]]:
    """(first row, rows) of each rank's shard: contiguous, sizes differing by at most one."""
    base, extra = divmod(n, world)
    bounds, first = [], 0
    for rank in range(world):
        rows = base + (rank < extra)
        bounds.append((first, rows))
        first += rows
    return bounds


class DaskNcclLloyd(Implementation):
    name = "kmbench-gpu-dask"
    row_order = 250
    label = "kmbench-gpu on Dask (NCCL)"
    description = ("kmbench-gpu's kernels on every GPU of a Dask cluster, one shard per GPU, the sums "
                   "all-reduced by NCCL between the GPUs every iteration")
    source = "kmbench's own (issue 21: the fast kernels on every GPU of a Dask cluster)"
    dtype = "float32"
    spans_cluster = True
    on_gpus = "several"

    def available(self):
        ready, why = dask_cuda_status()
        if not ready:
            return False, why
        from cupy.cuda import nccl

        if not nccl.available:
            return False, "CuPy finds no NCCL library (pip install nvidia-nccl-cu12 or -cu13)"
        return True, ""

    def follows_tolerance(self, tol: float) -> bool:
        return True

    def _start_cluster(self, options: Options):
        if options.scheduler:
            return None, connect(options.scheduler)
        return start_cuda_cluster(options)

    def prepare(self, problem: Problem) -> None:
        from distributed import wait

        # Until the cluster says otherwise, the workers asked for: a prepare that fails must not
        # report the last good cell's count (the count is part of the cell, kmbench.data.cells).
        self._info = asked_workers(problem.options)

        phases: dict[str, float] = {}
        with host_region(phases, "cluster"):
            self._cluster, self._client = self._start_cluster(problem.options)
        client = self._client
        self._workers = sorted(client.nthreads())  # rank = place in this order; the scheduler's list, not a cache
        world = len(self._workers)
        if world == 0:
            raise ImplementationError("the Dask cluster has no workers")
        if problem.n < world:
            raise ImplementationError(f"{problem.n} points cannot make a shard for each of {world} GPUs")
        data = np.asarray(problem.data)
        with host_region(phases, "shift"):  # the data's mean (float64, as a float32), for every shard
            shift = reference.mean(data).astype(np.float32)
        self._token = uuid.uuid4().hex
        with host_region(phases, "upload"), worker_loss_is_one_sentence(world):
            shards = [client.scatter(np.ascontiguousarray(data[first:first + rows]), workers=[worker])
                      for (first, rows), worker in zip(shard_rows(problem.n, world), self._workers)]
            uid = client.submit(unique_id, workers=[self._workers[0]], pure=False)
            start = np.asarray(problem.initial_centroids)
            joined = [client.submit(join, self._token, shard, uid, rank, world, problem.n, shift, start,
                                    workers=[worker], allow_other_workers=False, pure=False)
                      for rank, (shard, worker) in enumerate(zip(shards, self._workers))]
            wait(joined)
            self._ranks = client.gather(joined)
        links = dict(client.run(gpu_links, workers=self._workers).values())  # one per host
        self._setup = phases
        d, k = problem.d, problem.k
        payload = (k * (d + 1) * 8 if d <= 32 else k * d * 8 + k * 4) + 8  # sums (and counts), changed
        self._info = {"gpus": world, "workers": world, "collective": "NCCL all-reduce (cupy.cuda.nccl), in place",
                      "nccl": _nccl_version(), "gpu_links": links,
                      "scheduler": problem.options.scheduler or "LocalCUDACluster",
                      "strategy": self._ranks[0]["strategy"], "rows_per_gpu": [r["rows"] for r in self._ranks],
                      "gpu_names": sorted({r["gpu"] for r in self._ranks}),
                      "allreduce_bytes_per_iteration": payload,
                      # A ring all-reduce sends and receives 2 (W - 1) / W of the buffer on each GPU.
                      "bytes_between_gpus_per_iteration": int(2 * (world - 1) * payload)}

    def run(self, problem: Problem) -> Result:
        client = self._client
        start = np.asarray(problem.initial_centroids, dtype=np.float64)
        phases: dict[str, float] = {}
        with host_region(phases, "wall"), worker_loss_is_one_sentence(len(self._workers)):
            futures = [client.submit(run_shard, self._token, start, problem.iterations, problem.tol,
                                     workers=[worker], allow_other_workers=False, pure=False)
                       for worker in self._workers]
            answers = client.gather(futures)
        centroids, done = answers[0][0], answers[0][1]
        phases["iterate"] = max(answer[2] for answer in answers)  # the slowest rank's event time
        phases["communicate"] = max(answer[3] for answer in answers)
        phases["compute"] = phases["iterate"] - phases["communicate"]
        notes = []
        apart = max(float(np.abs(answer[0] - centroids).max()) for answer in answers)
        if apart or len({answer[1] for answer in answers}) > 1:
            notes.append(f"ranks disagree: centroids up to {apart:.3g} apart, iterations "
                         f"{sorted({answer[1] for answer in answers})}")
        return Result(centroids=centroids, iterations=done, phases=phases, notes=notes)

    def release(self) -> None:
        client = self.__dict__.get("_client")
        if client is not None and getattr(self, "_workers", None):
            try:
                client.gather([client.submit(leave, self._token, workers=[worker], pure=False)
                               for worker in self._workers])
            except Exception:
                pass  # a lost worker's state goes with its process; closing the cluster ends the rest
        for name in ("_client", "_cluster"):
            resource = self.__dict__.pop(name, None)
            if resource is not None:
                resource.close()

    def build_info(self) -> dict:
        return dict(getattr(self, "_info", {}))

    def setup_phases(self) -> dict[str, float]:
        return dict(getattr(self, "_setup", {}))

    def bytes_per_iteration(self, problem: Problem) -> int:
        return problem.n * problem.d * 4

    def distance_form(self, problem: Problem) -> str:
        """As every shard computes its distances: kmbench-gpu's pass strategy for (d, k), on data
        centred by one shift as kmbench-gpu centres its own. Left undeclared, the judge held the
        row to the expanded form's bounds: at radial 1e9, k = 1,000 nearly every point was then
        a near tie, and each step took 90 s to judge."""
        return KINDS.get(pass_strategy(problem.d, problem.k), Strategy).distance_form(problem)


def _nccl_version() -> str | None:
    try:
        from cupy.cuda import nccl

        version = nccl.get_version()
    except (ImportError, RuntimeError):  # the client need not have a GPU; the workers do
        return None
    return f"{version // 10000}.{version // 100 % 100}.{version % 100}"
