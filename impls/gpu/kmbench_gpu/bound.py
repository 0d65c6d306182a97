"""The error bound that lets kmbench-gpu's tensor-core path take a TF32 argmin as exact.

The tensor path scores every point against every centroid with TF32 products (tensor cores)
and FP32 accumulation, keeping each point's best and second-best score. TF32 keeps 10 of
FP32's 23 mantissa bits, so a score can be wrong by far more than FP32 rounding; this module
bounds by how much, for one point against one centroid, and from that decides which points
need an exact FP32 re-check. Pure NumPy: the CPU tests check it, the GPU kernel reads its
numbers.

The score is s_j = h_j - x . c_j with h_j = |c_j|^2 / 2 (smallest s_j = nearest centroid).
Computed: s^_j = fl(h^_j - D^_j), D^_j the tensor-core dot product. For every j,

    |s^_j - s_j| <= E(x) = eps(d) |x| C + 2^-23 H,      C = max_j |c_j|, H = max_j h_j,

- inputs rounded to TF32 by us, before the tensor cores see them (the data once, the
  centroids each iteration): |x~_i - x_i| <= u |x_i| with u = 2^-11, half of TF32's unit in the
  last place. The hardware may then truncate, which leaves a TF32 value as it is. So
  |x~_i c~_i - x_i c_i| <= (2u + u^2) |x_i| |c_i|;
- the products are exact in FP32 (11 x 11 significant bits), their sum is accumulated in FP32
  by the tensor core, whose additions may truncate: at most d additions of at most 2^-22
  relative error of the running magnitude, sum_i |x~_i c~_i| <= (1 + u)^2 |x| |c| (Cauchy-Schwarz);
- h^_j is the float64 half norm of the float32 centroid rounded once to FP32 (2^-24 h_j), and
  the subtraction rounds once (2^-24 |s^_j| <= 2^-24 (H + |x| C) to first order).
The margins are folded into eps(d) with a small factor of safety, SAFETY, for the FP32
arithmetic that evaluates the threshold itself.

Certification: let j1 have the smallest computed score and s^(2) be the second smallest. If
s^(2) - s^_j1 > 2 E(x), then for every j != j1, s_j >= s^_j - E > s^_j1 + E >= s_j1: j1 is the
strictly nearest centroid in exact arithmetic, which is what the float64 oracle computes on
the same float32 inputs. Every other point is re-checked in IEEE FP32, against its
candidates only: with w the exact winner, s_w <= s_j1 <= s^_j1 + E, so s^_w <= s^_j1 + 2 E.
A centroid whose TF32 score is above that limit cannot be the winner (s_j >= s^_j - E > s_w).
Where the pass packs tile numbers into its scores (each moved by at most P, packing_error), it
uses E + P for E, so the packed score of w is at most the packed best + 2 (E + P). The re-check
scores in FP32 only the centroids within the limit: from the candidates the pass listed, from
every tile's best two the pass kept, or, for the rest, in the tiles that hold one
(listed_candidates and recheck.cu, or recheck_kernels.exact_assign).
"""

from __future__ import annotations

import numpy as np

TF32_UNIT = 2.0 ** -11  # relative error of an FP32 value rounded to TF32's 10 mantissa bits
ACCUMULATE_UNIT = 2.0 ** -22  # per tensor-core FP32 addition, truncation allowed (2 ulp)
HALF_NORM_UNIT = 2.0 ** -23  # h rounded once to FP32, and the subtraction's rounding
SAFETY = 1.0 + 2.0 ** -8  # for the FP32 arithmetic that evaluates the threshold
TF32_MASK = np.uint32(0xFFFFE000)  # keeps sign, exponent and the top 10 mantissa bits
TF32_HALF = np.uint32(0x1000)  # half a TF32 unit in the last place: rounding, not truncation
# E's multiple in both decisions (one E on each side of a comparison): certified where
# s^(2) - s^_j1 > MARGIN E, a candidate where s^_j <= s^_j1 + MARGIN E.
MARGIN = 2.0


def dot_eps(d: int) -> float:
    """eps(d): |D^ - D| <= eps(d) |x| |c| for a TF32 dot product of length d."""
    u = TF32_UNIT
    return SAFETY * (2 * u + u * u + d * ACCUMULATE_UNIT * (1 + u) ** 2 + HALF_NORM_UNIT)


