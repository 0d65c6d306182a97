"""The Triton kernel of triton-fused: one pass over the points per Lloyd iteration that finds
each point's nearest centroid and adds the point to its cluster's float64 sum, so the n x k
distances never reach memory. Imported only where Triton is installed.

Scores are |c|^2 / 2 - x . c on data shifted by their mean (the adapter does that), computed
in FP32: one coordinate at a time for d <= LOW_D_MAX, by `tl.dot` with IEEE FP32 inputs above
(never TF32). Each (row, column) slot of a tile keeps its running minimum across the
centroid tiles, elementwise; the minimum over the slots, a reduction across threads, comes
once per block of points (once per tile, it took most of the instructions: see NOTES.md).
Of equal scores the lower centroid index wins, as in the oracle.

Sums: where every centroid fits one tile (few clusters, small d), each program adds its
points into float64 registers, one (cluster, dimension) slot per row of its block, and
writes them with one float64 atomic per cluster and dimension at its end; the programs loop
over blocks (a persistent grid), so the atomics are few and every addition is float64. Otherwise each point
adds itself to its cluster with float64 atomics: with many clusters they rarely collide.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def assign_and_sum(x_ptr, centroids_ptr, half_norms_ptr, labels_ptr, sums_ptr, counts_ptr, changed_ptr,
                   n, k,
                   DIM: tl.constexpr, DIM_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   BLOCK_D: tl.constexpr, LOW_D: tl.constexpr, SUMS_IN_PROGRAM: tl.constexpr,
                   TRACK: tl.constexpr):
    program = tl.program_id(0)
    programs = tl.num_programs(0)
    blocks = tl.cdiv(n, BLOCK_N)
    dims = tl.arange(0, DIM_PAD)
    dim_ok = dims < DIM
    clusters = tl.arange(0, BLOCK_K)
    # Per-program totals (used when SUMS_IN_PROGRAM): float64 sums kept per row slot, so a block
    # adds without a reduction across threads (one at the end), counts likewise; changed labels.
    slot_sums = tl.zeros((BLOCK_N, BLOCK_K, DIM_PAD), dtype=tl.float64)
    slot_counts = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.int32)
    changed = tl.sum(tl.zeros((BLOCK_N,), dtype=tl.int32), axis=0)
    for block in range(program, blocks, programs):
        rows = block * BLOCK_N + tl.arange(0, BLOCK_N)
        row_ok = rows < n
        rows64 = rows.to(tl.int64)
        # The running minimum per (row, column slot) across centroid tiles: elementwise, so the
        # reduction across threads happens once per block, not once per tile.
        slot_best = tl.full((BLOCK_N, BLOCK_K), float("inf"), dtype=tl.float32)
        slot_index = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.int32)
        for first in range(0, k, BLOCK_K):
            cols = first + clusters
            col_ok = cols < k
            if LOW_D:  # one coordinate at a time: d multiply-adds per pair, no 3-D product
                dots = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
                for j in tl.static_range(DIM):
                    xj = tl.load(x_ptr + rows64 * DIM + j, mask=row_ok, other=0.0)
                    cj = tl.load(centroids_ptr + cols * DIM + j, mask=col_ok, other=0.0)
                    dots += xj[:, None] * cj[None, :]
            else:
                dots = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
                for low in range(0, DIM, BLOCK_D):
                    chunk = low + tl.arange(0, BLOCK_D)
                    chunk_ok = chunk < DIM
                    xs = tl.load(x_ptr + rows64[:, None] * DIM + chunk[None, :],
                                 mask=row_ok[:, None] & chunk_ok[None, :], other=0.0)
                    cs = tl.load(centroids_ptr + cols[:, None] * DIM + chunk[None, :],
                                 mask=col_ok[:, None] & chunk_ok[None, :], other=0.0)
                    dots = tl.dot(xs, tl.trans(cs), dots, input_precision="ieee")
            # Missing centroids score +inf, so they never win.
            half = tl.load(half_norms_ptr + cols, mask=col_ok, other=float("inf"))
            scores = half[None, :] - dots
            better = scores < slot_best  # strict: an earlier tile's equal score keeps its lower index
            slot_best = tl.where(better, scores, slot_best)
            slot_index = tl.where(better, cols[None, :], slot_index)
        best = tl.min(slot_best, axis=1)
        # Of equal minima, the lowest centroid index, as in the oracle.
        best_index = tl.min(tl.where(slot_best == best[:, None], slot_index, k), axis=1)
        if TRACK:
            old = tl.load(labels_ptr + rows64, mask=row_ok, other=0)
            changed += tl.sum((row_ok & (old != best_index)).to(tl.int32), axis=0)
            tl.store(labels_ptr + rows64, best_index, mask=row_ok)
        if SUMS_IN_PROGRAM:
            x = tl.load(x_ptr + rows64[:, None] * DIM + dims[None, :],
                        mask=row_ok[:, None] & dim_ok[None, :], other=0.0).to(tl.float64)
            mine = (best_index[:, None] == clusters[None, :]) & row_ok[:, None]
            slot_sums += tl.where(mine[:, :, None], x[:, None, :], 0.0)
            slot_counts += mine.to(tl.int32)
        else:
            for low in range(0, DIM, BLOCK_D):
                chunk = low + tl.arange(0, BLOCK_D)
                chunk_ok = chunk < DIM
                xs = tl.load(x_ptr + rows64[:, None] * DIM + chunk[None, :],
                             mask=row_ok[:, None] & chunk_ok[None, :], other=0.0)
                tl.atomic_add(sums_ptr + best_index.to(tl.int64)[:, None] * DIM + chunk[None, :],
                              xs.to(tl.float64), mask=row_ok[:, None] & chunk_ok[None, :], sem="relaxed")
            tl.atomic_add(counts_ptr + best_index, tl.full((BLOCK_N,), 1, dtype=tl.int32), mask=row_ok,
                          sem="relaxed")
    if SUMS_IN_PROGRAM:
        tl.atomic_add(sums_ptr + clusters[:, None] * DIM + dims[None, :], tl.sum(slot_sums, axis=0),
                      mask=(clusters[:, None] < k) & dim_ok[None, :], sem="relaxed")
        tl.atomic_add(counts_ptr + clusters, tl.sum(slot_counts, axis=0), mask=clusters < k, sem="relaxed")
    if TRACK:
        tl.atomic_add(changed_ptr, changed, sem="relaxed")
