"""Triton kernels of kmbench-gpu's tensor-core path (imported only where Triton is installed).

certified_assign: one pass over the points. Each block of BLOCK_M points meets every centroid
tile through TF32 tensor-core products (FP32 accumulation). The n x k scores never reach
memory. Where BLOCK_D covers d (d <= 128), a block's points are loaded once and stay on chip
while the centroid tiles stream past (the loop Triton pipelines), and the best score, its
index and the second best are kept per (row, column slot), elementwise, so the reduction
across threads comes once per block, not once per tile (see impls/gpu/triton_fused/NOTES.md for
why). Above, each tile is a K loop over chunks of BLOCK_D dimensions, long enough that a
reduction per tile is cheap, and per-row state leaves the registers for wider tiles. A point
whose best two scores are further apart than twice the bound E of bound.py takes the TF32
winner; the others are appended to a list, each with its limit: best TF32 score + 2 E (E's
terms and its multiple 2 come as arguments, from bound.py: tensor_path.bound_arguments). With
KEEP_FLOOR it also writes, per point, a lower bound on the exact score of every centroid other
than the exact winner (yinyang-gpu starts its bounds from it). With CANDIDATES (rows on chip) it
lists each uncertain point's candidates from its slots; with KEEP_TILES (rows streamed) it keeps
every point's best two of every tile; recheck.cu re-checks those points from either. Where scores
are packed, tiles wider than the slots fold into them (SLOTS), and the centroid tiles may come
through a TMA descriptor (TMA) instead of pointer loads.

The re-check's kernels, exact_assign and tiered_assign, are recheck_kernels.py's; they share
_rows, _scores and _append with these.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _rows(x_ptr, rows64, row_ok, low, DIM: tl.constexpr, BLOCK_D: tl.constexpr):
    """BLOCK_D coordinates from `low` of the given rows (zeros past d and past the rows)."""
    chunk = low + tl.arange(0, BLOCK_D)
    return tl.load(x_ptr + rows64[:, None] * DIM + chunk[None, :],
                   mask=row_ok[:, None] & (chunk < DIM)[None, :], other=0.0)


@triton.jit
def _scores(x_ptr, x_whole, rows64, row_ok, c_ptr, half_ptr, cols, col_ok,
            DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
            PRECISION: tl.constexpr, ABSENT: tl.constexpr = float("inf")):
    """|c|^2 / 2 - x . c for one tile; absent centroids score ABSENT (+inf unless told). x_whole:
    the block's rows, loaded once, where BLOCK_D >= DIM."""
    if BLOCK_D >= DIM:
        cs = _rows(c_ptr, cols.to(tl.int64), col_ok, 0, DIM, BLOCK_D)
        dots = tl.dot(x_whole, tl.trans(cs), input_precision=PRECISION)
    else:
        dots = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for low in range(0, DIM, BLOCK_D):
            xs = _rows(x_ptr, rows64, row_ok, low, DIM, BLOCK_D)
            cs = _rows(c_ptr, cols.to(tl.int64), col_ok, low, DIM, BLOCK_D)
            dots = tl.dot(xs, tl.trans(cs), dots, input_precision=PRECISION)
    half = tl.load(half_ptr + cols, mask=col_ok, other=ABSENT)
    return half[None, :] - dots