def error_terms(d: int) -> tuple[float, float]:
    """(eps, eta) with E(x) = eps |x| C + eta H: what score_error adds up, and the two numbers
    the tensor path's kernel is given to add up the same sum (tensor_path.bound_arguments)."""
    return dot_eps(d), SAFETY * HALF_NORM_UNIT


# The tiered re-check scores in tf32x3, as Triton lowers it: each operand split into a TF32 big
# part and the FP32 rest (a - big, exact), then small x big + big x small + big x big on the
# tensor cores, accumulated in FP32; small x small is dropped.
SPLIT_UNIT = 2.0 ** -10  # |a - big| <= this |a| whether big is rounded or truncated to TF32
SMALL_UNIT = 2.0 ** -10  # the hardware may truncate a small part to TF32: relative error


def tf32x3_eps(d: int) -> float:
    """eps3(d): |D3 - D| <= eps3(d) |x| |c| for a tf32x3 dot product of length d. Per product
    x_i c_i: the dropped small x small (SPLIT_UNIT^2), each small part truncated by the tensor
    core (SMALL_UNIT SPLIT_UNIT, twice); then 3 d FP32 additions of at most ACCUMULATE_UNIT of the
    running magnitude, which stays under sum |x_i c_i| (1 + SPLIT_UNIT)^2 (Cauchy-Schwarz)."""
    products = SPLIT_UNIT ** 2 + 2 * SMALL_UNIT * SPLIT_UNIT * (1 + SPLIT_UNIT)
    return SAFETY * (products + 3 * d * ACCUMULATE_UNIT * (1 + SPLIT_UNIT) ** 2 + HALF_NORM_UNIT)


def tf32x3_terms(d: int) -> tuple[float, float]:
    """(eps3, eta3) with E3(x) = eps3 |x| C + eta3 H: the tiered re-check's bound, in the form
    and with the margin of error_terms (its kernel, tiered_assign, is given these two numbers)."""
    return tf32x3_eps(d), SAFETY * HALF_NORM_UNIT


def tf32x3_scores(x: np.ndarray, centroids: np.ndarray, truncate_big: bool = False) -> np.ndarray:
    """What the tiered re-check computes (an emulation, for tests): the split products of
    tf32x3, the small parts truncated to TF32, added one at a time in FP32 (small x big, big x
    small, then big x big, Triton's order), and h - D in FP32."""
    x32, c32 = np.asarray(x, np.float32), np.asarray(centroids, np.float32)

    def split(values):
        big = _truncate_tf32(values) if truncate_big else to_tf32(values)
        return big, _truncate_tf32((values - big).astype(np.float32))

    xb, xs = split(x32)
    cb, cs = split(c32)
    dots = np.zeros((len(x32), len(c32)), dtype=np.float32)
    for a, b in ((xs, cb), (xb, cs), (xb, cb)):
        for i in range(x32.shape[1]):
            dots = (dots + (a[:, None, i].astype(np.float64) * b[None, :, i]).astype(np.float32)).astype(np.float32)
    half = (0.5 * (c32.astype(np.float64) ** 2).sum(axis=1)).astype(np.float32)
    return (half[None, :] - dots).astype(np.float32)


def _truncate_tf32(values) -> np.ndarray:
    return (np.ascontiguousarray(values, dtype=np.float32).view(np.uint32) & TF32_MASK).view(np.float32)


# The TF32 pass may keep, per (row, column slot), scores whose lowest mantissa bits are replaced
# by their tile's number (certified_assign's packed epilogue: one min and one max per score
# instead of a compare and three selects). Only mantissa bits change, so the exponent does not:
# a normal score moves by at most (2^bits - 1) units in its last place, under
# 2^(bits-23) (1 - 2^-bits) |s^|, and a subnormal one by under PACKING_FLOOR. The computed score
# obeys |s^| <= (1 + eps(d)) (|x| C + H), and (1 - 2^-bits)(1 + eps(d)) <= SAFETY for d up to
# about 12,000, so packing_unit(tiles) (|x| C + H) + PACKING_FLOOR bounds the move. The packed
# values are compared as floats: subnormals must not be flushed to zero (Triton's min.f32 and
# max.f32 carry no .ftz today), or a score of 0 would lose its tile number.
PACK_MAX_BITS = 8  # up to 256 tiles: 2^-15 relative, well under eps(d) (about 2^-10)
PACKING_FLOOR = 1e-35  # covers scores at or near zero, where the low bits are a subnormal's


