"""Triton kernels of kmbench-gpu's tensor-path re-check (imported only where Triton is installed):
the points the TF32 pass (tensor_kernels.certified_assign) listed, scored again. Launched by
recheck.py (TensorPath.recheck_flagged).

tiered_assign (an exact re-check, not the default: NOTES.md): the listed points first in tf32x3
with a bound of its own (bound.tf32x3_terms); exact_assign then takes what it cannot settle.

exact_assign: the listed points that recheck.cu does not take, ordered by TF32 winner (update.cu), in FP32: IEEE
products (FMA units), or for experiments error-compensated TF32 ("tf32x3", not FP32-grade:
see NOTES.md), the lowest index winning equal scores, as in the oracle. Only centroids whose
TF32 score is within the point's limit can be its exact winner (the winner w's exact score is
at most the TF32 best + E, so its TF32 score is at most the limit), so each tile is first
scored in TF32 and the FP32 products run only for tiles that hold a candidate of some listed
point. Its programs loop over the list, whose length they read from the device, so the
launch can sit in a CUDA graph. Equal FP32 scores go to the lowest index in the harness's
numbering (`order_ptr`), since the path may keep its centroids in another order.
"""

from __future__ import annotations

import triton
import triton.language as tl

# The pieces the TF32 pass's kernels and these share: rows loaded by chunks of BLOCK_D, a
# tile's scores, and appending rows to a list on the device.
from impls.gpu.kmbench_gpu.tensor_kernels import _append, _rows, _scores


