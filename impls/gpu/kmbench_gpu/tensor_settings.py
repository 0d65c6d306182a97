"""The tensor-core path's settings, decided on the host in plain Python before anything runs
(so the CPU tests check them): whether the path can run here, the Triton kernels' tilings and
their overrides, the re-check's precision, the bound's arguments the TF32 pass receives, the
most points it counts and the GPU memory it holds. tensor_path.py has the buffers, and each
stage's launches a module of its own (tf32_pass.py, recheck.py, update.py, renumber.py).
"""

from __future__ import annotations

import os

from impls.gpu.kmbench_gpu import bound
from kmbench.errors import ImplementationError

# Up to here a block's rows stay on chip (BLOCK_D = d padded). At 256 the tf32x3 re-check
# asked for 320 KB of shared memory (it keeps split copies of its operands): over the H100's 227.
WHOLE_MAX_DIM = 128


def default_tilings(d: int, k: int = 0, packable: bool = True) -> tuple[tuple, tuple]:
    """(BLOCK_M, BLOCK_N, BLOCK_D, num_warps, num_stages[, slots]) of certified_assign and
    (BLOCK_M, BLOCK_N, BLOCK_D, num_warps, num_stages) of exact_assign for d and k; BLOCK_D >= d
    keeps the rows on chip. With the packed epilogue (pack_bits) the pass runs four warps on 32
    centroids a tile, 64 where k needs fewer tiles to fit the packing's bits: at 1e6 x 64 and
    1e6 x 128 that took it from 1.15 and 1.51 ms (eight warps, slots) to 0.68 and 1.19 ms
    (`f08c955:bench/tensor_experiments.py epilogue`, NOTES.md). Up to d = 64 its tiles are 128 centroids
    folded into 32 slots: 0.75 against 0.87 ms at 1e6 x 64 (with the copy engine's loads), while
    at d = 128 they were slower (1.39 against 1.28 ms). The re-check streams its rows in chunks
    of 32 at every d: it holds two copies of them (FP32 and TF32), and on chip they cost it 3.6x
    at 1e6 x 128 (`... rechecks`)."""
    pad = 1 << max(4, (d - 1).bit_length())
    exact = (64, 128, 32, 4, 3)
    if pad > WHOLE_MAX_DIM:
        return (128, 256, 32, 8, 3), exact
    folded = ((128, 128, pad, 4, 2, 32),) if pad <= 64 else ()
    packed_tilings = (folded + ((128, 32, pad, 4, 3), (128, 64, pad, 4, 3))) if packable else ()
    for packed in packed_tilings:
        if pack_bits(d, k, packed):
            return packed, exact
    return (128, 64, pad, 8, 3), exact  # the slot epilogue (data too large to pack: bound.packable)


EXACT_PROGRAMS_PER_SM = 4
RECHECKS = ("ieee", "tiered", "tf32x3")
# "ieee": IEEE FP32 for every listed point. "tiered": tf32x3 with a bound of its own first
# (bound.tf32x3_terms), IEEE FP32 for what it leaves: exact too, but at 1e6 x 128, k = 1024 it
# took 0.88 ms against IEEE's 0.90 (NOTES.md), so it is not the default. "tf32x3" alone is 2x
# faster than IEEE there, but not FP32-grade: at 12,007 x 200, k = 773 it ended a mismatch where
# IEEE and cuBLAS FP32 are ok. Both stay options for experiments.
RECHECK = "ieee"
MAX_POINTS = 2**31 - 1  # labels, counts and the order are int32


def bound_arguments(d: int) -> tuple[float, float, float]:
    """certified_assign's (eps, eta, margin) for rows of d: E(x) = eps |x| C + eta H, and E's
    multiple in the certified margin and the re-check's limit, all of them bound.py's (the kernel
    holds no threshold of its own). Plain Python, so the CPU tests check what the kernel gets."""
    eps, eta = bound.error_terms(d)
    return float(eps), float(eta), float(bound.MARGIN)


