"""The tensor path's update (TensorPath's methods, on the buffers its __init__ makes): new
centroids from the labels. The points are ordered by cluster by a counting sort (update.cu's
histogram, scan and scatter), summed in float64 over runs of one cluster (segment_sums, one
atomic per run), and finish makes the new centroids, their float32 and TF32 copies, half
norms and the bound's maxima. A streamed iteration (stream.py) sees the points a chunk at a
time: accumulate per chunk, then finish_streamed once.

Where the run's sums stay on this GPU (no shard's all-reduce, not streamed), an iteration in which
few rows changed cluster takes its sums from those rows instead (moved_sums.cu): the last sums,
plus the rows that came in, minus those that left. The GPU chooses per iteration, by the count of
moved rows, so the run's CUDA graph holds both ways."""

from __future__ import annotations

import os

import numpy as np

from kmbench.errors import ImplementationError

CHUNK = 256  # as in update.cu
SHARED_HISTOGRAM_K = 12288  # k int counters in 48 KB of shared memory
# How the update orders the points where k fits in shared memory: "block" (block_scatter, one
# global atomic per block and label) or "warp" (scatter, one per warp and label). A module
# setting, so f08c955:bench/tensor_experiments.py update measures one against the other in one process.
SCATTER = "block"
SCATTER_THREADS = 512
SCATTER_BLOCKS_PER_SM = 2  # long ranges per block: most of k's labels meet in each block's counters
# The largest share of rows that moved for which the sums come from them: past it, the sort. On an
# H200 (f08c955:bench/moved_rows.py) the moved rows cost about 1.4 ns each at d = 128 and 0.65 at d = 64
# (their float64 atomics), the sort and sums about 190 us at 1e6 rows of either: even at d = 128
# the moved rows are cheaper below 13%. A module setting: the tests force either way with it.
MOVED_MOST = 1 / 8
SUMS = ("moved", "sorted")


def sums_setting() -> str:
    """KMBENCH_TENSOR_SUMS: "moved" (the default: from the moved rows where few moved) or "sorted"
    (every iteration sorts, as before; for measuring one against the other)."""
    chosen = os.environ.get("KMBENCH_TENSOR_SUMS", "moved")
    if chosen not in SUMS:
        raise ImplementationError(f"KMBENCH_TENSOR_SUMS must be one of {', '.join(SUMS)}")
    return chosen