@triton.jit
def _best_two_by_slot(x_ptr, x_whole, rows64, row_ok, c_ptr, half_ptr, k,
                      DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    """Best score, runner-up and winner per row, kept per (row, column slot) across the tiles
    and reduced once: where a tile's products are short (rows on chip), a reduction across
    threads per tile would cost as much as the products."""
    slot_best = tl.full((BLOCK_M, BLOCK_N), float("inf"), dtype=tl.float32)
    slot_second = tl.full((BLOCK_M, BLOCK_N), float("inf"), dtype=tl.float32)
    slot_index = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for first in range(0, k, BLOCK_N):
        cols = first + tl.arange(0, BLOCK_N)
        scores = _scores(x_ptr, x_whole, rows64, row_ok, c_ptr, half_ptr, cols, cols < k,
                         DIM, BLOCK_M, BLOCK_N, BLOCK_D, "tf32")
        lower = scores < slot_best  # strict: of equal scores the earlier tile's lower index stays
        slot_second = tl.where(lower, slot_best, tl.minimum(slot_second, scores))
        slot_index = tl.where(lower, cols[None, :], slot_index)
        slot_best = tl.where(lower, scores, slot_best)
    best = tl.min(slot_best, axis=1)
    label = tl.min(tl.where(slot_best == best[:, None], slot_index, k), axis=1)
    # The runner-up is the winning slot's second score or another slot's best.
    winning_slot = slot_index == label[:, None]
    second = tl.min(tl.where(winning_slot, slot_second, slot_best), axis=1)
    return best, second, label


# A finite stand-in for +inf where scores are packed: inf with a tile number in its low bits
# would be a NaN. Below FP32's largest, and above every real score: data whose scores could
# come near it are not packed (bound.packable).
PACKED_ABSENT = tl.constexpr(3.0e38)


@triton.jit
def _best_two_of_pairs(best_a, second_a, best_b, second_b):
    """The best two of two (best, runner-up) pairs of packed scores: exact for any values, so
    a reduction may take the pairs in any order."""
    return tl.minimum(best_a, best_b), tl.minimum(tl.maximum(best_a, best_b), tl.minimum(second_a, second_b))


@triton.jit
def _best_two_packed(x_ptr, x_whole, rows64, row_ok, c_ptr, half_ptr, k,
                     DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                     PACK_BITS: tl.constexpr, SLOTS: tl.constexpr, TMA: tl.constexpr):
    """The same per (row, column slot), with each score's lowest PACK_BITS mantissa bits
    replaced by its tile's number: a slot then keeps its best and runner-up with one min and
    one max per score (no compare, no selects, no index array), and the winner's tile comes back
    out of its score. The packing moves a score by bound.packing_error, which the caller adds
    to E. Of equal packed scores the lower slot wins; equal scores are never
    certified (their margin is zero), so the re-check decides those ties.
    Where SLOTS < BLOCK_N, a tile of BLOCK_N centroids counts as BLOCK_N / SLOTS tiles of SLOTS
    (centroid t SLOTS + s is slot s of tile t, as with tiles of SLOTS), folded into the slots in
    registers: each thread holds the columns SLOTS apart of its rows (the MMA accumulator's
    layout), so the fold needs no exchange, and the wide product reads its rows from shared
    memory once per BLOCK_N centroids instead of once per SLOTS."""
    mask = (1 << PACK_BITS) - 1
    slot_best = tl.full((BLOCK_M, SLOTS), PACKED_ABSENT, dtype=tl.float32)
    slot_second = tl.full((BLOCK_M, SLOTS), PACKED_ABSENT, dtype=tl.float32)
    for first in range(0, k, BLOCK_N):
        cols = first + tl.arange(0, BLOCK_N)
        if TMA:  # c_ptr is a tensor descriptor: the tile comes by the copy engine, zeros past k and d
            dots = tl.dot(x_whole, tl.trans(c_ptr.load([first, 0])), input_precision="tf32")
            scores = tl.load(half_ptr + cols, mask=cols < k, other=PACKED_ABSENT)[None, :] - dots
        else:
            scores = _scores(x_ptr, x_whole, rows64, row_ok, c_ptr, half_ptr, cols, cols < k,
                             DIM, BLOCK_M, BLOCK_N, BLOCK_D, "tf32", PACKED_ABSENT)
        if SLOTS < BLOCK_N:  # each column's tile of SLOTS (past k too: the bits above the mask drop)
            tiles = ((cols // SLOTS) & mask)[None, :]
        else:
            tiles = first // BLOCK_N
        packed = ((scores.to(tl.int32, bitcast=True) & ~mask) | tiles).to(tl.float32, bitcast=True)
        if SLOTS < BLOCK_N:
            groups = tl.reshape(packed, (BLOCK_M, BLOCK_N // SLOTS, SLOTS))
            absent = tl.full((BLOCK_M, BLOCK_N // SLOTS, SLOTS), PACKED_ABSENT, dtype=tl.float32)
            tile_best, tile_second = tl.reduce((groups, absent), 1, _best_two_of_pairs)
            slot_best, slot_second = _best_two_of_pairs(slot_best, slot_second, tile_best, tile_second)
        else:
            slot_second = tl.minimum(slot_second, tl.maximum(slot_best, packed))
            slot_best = tl.minimum(slot_best, packed)
    best = tl.min(slot_best, axis=1)
    slots = tl.arange(0, SLOTS)
    winning = tl.min(tl.where(slot_best == best[:, None], slots[None, :], SLOTS), axis=1)
    label = (best.to(tl.int32, bitcast=True) & mask) * SLOTS + winning
    second = tl.min(tl.where(slots[None, :] == winning[:, None], slot_second, slot_best), axis=1)
    return best, second, label, slot_best, slot_second


@triton.jit
def _append(count_ptr, keep, rows, rows_ptr, values, values_ptr):
    """Appends the rows where `keep`, each with its value, to a list whose length is at
    count_ptr: one atomic per block reserves their places, a prefix sum orders them. Returns
    the places, where the caller stores more per row."""
    taken = keep.to(tl.int32)
    place = tl.atomic_add(count_ptr, tl.sum(taken, axis=0)) + tl.cumsum(taken, axis=0) - taken
    tl.store(rows_ptr + place, rows, mask=keep)
    tl.store(values_ptr + place, values, mask=keep)
    return place


@triton.jit
def _list_candidates(slot_best, slot_second, limit, flag, rows, cand_rows_ptr, cand_sizes_ptr, cand_index_ptr,
                     cand_count_ptr, BLOCK_N: tl.constexpr, PACK_BITS: tl.constexpr, CANDIDATES: tl.constexpr,
                     COLUMNS: tl.constexpr):
    """For listed rows, the centroids that can still be their exact winner, for recheck.cu. A
    candidate is a centroid whose packed TF32 score is within the row's limit (the exact winner is
    one: bound.py). A slot keeps its best two, so where its runner-up is past the limit, its best
    is its only candidate; where the runner-up is within it too, a third may be, and the slot is
    listed whole (as -1 - slot: recheck.cu scores every centroid of that column) where COLUMNS
    (few tiles: a column is short); elsewhere such a row stays on the list for exact_assign's
    scan, as does a row with more than CANDIDATES slots in play. Returns the rows left to that
    list."""
    near = slot_best <= limit[:, None]
    crowded = slot_second <= limit[:, None]
    near32 = near.to(tl.int32)
    size = tl.sum(near32, axis=1)
    if COLUMNS:
        short = flag & (size <= CANDIDATES)
    else:
        short = flag & (size <= CANDIDATES) & (tl.max(crowded.to(tl.int32), axis=1) == 0)
    place = _append(cand_count_ptr, short, rows, cand_rows_ptr, size, cand_sizes_ptr)
    slots = tl.arange(0, BLOCK_N)
    index = (slot_best.to(tl.int32, bitcast=True) & ((1 << PACK_BITS) - 1)) * BLOCK_N + slots[None, :]
    index = tl.where(crowded, -1 - slots[None, :], index)
    position = tl.cumsum(near32, axis=1) - near32
    tl.store(cand_index_ptr + place.to(tl.int64)[:, None] * CANDIDATES + position, index,
             mask=short[:, None] & near)
    return flag & ~short


@triton.jit
def _best_two_by_row(x_ptr, x_whole, rows64, row_ok, c_ptr, half_ptr, k, n, tile_best_ptr, tile_second_ptr,
                     tile_labels_ptr,
                     DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                     KEEP_TILES: tl.constexpr):
    """The same, reduced per tile: where the products are long (d > 128) the reductions are
    cheap beside them, and per-row state leaves the registers for wider tiles. With KEEP_TILES,
    every row's best, runner-up and winner of every tile are kept (tile-major, for recheck.cu):
    the re-check then finds a listed point's candidates there, without scanning the tiles."""
    best = tl.full((BLOCK_M,), float("inf"), dtype=tl.float32)
    second = tl.full((BLOCK_M,), float("inf"), dtype=tl.float32)
    label = tl.zeros((BLOCK_M,), dtype=tl.int32)
    for first in range(0, k, BLOCK_N):
        cols = first + tl.arange(0, BLOCK_N)
        scores = _scores(x_ptr, x_whole, rows64, row_ok, c_ptr, half_ptr, cols, cols < k,
                         DIM, BLOCK_M, BLOCK_N, BLOCK_D, "tf32")
        tile_best = tl.min(scores, axis=1)
        tile_label = tl.min(tl.where(scores == tile_best[:, None], cols[None, :], k), axis=1)
        tile_second = tl.min(tl.where(cols[None, :] == tile_label[:, None], float("inf"), scores), axis=1)
        if KEEP_TILES:
            at = (first.to(tl.int64) // BLOCK_N) * n + rows64
            tl.store(tile_best_ptr + at, tile_best, mask=row_ok)
            tl.store(tile_second_ptr + at, tile_second, mask=row_ok)
            tl.store(tile_labels_ptr + at, tile_label, mask=row_ok)
        lower = tile_best < best  # strict: of equal scores the earlier tile's lower index stays
        second = tl.where(lower, tl.minimum(best, tile_second), tl.minimum(second, tile_best))
        label = tl.where(lower, tile_label, label)
        best = tl.where(lower, tile_best, best)
    return best, second, label


@triton.jit
def certified_assign(x_ptr, x_norm_ptr, c_ptr, half_ptr, bound_max_ptr, labels_ptr, flagged_ptr, limit_ptr,
                     flagged_count_ptr, floor_ptr, cand_rows_ptr, cand_sizes_ptr, cand_index_ptr, cand_count_ptr,
                     tile_best_ptr, tile_second_ptr, tile_labels_ptr, n, k, eps, eta, margin, pack_unit, pack_floor,
                     DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                     KEEP_FLOOR: tl.constexpr, PACK_BITS: tl.constexpr, CANDIDATES: tl.constexpr,
                     COLUMNS: tl.constexpr, KEEP_TILES: tl.constexpr, SLOTS: tl.constexpr, TMA: tl.constexpr):
    block = tl.program_id(0)
    rows = block * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < n
    rows64 = rows.to(tl.int64)
    # Certified when second - best > margin E(x), E(x) = eps |x| C + eta H: the three numbers are
    # bound.py's (tensor_path.bound_arguments), so the kernel holds no threshold of its own.
    c_max = tl.load(bound_max_ptr)
    h_max = tl.load(bound_max_ptr + 1)
    x_norm = tl.load(x_norm_ptr + rows64, mask=row_ok, other=0.0)
    error = eps * x_norm * c_max + eta * h_max
    if PACK_BITS > 0:
        # Packed scores are off by bound.packing_error more: E grows by that much, which covers
        # it on both sides of the margin, in the limit and in the floor.
        error += pack_unit * (x_norm * c_max + h_max) + pack_floor
    x_whole = _rows(x_ptr, rows64, row_ok, 0, DIM, BLOCK_D)  # used only where BLOCK_D >= DIM
    if BLOCK_D >= DIM and PACK_BITS > 0:
        best, second, label, slot_best, slot_second = _best_two_packed(
            x_ptr, x_whole, rows64, row_ok, c_ptr, half_ptr, k, DIM, BLOCK_M, BLOCK_N, BLOCK_D, PACK_BITS, SLOTS, TMA)
        flag = row_ok & ~((second - best) > margin * error)
        if CANDIDATES > 0:
            listed = _list_candidates(slot_best, slot_second, best + margin * error, flag, rows, cand_rows_ptr,
                                      cand_sizes_ptr, cand_index_ptr, cand_count_ptr, SLOTS, PACK_BITS,
                                      CANDIDATES, COLUMNS)
        else:
            listed = flag
    elif BLOCK_D >= DIM:
        best, second, label = _best_two_by_slot(x_ptr, x_whole, rows64, row_ok, c_ptr, half_ptr, k,
                                                DIM, BLOCK_M, BLOCK_N, BLOCK_D)
        flag = row_ok & ~((second - best) > margin * error)
        listed = flag
    else:
        best, second, label = _best_two_by_row(x_ptr, x_whole, rows64, row_ok, c_ptr, half_ptr, k, n,
                                               tile_best_ptr, tile_second_ptr, tile_labels_ptr,
                                               DIM, BLOCK_M, BLOCK_N, BLOCK_D,
                                               KEEP_TILES)
        flag = row_ok & ~((second - best) > margin * error)
        listed = flag
    tl.store(labels_ptr + rows64, label, mask=row_ok)
    if KEEP_FLOOR:
        # A lower bound on the exact score of every centroid but the exact winner (yinyang's
        # bounds): a certified point's runner-up less E; a flagged one's best less E (its exact
        # winner is not known here, so the bound covers every centroid).
        tl.store(floor_ptr + rows64, tl.where(flag, best, second) - error, mask=row_ok)
    # What the candidates did not settle goes on the list that exact_assign scans.
    _append(flagged_count_ptr, listed, rows, flagged_ptr, best + margin * error, limit_ptr)