# How the TF32 pass keeps each slot's best two where rows stay on chip: "packed" (tile number in
# the scores' low bits, bound.pack) or "slots" (a compare and three selects per score). A
# module setting, so an experiment can measure one against the other in one process.
EPILOGUE = "packed"


def slots(tiling: tuple) -> int:
    """The column slots of the TF32 pass's packed epilogue: the tiling's sixth number where it
    has one (BLOCK_N's columns then fold into them, tensor_kernels._best_two_packed), else
    BLOCK_N. The packing's tile numbers, the candidates' indices and the re-check's columns count
    in tiles of this many centroids."""
    return tiling[5] if len(tiling) > 5 else tiling[1]


def pack_bits(d: int, k: int, tiling: tuple) -> int:
    """The low mantissa bits certified_assign packs tile numbers into (0: it does not): only
    where rows stay on chip (BLOCK_D >= d), EPILOGUE is "packed" and the tiles of slots(tiling)
    centroids fit in bound.PACK_MAX_BITS bits."""
    block_d = tiling[2]
    bits = bound.tile_bits(-(-k // slots(tiling)))
    return bits if EPILOGUE == "packed" and block_d >= d and bits <= bound.PACK_MAX_BITS else 0


# What the TF32 pass leaves for recheck.cu, which re-checks an uncertain point against its
# candidates only (one FP32 dot product each) instead of exact_assign's scan of every tile.
# Where scores are packed (rows on chip), up to CANDIDATES slots per point, listed in the pass.
# Where rows stream, every point's best two and winner of every tile, up to KEPT_TILES_MAX
# tiles (12 bytes per point and tile). KMBENCH_TENSOR_CANDIDATES=0 turns both off (every
# uncertain point is scanned), for experiments, and so does a re-check precision other than
# IEEE (KMBENCH_TENSOR_RECHECK: those are the scan's precisions, so the scan takes every point).
CANDIDATES = 8
KEPT_TILES_MAX = 64


def recheck_lanes(d: int, vec: int) -> int:
    """Lanes candidate_recheck gives one candidate (recheck.cu): a power of two from 8 to 32, so
    that each lane adds about four loads of `vec` coordinates and a warp scores 32 / lanes
    candidates at once (8 lanes at d = 64 and 128, 32 from d = 257 with 16-byte loads)."""
    lanes = 8
    while lanes < 32 and lanes * vec * 4 < d:
        lanes *= 2
    return lanes


# A slot whose runner-up is in play too is scored whole (a column of the tiles) up to this many
# tiles; past it, its row is scanned. At 1e6 x 128, k = 1,024 (32 tiles) columns took the
# re-check from 0.21 to 0.12 ms; at 1e7 x 128, k = 4,096 (128 tiles) from 1.2 to 2.0 ms
# (NOTES.md).
COLUMN_TILES_MAX = 32


def _lists_on() -> bool:
    raw = os.environ.get("KMBENCH_TENSOR_CANDIDATES", "")
    if raw not in ("", "0", "1"):
        raise ImplementationError("KMBENCH_TENSOR_CANDIDATES must be 0 (off) or 1 (on)")
    return raw != "0" and os.environ.get("KMBENCH_TENSOR_RECHECK", RECHECK) == "ieee"


def copy_engine(d: int, bits: int, capability: int) -> bool:
    """Whether the TF32 pass takes its centroid tiles by the copy engine (a TMA descriptor):
    where it packs (the packed loop is the one that reads one), the rows are 16-byte aligned
    (d a multiple of 4) and the GPU has one (compute capability 9.0 on). At 1e6 x 64, 1e6 x 128
    and 1e7 x 128 the pass took 0.75 / 1.28 / 41.4 ms against 0.87 / 1.31 / 43.5 ms with loads
    from pointers (NOTES.md). KMBENCH_TENSOR_TMA=0 turns it off, for experiments."""
    raw = os.environ.get("KMBENCH_TENSOR_TMA", "")
    if raw not in ("", "0", "1"):
        raise ImplementationError("KMBENCH_TENSOR_TMA must be 0 (off) or 1 (on)")
    return raw != "0" and bits > 0 and d % 4 == 0 and capability >= 90


def candidates_kept(bits: int) -> int:
    """Candidates per point the TF32 pass lists (0: none) where it packs `bits` bits."""
    return CANDIDATES if bits > 0 and _lists_on() else 0


def crowded_columns(k: int, tiling: tuple) -> bool:
    """Whether a slot in play with its runner-up is listed as its whole column (else its row is
    scanned): where the tiles are few, and above WHOLE_MAX_DIM (hopper_wide.cu's tiling, the one
    that packs there). There the scan took few rows (196 at 300k x 408, k = 5,000; 976 at 1e6 x
    768, k = 4,096) in 0.79 and 0.73 ms: a scan's block walks every centroid tile over d
    coordinates, whatever the rows' count (NOTES.md, "Rows from shared memory")."""
    return -(-k // slots(tiling)) <= COLUMN_TILES_MAX or tiling[2] > WHOLE_MAX_DIM


def kept_tiles(d: int, k: int, tiling: tuple) -> int:
    """Tiles whose best two and winner the TF32 pass keeps for every point (0: none): where rows
    stream (BLOCK_D < d) and there are at most KEPT_TILES_MAX of them."""
    tiles = -(-k // tiling[1])
    return tiles if tiling[2] < d and tiles <= KEPT_TILES_MAX and _lists_on() else 0


def tiered_arguments(d: int) -> tuple[float, float, float]:
    """tiered_assign's (eps3, eta3, margin): its bound's terms and E's multiple, bound.py's."""
    eps3, eta3 = bound.tf32x3_terms(d)
    return float(eps3), float(eta3), float(bound.MARGIN)


def tensor_status() -> tuple[bool, str]:
    """Whether the tensor path can run here: Triton and PyTorch's CUDA (Triton's launcher)."""
    try:
        import torch
        import triton  # noqa: F401
    except ImportError:
        return False, "Triton is not installed (it comes with PyTorch on Linux)"
    if not torch.cuda.is_available():
        return False, "PyTorch sees no CUDA GPU"
    return True, ""


def tiling_from_env(name: str, default: tuple, folds: bool = False) -> tuple:
    """A tiling override for experiments: KMBENCH_TENSOR_TILING="128,64,32,8,3", or where the
    pass folds (folds) with the packed epilogue's slots sixth ("128,128,128,8,2,32")."""
    raw = os.environ.get(name)
    if not raw:
        return default
    values = tuple(int(part) for part in raw.split(","))
    if len(values) not in ((5, 6) if folds else (5,)):
        raise ImplementationError(f"{name} takes five integers, BLOCK_M,BLOCK_N,BLOCK_D,warps,stages"
                                  + (", and the slots as a sixth where they fold" if folds else ""))
    fold = slots(values)
    if fold <= 0 or values[1] % fold or fold & (fold - 1):
        raise ImplementationError(f"{name}: the slots must be a power of two that divides BLOCK_N")
    return values


def device_bytes(n: int, d: int, k: int) -> int:
    """GPU memory the path holds: the points, their norms, labels, previous labels, order, the
    flag list and its limits (twice: as listed and sorted), the candidate list (rows, sizes and
    CANDIDATES per point), the tiles' records where rows stream, the k-sized buffers, and above
    WHOLE_MAX_DIM the rows' tiled copy that hopper_wide.cu reads, at or below it their fp16 copy that
    hopper_pass.cu reads in fp16 (either counted on any GPU: at most too much)."""
    records = 12 * kept_tiles(d, k, default_tilings(d, k)[0])
    copy = n * d * 4 if d > WHOLE_MAX_DIM else n * d * 2
    return n * d * 4 * 2 + copy + n * (4 * (8 + 2 + CANDIDATES) + records) + k * d * (8 + 8 + 4 + 4) + k * 16