# hopper_pass.cu packs otherwise, into unsigned ints, so that the packing is an IMAD, off the ALU
# pipe (NOTES.md, "Scores packed as integers"). Every score is offset by M = 1.5 x 2^E, where
# 2^(E-2) is above reach = |x|max C + H (with REACH_SPARE for the float evaluation and the TF32
# operands' norms): y = fl(fl(h + M) - D^) lies in [1.25, 1.75] 2^E, one binade, where a float's 23
# mantissa bits order it, and they sit above the tile number. Two roundings of at most half an
# ulp of M (2^(E-24)) move y - M from h - D^, so OFFSET_UNIT M (3 ulp) bounds the move; the pass
# adds it, and underflow_floor(d), to each row's E in place of packing_error.
REACH_SPARE = 1.0625
OFFSET_EXPONENT_MAX = 251  # hopper_pass.cu's UNBOUNDED_OFFSET - 3
OFFSET_UNIT = 2.0 ** -22
MANTISSA = np.uint32(0x007FFFFF)
EXPONENT = np.uint32(0xFF800000)


def underflow_floor(d: int) -> float:
    """What no relative bound covers: products and partial sums below the smallest normal float,
    which the tensor cores may flush or mishandle. Each of the d products and d additions then moves
    the dot product by less than that float. On the H100, data of scale 3e-21 (every product
    subnormal) had rows certified with wrong labels without this floor (a review of the offset
    packing); packing_error's PACKING_FLOOR had covered them by accident."""
    return 2.0 * (d + 1) * float(np.finfo(np.float32).tiny)


def score_offset(norm_max: float, c_max: float, h_max: float) -> np.float32:
    """M for points of largest norm norm_max and centroids with bound maxima C and H."""
    reach = (np.float32(norm_max) * np.float32(c_max) + np.float32(h_max)) * np.float32(REACH_SPARE)
    # reach < 2^(exponent - 126); capped where M would pass the largest float (unpackable data,
    # whose rows the pass then leaves uncertain with an unbounded error)
    exponent = min(int(np.float32(reach).view(np.uint32)) >> 23 & 0xFF, OFFSET_EXPONENT_MAX)
    return np.uint32((exponent + 3) << 23 | 1 << 22).view(np.float32)


def offset_pack(offset_half, dots, tile: int, bits: int) -> np.ndarray:
    """The packed scores of dots (FP32 D^) against centroids whose h + M is offset_half."""
    y = (np.asarray(offset_half, np.float32) - np.asarray(dots, np.float32)).astype(np.float32)
    return (y.view(np.uint32) & MANTISSA) << np.uint32(bits) | np.uint32(tile)


def offset_value(packed, bits: int, offset: np.float32) -> np.ndarray:
    """y - M of packed scores (exact: y and M are floats of one binade)."""
    y = (np.float32(offset).view(np.uint32) & EXPONENT) | (np.asarray(packed, np.uint32) >> np.uint32(bits))
    return (y.view(np.float32) - np.float32(offset)).astype(np.float32)


def offset_within(limit, bits: int, offset: np.float32) -> np.ndarray:
    """The largest packed score whose value is at most limit: limit + M rounded down (a float
    y is at most the real limit + M where it is at most that), every tile number of its mantissa;
    below the binade's largest float, which absent centroids take."""
    limit = np.asarray(limit, np.float32)
    reach = (limit.astype(np.float64) + np.float64(offset)).astype(np.float32)
    reach = np.where(reach.astype(np.float64) > limit.astype(np.float64) + np.float64(offset),
                     np.nextafter(reach, np.float32(-np.inf)), reach)
    top = (np.float32(offset).view(np.uint32) | (MANTISSA - np.uint32(1))).view(np.float32)
    reach = np.minimum(reach, top).astype(np.float32)
    return (reach.view(np.uint32) & MANTISSA) << np.uint32(bits) | np.uint32((1 << bits) - 1)


# Packed scores start from, and absent centroids score, a finite 3e38 (tensor_kernels'
# PACKED_ABSENT: inf with a tile number in its low bits would be a NaN). Real scores must stay
# well below it: data whose scores could reach PACKABLE_LIMIT are not packed (packable).
PACKABLE_LIMIT = 1e37


