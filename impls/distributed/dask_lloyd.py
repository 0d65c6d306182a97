"""Lloyd on Dask, for data that outgrow one machine or one GPU. Dask is the engine, not ours:
we write only the per-chunk step (assign each point, then per-cluster float64 sums, counts and
label changes) and the reduction of those partials; the centroids go back to every worker
each iteration.

- `dask`: NumPy chunks on a dask.distributed cluster. Without a scheduler address it starts a
  LocalCluster in this process (one thread per worker, listening on 127.0.0.1 only); with the
  problem's options.scheduler (`--scheduler ADDRESS`, or $KMBENCH_DASK_SCHEDULER) it uses that
  cluster, whose workers must be able to import kmbench.
- `dask-cuda`: the same step on CuPy chunks, one worker per GPU through dask-cuda's
  LocalCUDACluster; the problem's options.gpus (say "0" or "0,1") picks the GPUs, for a scaling run.

The data are cut into row chunks on the client and scattered to the workers in prepare
(dask-cuda's workers then copy theirs to their GPU), so no worker and no task graph ever
holds the whole array; labels stay on the workers between iterations (the tolerance rule
compares them). The timed region is the loop,
on the host clock: each iteration ends with the reduced partials back on the client.
"""

from __future__ import annotations

import os
from concurrent.futures import CancelledError
from contextlib import contextmanager

import numpy as np

from impls import installed
from impls.distributed.gpu_share import share_must_fit
from kmbench.errors import ImplementationError
from kmbench.protocol import Implementation, Options, Problem, Result, stop_done
from kmbench.protocol.cluster import connect, local_only
from kmbench.protocol.device import cuda_status
from kmbench.protocol.timing import host_region

CHUNKS_PER_WORKER = 4
# Below this many rows a chunk's task costs more in scheduling than in arithmetic (measured:
# 48 ms per iteration for 16 chunks of 6,250 points, on 2 cores).
MIN_CHUNK_ROWS = 1 << 18


def chunk_step(chunk, centroids, old_labels, k: int):
    """One chunk's share of an iteration: (partials (k, d + 1) float64 with counts last,
    labels changed, new labels). Runs on a worker, on NumPy or CuPy arrays alike."""
    from kmbench.protocol import reference
    xp = _array_module(chunk)
    centroids = xp.asarray(centroids)
    labels, _ = reference.nearest(chunk, centroids, xp)
    partial = xp.zeros((k, chunk.shape[1] + 1), dtype=xp.float64)
    for dim in range(chunk.shape[1]):
        partial[:, dim] = xp.bincount(labels, weights=chunk[:, dim].astype(xp.float64), minlength=k)
    partial[:, -1] = xp.bincount(labels, minlength=k)
    changed = chunk.shape[0] if old_labels is None else int((labels != old_labels).sum())
    return reference.to_numpy(partial), changed, labels


def _array_module(array):
    try:
        import cupy

        return cupy.get_array_module(array)
    except ImportError:
        return np


def reduce_partials(steps) -> tuple[np.ndarray, int]:
    """The reduction: every chunk's partials summed, and the changes counted."""
    total = sum(step[0] for step in steps)
    return total, sum(step[1] for step in steps)


def _labels_of(step):
    return step[2]


def _summary_of(step):
    """A step without its labels: what the reduction needs (k x (d + 1) floats and a count).
    Reducing the whole steps moved every chunk's labels to the reducing worker: on two GPUs
    that made an iteration at k = 3 1.7x slower than on one."""
    return step[0], step[1]


def _to_device(chunk):
    import cupy

    with share_must_fit("a chunk", chunk.shape[0]):
        return cupy.asarray(chunk)


@contextmanager
def worker_loss_is_one_sentence(chunks: int):
    """A worker that dies mid-run takes its scattered chunks with it, and Dask cannot recompute
    them: every task that needs them is cancelled. Say so in one sentence (the cell ends as an
    error; release() closes the cluster) instead of a task key and "already forgotten"."""
    from distributed import KilledWorker

    try:
        yield
    except (CancelledError, KilledWorker) as exc:
        raise ImplementationError(f"a Dask worker was lost mid-run and its share of the {chunks} data chunks "
                                  f"with it, so the run cannot go on ({type(exc).__name__})") from None


def dask_cuda_status() -> tuple[bool, str]:
    """Whether a dask-cuda cluster can start here: a GPU that CuPy sees, and dask-cuda."""
    ready, why = cuda_status()
    if not ready:
        return False, why
    try:
        import dask_cuda  # noqa: F401
    except ImportError:
        return False, "dask-cuda is not installed (pip install dask-cuda)"
    return True, ""


