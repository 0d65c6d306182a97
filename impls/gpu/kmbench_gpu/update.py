"""The tensor path's update (TensorPath's methods, on the buffers its __init__ makes): new
centroids from the labels. The points are ordered by cluster by a counting sort (update.cu's
histogram, scan and scatter), summed in float64 over runs of one cluster (segment_sums, one
atomic per run), and finish makes the new centroids, their float32 and TF32 copies, half
norms and the bound's maxima. A streamed iteration (stream.py) sees the points a chunk at a
time: accumulate per chunk, then finish_streamed once."""

from __future__ import annotations

import numpy as np

CHUNK = 256  # as in update.cu
SHARED_HISTOGRAM_K = 12288  # k int counters in 48 KB of shared memory
# How the update orders the points where k fits in shared memory: "block" (block_scatter, one
# global atomic per block and label) or "warp" (scatter, one per warp and label). A module
# setting, so bench/tensor_experiments.py update measures one against the other in one process.
SCATTER = "block"
SCATTER_THREADS = 512
SCATTER_BLOCKS_PER_SM = 2  # long ranges per block: most of k's labels meet in each block's counters


class Update:
    """TensorPath's update: sorted float64 sums, then the new centroids."""

    def update(self, track: bool, combine=None) -> None:
        """New centroids from the labels: counting sort by cluster, float64 segment sums;
        combine(), where given, adds every shard's sums and counts to these first."""
        self._sorted_sums(track, self.previous, "scan", (self.listed_counts, self.flagged_total, self.bound_max))
        if combine is not None:
            combine()
        self._finish(self.counts)

    def accumulate(self, track: bool, previous) -> None:
        """The loaded chunk's share of the update: its points summed by cluster into sums, its
        counts added to totals; `previous`: its rows of the run's labels (tolerance rule)."""
        self._sorted_sums(track, previous, "chunk_scan", (self.totals, self.listed_counts, self.flagged_total))

    def finish_streamed(self) -> None:
        """New centroids from every chunk's sums and totals; the bound's maxima start again."""
        self.bound_max.fill(0)
        self._finish(self.totals)

    def _sorted_sums(self, track: bool, previous, scan: str, scan_tail: tuple) -> None:
        """Counting sort of the points by cluster, then float64 sums over runs of one cluster."""
        for _, step in self.sort_and_sum_steps(track, previous, scan, scan_tail):
            step()

    def sort_and_sum_steps(self, track: bool, previous, scan: str, scan_tail: tuple) -> list:
        """The update's launches before finish, as (name, launch) pairs: the counting sort
        (histogram, scan, scatter) and the sums. bench/tensor_experiments.py update times each."""
        n, d, k = np.int64(self.n), np.int32(self.d), np.int32(self.k)
        shared_k = self.k if self.k <= SHARED_HISTOGRAM_K else 0
        launch = self._update
        if shared_k and SCATTER == "block":
            per_block = -(-self.n // self._scatter_blocks)
            scatter = ("block_scatter", lambda: launch["block_scatter"](
                (self._scatter_blocks,), (SCATTER_THREADS,), (self.labels, n, k, np.int64(per_block), self.cursor,
                                                              self.order), shared_mem=shared_k * 4))
        else:
            scatter = ("scatter", lambda: launch["scatter"]((self._stream_blocks * 2,), (256,),
                                                            (self.labels, n, self.cursor, self.order)))
        # With counts in shared memory each block adds its k counts to global memory once, so the
        # histogram takes the scatter's few long ranges: 1,056 blocks made it about one global atomic
        # a point at 1e6 points, k = 1,000 (20 us, NOTES.md).
        histogram_grid = ((self._scatter_blocks,), (SCATTER_THREADS,)) if shared_k else ((self._stream_blocks,), (256,))
        return [
            ("histogram", lambda: launch["histogram"](*histogram_grid,
                                                      (self.labels, n, k, self.counts, np.int32(shared_k), previous,
                                                       self.changed, np.int32(track)), shared_mem=shared_k * 4)),
            (scan, lambda: launch[scan]((1,), (1024,), (self.counts, k, self.starts, self.cursor) + scan_tail)),
            scatter,
            ("segment_sums", lambda: launch["segment_sums"](((self.n + CHUNK - 1) // CHUNK,), (self._sum_threads,),
                                                            (self.x, d, self.order, self.labels, n, self.sums)))]

    def _finish(self, counts) -> None:
        self._update["finish"]((self.k,), (self._sum_threads,),
                               (self.sums, counts, np.int32(self.k), np.int32(self.d), self.centroids64,
                                self.centroids, self.centroids_tf32, self.half_norms, self.bound_max))

    @property
    def _sum_threads(self) -> int:
        """Threads of segment_sums and finish: one per dimension, whole warps, at most 256."""
        return int(min(256, max(32, (self.d + 31) // 32 * 32)))