@triton.jit
def _listed_block(block, count, flagged_ptr, limit_ptr, x_ptr, x_tf32_ptr,
                  DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    """Block `block` of a list of `count` points (the re-checks' lists): which places are live,
    the rows and their limits, and the rows' FP32 and TF32 coordinates, loaded once."""
    places = block * BLOCK_M + tl.arange(0, BLOCK_M)
    live = places < count
    rows = tl.load(flagged_ptr + places, mask=live, other=0)
    limit = tl.load(limit_ptr + places, mask=live, other=float("-inf"))
    rows64 = rows.to(tl.int64)
    return (live, rows, rows64, limit, _rows(x_ptr, rows64, live, 0, DIM, BLOCK_D),
            _rows(x_tf32_ptr, rows64, live, 0, DIM, BLOCK_D))


@triton.jit
def _tile_candidates(first, k, x_tf32_ptr, x_tf32_whole, rows64, live, limit, c_tf32_ptr, half_ptr,
                     DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    """The tile of centroids from `first`: their columns, which exist, and which are a listed
    point's candidates (TF32 score within its limit)."""
    cols = first + tl.arange(0, BLOCK_N)
    col_ok = cols < k
    rough = _scores(x_tf32_ptr, x_tf32_whole, rows64, live, c_tf32_ptr, half_ptr, cols, col_ok,
                    DIM, BLOCK_M, BLOCK_N, BLOCK_D, "tf32")
    return cols, col_ok, rough <= limit[:, None]


@triton.jit
def exact_assign(x_ptr, x_tf32_ptr, c_ptr, c_tf32_ptr, half_ptr, order_ptr, labels_ptr, flagged_ptr, limit_ptr,
                 flagged_count_ptr, k,
                 DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                 PRECISION: tl.constexpr):
    count = tl.load(flagged_count_ptr)
    for block in range(tl.program_id(0), tl.cdiv(count, BLOCK_M), tl.num_programs(0)):
        live, rows, rows64, limit, x_whole, x_tf32_whole = _listed_block(
            block, count, flagged_ptr, limit_ptr, x_ptr, x_tf32_ptr, DIM, BLOCK_M, BLOCK_D)
        best = tl.full((BLOCK_M,), float("inf"), dtype=tl.float32)
        label = tl.zeros((BLOCK_M,), dtype=tl.int32)
        label_order = tl.full((BLOCK_M,), k, dtype=tl.int32)  # the winner's index in the harness's numbering
        for first in range(0, k, BLOCK_N):
            cols, col_ok, candidate = _tile_candidates(first, k, x_tf32_ptr, x_tf32_whole, rows64, live, limit,
                                                       c_tf32_ptr, half_ptr, DIM, BLOCK_M, BLOCK_N, BLOCK_D)
            if tl.max(candidate.to(tl.int32)) > 0:  # FP32 products only for tiles in play
                scores = _scores(x_ptr, x_whole, rows64, live, c_ptr, half_ptr, cols, col_ok,
                                 DIM, BLOCK_M, BLOCK_N, BLOCK_D, PRECISION)
                scores = tl.where(candidate, scores, float("inf"))
                tile_best = tl.min(scores, axis=1)
                # Of equal scores the lowest index in the harness's numbering wins, as in the oracle,
                # whatever order the centroids are kept in.
                order = tl.load(order_ptr + cols, mask=col_ok, other=k)
                equal = scores == tile_best[:, None]
                tile_order = tl.min(tl.where(equal, order[None, :], k), axis=1)
                tile_label = tl.min(tl.where(equal & (order[None, :] == tile_order[:, None]), cols[None, :], k), axis=1)
                lower = (tile_best < best) | ((tile_best == best) & (tile_order < label_order))
                label = tl.where(lower, tile_label, label)
                label_order = tl.where(lower, tile_order, label_order)
                best = tl.where(lower, tile_best, best)
        tl.store(labels_ptr + rows64, label, mask=live)


@triton.jit
def tiered_assign(x_ptr, x_tf32_ptr, x_norm_ptr, c_ptr, c_tf32_ptr, half_ptr, bound_max_ptr, labels_ptr,
                  flagged_ptr, limit_ptr, flagged_count_ptr, left_ptr, left_limit_ptr, left_count_ptr, k,
                  eps, eta, margin,
                  DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    """The listed points' candidates scored in error-compensated TF32 (tf32x3), keeping the
    best and second score: a point whose margin passes margin E3(x) (E3 = eps |x| C + eta H,
    bound.tf32x3_terms) takes its winner, which is then the exact winner among its candidates,
    and so the exact winner. The others go, with their limits, to a second list that
    exact_assign settles in IEEE FP32. Candidates as in exact_assign: TF32 score within the limit."""
    count = tl.load(flagged_count_ptr)
    c_max = tl.load(bound_max_ptr)
    h_max = tl.load(bound_max_ptr + 1)
    for block in range(tl.program_id(0), tl.cdiv(count, BLOCK_M), tl.num_programs(0)):
        live, rows, rows64, limit, x_whole, x_tf32_whole = _listed_block(
            block, count, flagged_ptr, limit_ptr, x_ptr, x_tf32_ptr, DIM, BLOCK_M, BLOCK_D)
        best = tl.full((BLOCK_M,), float("inf"), dtype=tl.float32)
        second = tl.full((BLOCK_M,), float("inf"), dtype=tl.float32)
        label = tl.zeros((BLOCK_M,), dtype=tl.int32)
        for first in range(0, k, BLOCK_N):
            cols, col_ok, candidate = _tile_candidates(first, k, x_tf32_ptr, x_tf32_whole, rows64, live, limit,
                                                       c_tf32_ptr, half_ptr, DIM, BLOCK_M, BLOCK_N, BLOCK_D)
            if tl.max(candidate.to(tl.int32)) > 0:
                scores = _scores(x_ptr, x_whole, rows64, live, c_ptr, half_ptr, cols, col_ok,
                                 DIM, BLOCK_M, BLOCK_N, BLOCK_D, "tf32x3")
                scores = tl.where(candidate, scores, float("inf"))
                tile_best = tl.min(scores, axis=1)
                tile_label = tl.min(tl.where(scores == tile_best[:, None], cols[None, :], k), axis=1)
                tile_second = tl.min(tl.where(cols[None, :] == tile_label[:, None], float("inf"), scores), axis=1)
                # Equal bests leave a zero margin (second = best): never decided here.
                lower = tile_best < best
                second = tl.where(lower, tl.minimum(best, tile_second), tl.minimum(second, tile_best))
                label = tl.where(lower, tile_label, label)
                best = tl.where(lower, tile_best, best)
        x_norm = tl.load(x_norm_ptr + rows64, mask=live, other=0.0)
        error = eps * x_norm * c_max + eta * h_max
        sure = live & ((second - best) > margin * error)
        tl.store(labels_ptr + rows64, label, mask=sure)
        _append(left_count_ptr, live & ~sure, rows, left_ptr, limit, left_limit_ptr)