def packable(largest_norm: float) -> bool:
    """Whether scores may be packed for centred data whose largest point norm is largest_norm:
    the centroids are means of the points (the starts are points), so |c| <= that norm and every
    score is at most (|x| C + H)(1 + eps) <= 1.5 largest_norm^2 SAFETY, far below 3e38."""
    return 1.5 * SAFETY * float(largest_norm) ** 2 < PACKABLE_LIMIT


def tile_bits(tiles: int) -> int:
    """Bits that hold a tile number from 0 to tiles - 1 (at least one)."""
    return max(1, (int(tiles) - 1).bit_length())


def packing_unit(tiles: int) -> float:
    """The relative change of a score whose low tile_bits(tiles) mantissa bits are replaced."""
    return SAFETY * 2.0 ** (tile_bits(tiles) - 23)


def packing_error(tiles: int, x_norm, c_max: float, h_max: float):
    """The bound on |packed - s^| for points of norm x_norm. certified_assign adds it to E(x):
    then MARGIN (E + it) covers both packed scores of a margin, and the limit and floor stay
    sound (tests/test_tensor_bound.py checks all three on packed near-ties)."""
    return packing_unit(tiles) * (np.asarray(x_norm, dtype=np.float64) * c_max + h_max) + PACKING_FLOOR


def pack(scores: np.ndarray, tile: int, tiles: int) -> np.ndarray:
    """FP32 scores with their lowest tile_bits(tiles) bits replaced by `tile` (the kernel's packing)."""
    mask = np.uint32((1 << tile_bits(tiles)) - 1)
    bits = np.ascontiguousarray(scores, dtype=np.float32).view(np.uint32)
    return ((bits & ~mask) | np.uint32(tile)).view(np.float32)


def score_error(d: int, x_norm, c_max: float, h_max: float):
    """E(x): the bound on |s^_j - s_j| for every centroid j, for points of norm x_norm."""
    eps, eta = error_terms(d)
    return eps * np.asarray(x_norm, dtype=np.float64) * c_max + eta * h_max


def certified(best: np.ndarray, second: np.ndarray, error) -> np.ndarray:
    """True where the computed winner is provably the exact one: margin > 2 E(x)."""
    return (np.asarray(second, np.float64) - np.asarray(best, np.float64)) > MARGIN * np.asarray(error)


def floor(best, second, error) -> np.ndarray:
    """A lower bound on the exact score of every centroid but the exact winner (what
    certified_assign keeps for yinyang-gpu's bounds): where certified, s_j >= s^(2) - E for
    every j != j1 = w; elsewhere the winner is not known yet, and s_j >= s^_j - E >= s^_j1 - E
    for every j."""
    best, second = np.asarray(best, np.float64), np.asarray(second, np.float64)
    return np.where(certified(best, second, error), second, best) - np.asarray(error, np.float64)


def candidates(scores, best, error) -> np.ndarray:
    """Which centroids can still be a point's exact winner: TF32 score <= best + 2 E(x)."""
    limit = np.asarray(best, np.float64) + MARGIN * np.asarray(error, np.float64)
    return np.asarray(scores, np.float64) <= np.reshape(limit, (-1, 1))


def norm_up(vectors: np.ndarray) -> np.ndarray:
    """Row norms as float32 rounded up, so that the bound never uses a norm too small."""
    return round_up(np.sqrt((np.asarray(vectors, np.float64) ** 2).sum(axis=-1)))


def round_up(values, xp=np):
    """float64 values to the float32 at or above each (NumPy or CuPy arrays, by xp)."""
    rounded = values.astype(xp.float32)
    return xp.where(rounded.astype(xp.float64) < values, xp.nextafter(rounded, xp.float32(np.inf)), rounded)


# ---------------------------------------------------------------- an emulation, for tests

def to_tf32(values, xp=np):
    """FP32 values rounded to the nearest TF32 value (ties away from zero), as the tensor path
    rounds its inputs (NumPy or CuPy arrays, by xp); update.cu's finish rounds the same way."""
    bits = xp.ascontiguousarray(values, dtype=xp.float32).view(xp.uint32)
    return ((bits + TF32_HALF) & TF32_MASK).view(xp.float32)


