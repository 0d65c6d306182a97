"""kmbench-gpu-stream: kmbench-gpu for data larger than the GPU's memory.

The points stay in host memory, pinned where they lie (cudaHostRegister: no second copy of
1e8 rows; a dataset mapped read-only from the cache cannot be pinned and is read into memory
first), and every iteration streams them through the GPU a chunk at a time: two device
slots, a copy stream and a compute stream, so the copy of chunk i+1 runs while the kernels of
chunk i do (`ChunkStream`). Each chunk is centred and assigned by kmbench-gpu's own kernels:
the tensor path for d > 32, the columns, small-k or tiled kernel below. Its float64 sums are added to
the iteration's, and the new centroids are made once, after the last chunk. Per point the
arithmetic is the resident path's; only the order in which float64 sums meet differs.

No iteration can be faster than copying the data to the GPU once: n x d x 4 bytes at the
link's rate. `ChunkStream.copy_seconds` times that pass alone (same chunks, same slots, no
kernels), so the out-of-core benchmark (kmbench.plans.out_of_core) can report each iteration
as a multiple of it.
"""

from __future__ import annotations

import os

import numpy as np

from impls.gpu.kmbench_gpu import MAX_K, TILED_MAX_DIM, KmbenchGpu, make, pass_strategy
from kmbench.errors import ImplementationError
from kmbench.protocol import Problem, Result, stop_done
from kmbench.protocol.device import PinnedHost, pinnable  # the harness pins the data it makes, too
from kmbench.protocol.timing import CudaEventRegion, host_region

# Bytes of points per chunk. 512 MiB takes 10 ms over a 50 GB/s link: the twenty-odd launches
# of a chunk cost far less, and the slots and per-chunk buffers leave the GPU nearly free.
CHUNK_BYTES = 1 << 29
CHUNK_ENV = "KMBENCH_STREAM_CHUNK_BYTES"  # smaller chunks, so tests cross many boundaries


