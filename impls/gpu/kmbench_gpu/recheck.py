"""The tensor path's re-check (TensorPath's methods, on the buffers its __init__ makes): the
points the TF32 pass (tf32_pass.py) listed get their labels again in FP32, against only the
centroids the bound leaves in play. Points listed with their candidates, or whose every tile's
best two were kept, are settled by recheck.cu; what they leave is ordered by TF32 winner
(update.cu's flagged_* kernels) and scanned tile by tile by Triton's exact_assign
(recheck_kernels.py), or first by tiered_assign where KMBENCH_TENSOR_RECHECK=tiered."""

from __future__ import annotations

import numpy as np

from impls.gpu.kmbench_gpu.tf32_pass import triton_on_cupy_stream

RECHECK_BLOCKS_PER_SM = 6  # as recheck.cu's __launch_bounds__(256, 6) on candidate_recheck
# Tiles tile_recheck scores whole for one point; past it, the point goes to exact_assign, whose
# blocks share each tile's loads. None, measured against 1, 2 and 4: 20.0 / 24.2 / 38.4 / 59.7 ms
# per iteration on crowded centroids (300k x 408, 5,000 starts on 50 blobs), 6.8 / 7.2 / 7.1 /
# 6.8 ms at the embeddings suite's 300k x 408, 32.8 against 37.0 ms (2) at 1e6 x 768 (NOTES.md).
WHOLE_MOST = 0


class Recheck:
    """TensorPath's re-check of the points the TF32 pass could not certify."""

    def recheck_flagged(self) -> None:
        """The listed points' labels again, in FP32 against the centroids the bound leaves in play:
        by one dot product per candidate where the TF32 pass left what says which they are
        (recheck.cu); the others against every tile that holds one, the list ordered by TF32
        winner first (update.cu), so each block's points share candidates."""
        launch, blocks = self._update, (self._stream_blocks,)
        k, block_n = np.int32(self.k), np.int32(self.tiling[1])
        scanned, scanned_limits, scanned_count = self.flagged, self.limits, self.flagged_count
        if self.kept_tiles:
            self.passed_count.fill(0)
            self._tile_recheck(
                blocks, (256,), (self.x, np.int32(self.d), np.int64(self.n), self.centroids, self.half_norms,
                                 self.order_of, k, block_n, self.tile_best, self.tile_second, self.tile_labels,
                                 self.flagged, self.limits, self.flagged_count, self.labels, np.int32(WHOLE_MOST),
                                 self.passed, self.passed_limits, self.passed_count))
            scanned, scanned_limits, scanned_count = self.passed, self.passed_limits, self.passed_count
        elif self.candidates:
            self._candidate_recheck(
                (self._recheck_blocks,), (256,),
                (self.x, np.int32(self.d), self.centroids, self.half_norms, self.order_of, k, np.int32(self.slots),
                 self.candidate_rows, self.candidate_sizes, self.candidate_index, np.int32(self.candidates),
                 self.candidate_count, *self._recheck_split, self.labels))
        launch["flagged_histogram"](blocks, (256,), (self.labels, scanned, scanned_count, self.flagged_counts))
        launch["flagged_scan"]((1,), (1024,), (self.flagged_counts, np.int32(self.k), self.flagged_starts,
                                               self.flagged_cursor))
        launch["flagged_scatter"](blocks, (256,), (self.labels, scanned, scanned_limits, scanned_count,
                                                   self.flagged_cursor, self.flagged_sorted, self.limits_sorted))
        t = self._torch
        block_m, block_n, block_d, warps, stages = self.exact_tiling
        tiles = dict(DIM=self.d, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d, num_warps=warps, num_stages=stages)
        listed, limits, precision = t["flagged_sorted"], t["limits_sorted"], self.recheck
        count = t["passed_count"] if self.kept_tiles else t["flagged_count"]
        with triton_on_cupy_stream():
            if self.recheck == "tiered":
                # tf32x3 settles what its bound certifies; the rest, listed again in the free
                # flagged/limits buffers (the sorted copies are read now), goes to IEEE.
                self.left_count.fill(0)
                self._tiered[(self._exact_programs,)](
                    t["x"], t["x_tf32"], t["x_norm"], t["centroids"], t["centroids_tf32"], t["half_norms"],
                    t["bound_max"], t["labels"], listed, limits, count, t["flagged"], t["limits"], t["left_count"],
                    self.k, *self.tiered, **tiles)
                listed, limits, count, precision = t["flagged"], t["limits"], t["left_count"], "ieee"
            self._exact[(self._exact_programs,)](
                t["x"], t["x_tf32"], t["centroids"], t["centroids_tf32"], t["half_norms"], t["order_of"], t["labels"],
                listed, limits, count, self.k, PRECISION=precision, **tiles)

    def rechecked(self) -> int:
        """Points re-checked in FP32 over the run so far (every iteration's count added)."""
        return int(self.flagged_total.get()[0])