class DaskLloyd(Implementation):
    name = "dask"
    row_order = 230
    label = "Dask (NumPy chunks)"
    description = "Lloyd on dask.distributed: chunked dask array, per-chunk partial sums, reduced on a worker"
    source = "kmbench's own per-chunk step on Dask (an existing engine)"
    dtype = "float64"  # each chunk's distances and sums are float64
    spans_cluster = True
    # The centroids come back to the client every iteration anyway: a copy each is the trajectory,
    # so the judge needs one run instead of one per iteration (each a round of tasks on the cluster).
    traces = True
    cuda = False
    min_chunk_rows = MIN_CHUNK_ROWS

    def available(self):
        if not installed("dask", "distributed"):
            return False, "Dask is not installed (pip install 'kmbench[dask]')"
        return True, ""

    def follows_tolerance(self, tol: float) -> bool:
        return True

    def _start_cluster(self, options: Options):
        from distributed import Client, LocalCluster

        workers = max(1, min(4, os.cpu_count() or 1))
        # The dashboard on any free port of 127.0.0.1 (with None it still tries 8787 and warns
        # when another cluster holds it; ":0" listens on every interface).
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=False, **local_only(True))
        return cluster, Client(cluster)

    def prepare(self, problem: Problem) -> None:
        from distributed import wait

        # Until the cluster says otherwise, the workers asked for: a prepare that fails must not
        # report the last good cell's count (the count is part of the cell, kmbench.data.cells).
        self._info = asked_workers(problem.options) if self.cuda else {}

        phases: dict[str, float] = {}
        address = problem.options.scheduler
        with host_region(phases, "cluster"):
            self._cluster, self._client = (None, connect(address)) if address \
                else self._start_cluster(problem.options)
        workers = max(1, len(self._client.nthreads()))  # asked of the scheduler, not the client's cache
        rows = max(self.min_chunk_rows, -(-problem.n // (workers * CHUNKS_PER_WORKER)))
        with host_region(phases, "upload"):
            data = np.asarray(problem.data)
            pieces = [np.ascontiguousarray(data[start:start + rows]) for start in range(0, problem.n, rows)]
            self._chunks = self._client.scatter(pieces)  # spread over the workers, one future each
            if self.cuda:
                self._chunks = self._client.map(_to_device, self._chunks, pure=False)
            wait(self._chunks)  # every chunk in place, nothing copied back
        self._setup = phases
        self._info = {"scheduler": address or "LocalCluster in process", "workers": workers,
                      "chunks": len(self._chunks), "rows_per_chunk": rows}

    def run(self, problem: Problem) -> Result:
        client, k = self._client, problem.k
        centroids = np.asarray(problem.initial_centroids, dtype=np.float64)
        labels = [None] * len(self._chunks)
        trace = [] if problem.trace else None
        phases: dict[str, float] = {}
        done = 0
        with host_region(phases, "iterate"), worker_loss_is_one_sentence(len(self._chunks)):
            for done in range(1, problem.iterations + 1):
                # The centroids (k x d) travel inside each task: cheaper than a broadcast.
                steps = [client.submit(chunk_step, chunk, centroids, old, k, pure=False)
                         for chunk, old in zip(self._chunks, labels)]
                summaries = [client.submit(_summary_of, step, pure=False) for step in steps]
                partials, changed = client.submit(reduce_partials, summaries, pure=False).result()
                if problem.tol is not None:  # labels stay on the workers only where compared
                    labels = [client.submit(_labels_of, step, pure=False) for step in steps]
                filled = partials[:, -1] > 0
                centroids = centroids.copy()
                centroids[filled] = partials[filled, :-1] / partials[filled, -1:]
                if trace is not None:
                    trace.append(centroids)  # a new array each iteration (copied above)
                if stop_done(changed, problem.n, problem.tol):
                    break
        return Result(centroids=centroids, iterations=done, phases=phases, trace=trace)

    def release(self) -> None:
        for name in ("_client", "_cluster"):
            resource = self.__dict__.pop(name, None)
            if resource is not None:
                resource.close()
        self.__dict__.pop("_chunks", None)

    def build_info(self) -> dict:
        import dask

        return {**getattr(self, "_info", {}), "dask": dask.__version__}

    def setup_phases(self) -> dict[str, float]:
        return dict(getattr(self, "_setup", {}))


def asked_workers(options: Options) -> dict:
    """The workers a GPU cell asked for, one per GPU of options.gpus; {} where it named none."""
    return {"workers": len(options.gpus.split(","))} if options.gpus else {}


class DaskCudaLloyd(DaskLloyd):
    name = "dask-cuda"
    row_order = 240
    label = "Dask (CuPy chunks, one worker per GPU)"
    description = "the dask row on CuPy chunks, one worker per GPU through dask-cuda's LocalCUDACluster"
    cuda = True
    on_gpus = "several"

    def available(self):
        ready, why = dask_cuda_status()
        return (ready, why) if not ready else super().available()

    def _start_cluster(self, options: Options):
        return start_cuda_cluster(options)


def start_cuda_cluster(options: Options):
    """(cluster, client): dask-cuda's LocalCUDACluster, one worker per GPU of options.gpus
    (None: every GPU visible), on 127.0.0.1 only. No host-memory limit: a worker holds its
    shard (25 GB at blobs-1e8x128 on two GPUs) in its own memory until the upload, and Dask's
    limit ("auto": the machine's memory over the workers, read at start, where some machines
    report a fraction of what they have until it is used) would spill it to disk at 60% and
    end the worker at 95%."""
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    cluster = LocalCUDACluster(CUDA_VISIBLE_DEVICES=options.gpus, memory_limit=0, **local_only())
    return cluster, Client(cluster)