def chunk_rows(n: int, d: int, chunk_bytes: int | None = None) -> int:
    """Rows per chunk: as many float32 rows as chunk_bytes hold, at least one, at most n."""
    chunk_bytes = chunk_bytes or int(os.environ.get(CHUNK_ENV) or CHUNK_BYTES)
    return int(max(1, min(n, chunk_bytes // (4 * d))))


def chunks(n: int, rows: int) -> list[tuple[int, int]]:
    """(first row, row count) of each chunk, in order."""
    return [(start, min(rows, n - start)) for start in range(0, n, rows)]


class ChunkStream:
    """Chunks of a pinned host array (n x d float32) onto the GPU in turn, through two slots:
    the copy of a chunk, on its own stream, overlaps the kernels of the one before, on the
    current stream; a slot is copied into again once the kernels that read it have run."""

    def __init__(self, host: np.ndarray, rows: int):
        import cupy

        self.host, self.rows = host, rows
        self.row_bytes = host.shape[1] * host.itemsize
        self.slots = [cupy.empty((rows, host.shape[1]), dtype=host.dtype) for _ in range(2)]
        self.copies = cupy.cuda.Stream(non_blocking=True)
        self._copied = [cupy.cuda.Event(disable_timing=True) for _ in range(2)]
        self._free = [cupy.cuda.Event(disable_timing=True) for _ in range(2)]
        for event in self._free:  # both slots start free
            event.record()

    def sweep(self, load, process=None) -> None:
        """Every chunk in order: load(raw, first) on the current stream reads the chunk in its
        slot (m x d, as stored), which is given back to the copies after it; then
        process(first, m). Nothing here waits on the host: the launches run ahead."""
        import cupy

        compute = cupy.cuda.get_current_stream()
        for index, (first, m) in enumerate(chunks(self.host.shape[0], self.rows)):
            slot = index % 2
            # Wait for the kernels that last read this slot: two chunks ago, or at the end of
            # the sweep before (the next iteration's first copies start while it finishes).
            self.copies.wait_event(self._free[slot])
            cupy.cuda.runtime.memcpyAsync(self.slots[slot].data.ptr, self.host.ctypes.data + first * self.row_bytes,
                                          m * self.row_bytes, cupy.cuda.runtime.memcpyHostToDevice, self.copies.ptr)
            self._copied[slot].record(self.copies)
            compute.wait_event(self._copied[slot])
            load(self.slots[slot][:m], first)
            self._free[slot].record(compute)
            if process is not None:
                process(first, m)

    def copy_seconds(self) -> float:
        """One pass of the copies alone, through the same chunks and slots (CUDA events): the
        floor under any streamed iteration."""
        region = CudaEventRegion()
        with region:
            self.sweep(lambda raw, first: None)
        return region.seconds()

    def column_sums(self):
        """The points' float64 sum per dimension (one pass, on the GPU)."""
        import cupy

        total = cupy.zeros(self.host.shape[1], dtype=cupy.float64)

        def add(raw, first):
            total[...] += raw.sum(axis=0, dtype=cupy.float64)

        self.sweep(add)
        return total


class KmbenchGpuStream(KmbenchGpu):
    name = "kmbench-gpu-stream"
    row_order = 120
    label = "kmbench-gpu (streamed from host)"
    description = ("kmbench-gpu for data larger than GPU memory: points pinned in host memory, streamed "
                   "in chunks on two streams every iteration, the resident kernels per chunk")
    source = "kmbench's own (issue 21: data larger than one GPU's memory)"

    def strategy_for(self, problem: Problem) -> str:
        return pass_strategy(problem.d, problem.k)

    def check(self, problem: Problem) -> None:
        import cupy

        if not 1 <= problem.k <= MAX_K:
            raise ImplementationError(f"{self.name} handles 1 <= k <= {MAX_K}; got k = {problem.k}")
        n, d, k = problem.n, problem.d, problem.k
        rows = chunk_rows(n, d)
        needed = 2 * rows * d * 4 + n * 4 + k * (d + 1) * 24
        if self.strategy_for(problem) == "tensor":
            from impls.gpu.kmbench_gpu.tensor_settings import device_bytes, tensor_status

            ready, why = tensor_status()
            if not ready:
                raise ImplementationError(f"{self.name} needs the tensor path above d = {TILED_MAX_DIM}: {why}")
            needed += device_bytes(rows, d, k) + rows * d * 16  # and the norms' float64 temporaries
        else:
            needed += rows * d * 4
        free, _ = cupy.cuda.runtime.memGetInfo()
        if needed > free:
            raise ImplementationError(f"{self.name} needs {needed / 2**30:.1f} GiB of GPU memory for its chunks "
                                      f"and labels; {free / 2**30:.1f} GiB is free")

    # ------------------------------------------------------------------ setup

    def prepare(self, problem: Problem) -> None:
        import cupy

        self.check(problem)
        n, d = problem.n, problem.d
        self._strategy = self.strategy_for(problem)
        chosen = self._chosen = make(self._strategy, d, problem.k, order=self._tensor_order)
        phases: dict[str, float] = {}
        # A float64 dataset is streamed as float32, and a cached one (mapped read-only from its
        # .npy) is read into memory that can be pinned: copies, both.
        with host_region(phases, "convert"):
            host = pinnable(np.ascontiguousarray(problem.data, dtype=np.float32))
        with host_region(phases, "pin"):
            self._pinned = PinnedHost(host)
        self._rows = chunk_rows(n, d)
        self._compute = cupy.cuda.Stream(non_blocking=True)
        self._changed = cupy.zeros(1, dtype=cupy.uint64)
        self._changed_host = cupy.cuda.alloc_pinned_memory(8)
        self._previous = cupy.full(n, -1, dtype=cupy.int32)  # each point's last label (tolerance rule)
        with self._compute:
            self._chunks = ChunkStream(host, self._rows)
            with host_region(phases, "shift"):  # the float32 mean, summed in float64: one pass
                self._shift = (self._chunks.column_sums().get() / n).astype(np.float32)
                self._shift_gpu = cupy.asarray(self._shift)
                self._compute.synchronize()
            with host_region(phases, "compile"):
                chosen.compile()
                # The strategy's points are one chunk, centred (load_chunk fills them).
                chosen.allocate(cupy.zeros((self._rows, d), dtype=cupy.float32), self._changed, labels=False)
                self._warm_up(problem)
                self._compute.synchronize()
            with host_region(phases, "copy floor"):
                self._copy_floor = self._chunks.copy_seconds()
        self._setup = phases
        self._info = {"strategy": self._strategy, "streamed": True, "chunk_rows": self._rows,
                      "chunks": len(chunks(n, self._rows)), "chunk_bytes": self._rows * d * 4,
                      "host_memory": "pinned in place" if self._pinned._pinned_here else "already pinned",
                      "copy_floor_s": self._copy_floor, "cupy": cupy.__version__, "distance": chosen.distance,
                      **chosen.pass_info(), "precision": chosen.precision}

    def _warm_up(self, problem: Problem) -> None:
        """Every kernel compiled (NVRTC, Triton) on the first chunk, outside the timed region."""
        import cupy

        m = min(self._rows, problem.n)
        first = cupy.asarray(np.asarray(self._pinned.array[:m]))
        start = np.asarray(problem.initial_centroids, np.float64) - self._shift
        self._start(start, track=True)
        self._chosen.before_iterations()  # what each run does first compiles on first use too
        for track in (False, True):
            self._load(first, 0)
            self._process(0, m, track)
            self._chosen.finish_pass()

    # ------------------------------------------------------------------ one iteration

    def _start(self, start: np.ndarray, track: bool) -> None:
        self._chosen.start(start, track)
        if track:
            self._previous.fill(-1)

    def _load(self, raw, first: int) -> None:
        """A chunk as stored, centred into the strategy's buffer (the slot is free after this)."""
        self._chosen.load_chunk(raw, self._shift_gpu)

    def _process(self, first: int, m: int, track: bool) -> None:
        """The loaded chunk's labels and sums."""
        self._chosen.add_chunk(m, track, self._previous[first:first + m])

    # ------------------------------------------------------------------ the timed run

    def run(self, problem: Problem) -> Result:
        import cupy

        chosen = self._chosen
        start = np.asarray(problem.initial_centroids, dtype=np.float64) - self._shift.astype(np.float64)
        track = problem.tol is not None
        changed = np.frombuffer(self._changed_host, dtype=np.uint64, count=1)
        done = problem.iterations
        phases: dict[str, float] = {}
        with self._compute:
            self._start(start, track)
            self._compute.synchronize()
            region = CudaEventRegion()
            with region:
                chosen.before_iterations()
                for done in range(1, problem.iterations + 1):
                    if track:
                        self._changed.fill(0)
                    self._chunks.sweep(self._load, lambda first, m: self._process(first, m, track))
                    chosen.finish_pass()
                    if track:
                        self._changed.data.copy_to_host_async(changed.ctypes.data, 8)
                        self._compute.synchronize()
                        if stop_done(int(changed[0]), problem.n, problem.tol):
                            break
            phases["iterate"] = region.seconds()
            with host_region(phases, "download"):
                centroids = cupy.asnumpy(chosen.final_centroids()) + self._shift.astype(np.float64)
        notes = [f"streamed from pinned host memory in {len(chunks(problem.n, self._rows))} chunks per iteration; "
                 f"the copies alone take {self._copy_floor * 1e3:.1f} ms per pass"]
        notes += chosen.after_run(problem, done)[0]  # its notes; the streamed record never took its fields
        return Result(centroids=centroids, iterations=done, phases=phases, notes=notes)

    # ------------------------------------------------------------------ bookkeeping

    def release(self) -> None:
        pinned = self.__dict__.pop("_pinned", None)
        if pinned is not None:
            import cupy

            cupy.cuda.Device().synchronize()  # no copy may still be reading it
            pinned.release()
        for name in ("_chunks", "_compute", "_previous", "_shift_gpu"):
            self.__dict__.pop(name, None)
        super().release()

    def bytes_per_iteration(self, problem: Problem) -> int:
        return problem.n * problem.d * 4  # every point over the host link once

    def copy_floor(self) -> float | None:
        """Seconds of one pass of the copies alone, measured in prepare."""
        return getattr(self, "_copy_floor", None)