class Update:
    """TensorPath's update: sorted float64 sums, then the new centroids."""

    def update(self, track: bool, combine=None) -> None:
        """New centroids from the labels: counting sort by cluster, float64 segment sums (or the
        sums from the moved rows, where they may); combine(), where given, adds every shard's sums
        and counts to these first, so the sums start from zero each iteration there."""
        if combine is None and self.sums_from_moved:
            self._moved_update(track)
            return
        self._sorted_sums(track, self.previous, "scan", (self.listed_counts, self.flagged_total, self.bound_max),
                          self.never_moved)
        if combine is not None:
            combine()
        self._finish(self.counts)

    def _moved_update(self, track: bool) -> None:
        """The sums from the moved rows, or by the sort where more than MOVED_MOST of them moved
        (always in a run's first iteration); the sums and counts are kept for the next iteration."""
        n, launch = np.int64(self.n), self._moved
        self.moved.fill(0)
        launch["count_moved"]((self._stream_blocks,), (256,), (self.labels, self.previous, n, self.moved, self.changed,
                                                               np.int32(track)))
        launch["choose_sums"]((max(1, min(self._stream_blocks, -(-self.k * self.d // 256))),), (256,),
                              (self.moved, np.int64(int(self.n * MOVED_MOST)), self.from_moved, self.moved_steps,
                               self.sums, self.counts, np.int32(self.k), np.int32(self.d)))
        for _, step in self.sort_and_sum_steps(False, self.previous, "scan",
                                               (self.listed_counts, self.flagged_total, self.bound_max),
                                               self.from_moved):
            step()
        launch["moved_sums"]((self._stream_blocks,), (256,), (self.x, np.int32(self.d), self.labels, self.previous, n,
                                                              self.sums, self.counts, self.from_moved))
        self._finish(self.counts, keep=True)

    def accumulate(self, track: bool, previous) -> None:
        """The loaded chunk's share of the update: its points summed by cluster into sums, its
        counts added to totals; `previous`: its rows of the run's labels (tolerance rule)."""
        self._sorted_sums(track, previous, "chunk_scan", (self.totals, self.listed_counts, self.flagged_total),
                          self.never_moved)

    def finish_streamed(self) -> None:
        """New centroids from every chunk's sums and totals; the bound's maxima start again."""
        self.bound_max.fill(0)
        self._finish(self.totals)

    def _sorted_sums(self, track: bool, previous, scan: str, scan_tail: tuple, from_moved) -> None:
        """Counting sort of the points by cluster, then float64 sums over runs of one cluster."""
        for _, step in self.sort_and_sum_steps(track, previous, scan, scan_tail, from_moved):
            step()

    def sort_and_sum_steps(self, track: bool, previous, scan: str, scan_tail: tuple, from_moved) -> list:
        """The update's launches before finish, as (name, launch) pairs: the counting sort
        (histogram, scan, scatter) and the sums, each skipped on the GPU where from_moved holds 1
        (never_moved: never); scan, unlike chunk_scan, takes the flag after scan_tail.
        f08c955:bench/tensor_experiments.py update times each."""
        n, d, k = np.int64(self.n), np.int32(self.d), np.int32(self.k)
        scan_tail = scan_tail + ((from_moved,) if scan == "scan" else ())
        shared_k = self.k if self.k <= SHARED_HISTOGRAM_K else 0
        launch = self._update
        if shared_k and SCATTER == "block":
            per_block = -(-self.n // self._scatter_blocks)
            scatter = ("block_scatter", lambda: launch["block_scatter"](
                (self._scatter_blocks,), (SCATTER_THREADS,), (self.labels, n, k, np.int64(per_block), self.cursor,
                                                              self.order, from_moved), shared_mem=shared_k * 4))
        else:
            scatter = ("scatter", lambda: launch["scatter"]((self._stream_blocks * 2,), (256,),
                                                            (self.labels, n, self.cursor, self.order, from_moved)))
        # With counts in shared memory each block adds its k counts to global memory once, so the
        # histogram takes the scatter's few long ranges: 1,056 blocks made it about one global atomic
        # a point at 1e6 points, k = 1,000 (20 us, NOTES.md).
        histogram_grid = ((self._scatter_blocks,), (SCATTER_THREADS,)) if shared_k else ((self._stream_blocks,), (256,))
        return [
            ("histogram", lambda: launch["histogram"](*histogram_grid,
                                                      (self.labels, n, k, self.counts, np.int32(shared_k), previous,
                                                       self.changed, np.int32(track), from_moved),
                                                      shared_mem=shared_k * 4)),
            (scan, lambda: launch[scan]((1,), (1024,), (self.counts, k, self.starts, self.cursor) + scan_tail)),
            scatter,
            ("segment_sums", lambda: launch["segment_sums"](((self.n + CHUNK - 1) // CHUNK,), (self._sum_threads,),
                                                            (self.x, d, self.order, self.labels, n, self.sums,
                                                             from_moved)))]

    def _finish(self, counts, keep: bool = False) -> None:
        self._update["finish"]((self.k,), (self._sum_threads,),
                               (self.sums, counts, np.int32(self.k), np.int32(self.d), self.centroids64,
                                self.centroids, self.centroids_tf32, self.half_norms, self.bound_max, np.int32(keep)))

    def moved_sum_steps(self) -> int:
        """Iterations since start() whose sums came from the moved rows."""
        return int(self.moved_steps[0])

    @property
    def _sum_threads(self) -> int:
        """Threads of segment_sums and finish: one per dimension, whole warps, at most 256."""
        return int(min(256, max(32, (self.d + 31) // 32 * 32)))