def tf32_scores(x: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """What the tensor path computes: s^ = fl(h^ - D^), D^ the FP32 sum of the exact products of
    the TF32-rounded inputs, added one at a time in FP32 (an order the hardware may use)."""
    x32, c32 = np.asarray(x, np.float32), np.asarray(centroids, np.float32)
    products = to_tf32(x32)[:, None, :].astype(np.float64) * to_tf32(c32)[None, :, :].astype(np.float64)
    dots = np.zeros(products.shape[:2], dtype=np.float32)
    for i in range(products.shape[2]):  # exact products rounded to FP32, summed in FP32
        dots = (dots + products[:, :, i].astype(np.float32)).astype(np.float32)
    half = (0.5 * (c32.astype(np.float64) ** 2).sum(axis=1)).astype(np.float32)
    return (half[None, :] - dots).astype(np.float32)


def exact_scores(x: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """s = |c|^2 / 2 - x . c in float64 on the float32 inputs (exact to far below the bound)."""
    x64, c64 = np.asarray(x, np.float32).astype(np.float64), np.asarray(centroids, np.float32).astype(np.float64)
    return 0.5 * (c64 ** 2).sum(axis=1)[None, :] - x64 @ c64.T


def best_two(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: the lowest index of the smallest score, that score, the second smallest."""
    winner = np.argmin(scores, axis=1)  # the first of equal minima, as the kernel keeps it
    best = scores[np.arange(len(scores)), winner]
    rest = scores.copy()
    rest[np.arange(len(scores)), winner] = np.inf
    return winner, best, rest.min(axis=1)


def packed_slots(scores: np.ndarray, block_n: int) -> tuple[np.ndarray, np.ndarray, int]:
    """What certified_assign's packed epilogue keeps per (row, column slot) across the tiles
    (tensor_kernels._best_two_packed): the best and second packed scores, and the tile count."""
    rows, k = scores.shape
    tiles = -(-k // block_n)
    absent = np.float32(3.0e38)
    best = np.full((rows, block_n), absent, dtype=np.float32)
    second = best.copy()
    for tile in range(tiles):
        part = np.full((rows, block_n), absent, dtype=np.float32)
        width = min(block_n, k - tile * block_n)
        part[:, :width] = scores[:, tile * block_n:tile * block_n + width]
        packed = pack(part, tile, tiles)
        second = np.minimum(second, np.maximum(best, packed))
        best = np.minimum(best, packed)
    return best, second, tiles


def packed_best_two(scores: np.ndarray, block_n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What certified_assign's packed epilogue keeps (tensor_kernels._best_two_packed): per row,
    the winner decoded from its packed score and slot, and the best and second packed scores."""
    best, second, tiles = packed_slots(scores, block_n)
    rows = len(best)
    top = best.min(axis=1)
    slot = np.argmax(best == top[:, None], axis=1)  # the lowest slot of equal bests
    tile_of = top.view(np.uint32) & np.uint32((1 << tile_bits(tiles)) - 1)
    others = best.copy()
    others[np.arange(rows), slot] = second[np.arange(rows), slot]
    return tile_of.astype(np.int64) * block_n + slot, top, others.min(axis=1)


def listed_candidates(slot_best: np.ndarray, slot_second: np.ndarray, tiles: int, limit, most: int, k: int,
                      columns: bool = True) -> list:
    """What recheck.cu scores for a row from what certified_assign lists for it
    (tensor_kernels._list_candidates): per slot whose packed best is within the row's limit,
    that best's centroid, or, where the slot's runner-up is within the limit too (a third of the
    slot may be, unseen), every centroid of the slot's column; without `columns`, None for such
    a row. None for a row with more than `most` such slots (left to exact_assign's scan). With limit = packed best + MARGIN E, E
    covering the packing, the exact winner has a packed score within it, so it is scored."""
    limit = np.reshape(np.asarray(limit, np.float64), (-1, 1))
    near = slot_best.astype(np.float64) <= limit
    crowded = slot_second.astype(np.float64) <= limit
    block_n = slot_best.shape[1]
    tile_of = (slot_best.view(np.uint32) & np.uint32((1 << tile_bits(tiles)) - 1)).astype(np.int64)
    listed = []
    for row in range(len(slot_best)):
        if near[row].sum() > most or (not columns and (near[row] & crowded[row]).any()):
            listed.append(None)
            continue
        scored = set()
        for slot in np.flatnonzero(near[row]):
            scored |= set(range(slot, k, block_n)) if crowded[row, slot] else {int(tile_of[row, slot] * block_n + slot)}
        listed.append(sorted(scored))
    return listed
