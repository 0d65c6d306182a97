"""The TF32 pass written for Hopper, in fp16 by default (HALF): where it applies,
TensorPath.certify (tf32_pass.py) launches it instead of Triton's certified_assign, with the same
buffers and the same results (labels, the certificate, the lists with their limits and
candidates, the floor). Up to d = 128 it is `hopper_pass.cu`
(rows in registers); above, `hopper_wide.cu` (rows from shared memory, copied from a tiled copy
of them that load_rows lays out), where it lists candidates as the packed epilogue does instead
of Triton's tile records.

It compiles through NVRTC for sm_90a (wgmma and the bulk copies exist only there), which CuPy's
RawModule cannot ask for (it names the device's plain sm_90), so the module is built here and
loaded from its cubin."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from impls.gpu.cuda.sources import with_local_includes
from impls.gpu.kmbench_gpu import bound, fp16_bound, tensor_settings
from kmbench.errors import ImplementationError

HERE = Path(__file__).resolve().parent
TILE_N = 128  # as in hopper_pass.cu
SLOTS = 32
# hopper_wide.cu, above REGISTER_ROWS_MAX: rows in tiles of WIDE_ROWS against WIDE_TILE_N centroids,
# a stage holding WIDE_CHUNK 4-byte words of each row and centroid (32 TF32 or 64 fp16 coordinates)
# and the tile's half norms.
REGISTER_ROWS_MAX = 128
WIDE_TILE_N, WIDE_ROWS, WIDE_CHUNK = 256, 128, 32
# Consumer warpgroups of 64 rows each, beside a producer warpgroup: three where a row's coordinates
# leave registers for them (TF32 d <= THREE_GROUPS_UP_TO; fp16, two coordinates a register, up to
# twice that), so that two others' products hide each one's epilogue; two above (hopper_pass.cu's
# GROUPS). A module setting, so that f08c955:bench/tensor_experiments.py hopper measures one against the other.
THREE_GROUPS_UP_TO = 64
# The consumer warpgroups take turns at the tensor cores (hopper_pass.cu's TAKE_TURNS): with two, 4% faster
# at 1e6 x 128 and 1e7 x 128, even at 1e6 x 64, in one process (NOTES.md). A module setting, so that
# f08c955:bench/tensor_experiments.py hopper measures one against the other.
TAKE_TURNS = True
# Packed scores are unsigned ints, a 23-bit mantissa above the tile number (hopper_pass.cu's pack):
# tile numbers of up to 9 bits fit.
TILE_BITS_MAX = 9
SHARED_MAX = 227 * 1024  # dynamic shared memory one Hopper block may ask for
MAX_STAGES = 6
PASSES = ("hopper", "triton")
# What the Hopper passes' products read (issue 50): "fp16" (rows and centroids scaled by sigma and
# rounded to fp16, twice TF32's rate) or "tf32".
INPUTS = ("fp16", "tf32")
# sigma's range, so that sigma^-2 and the bound's alpha / sigma and beta / sigma^2 are normal floats:
# data whose largest row norm is below 2^-46 or above 2^74 keep the TF32 pass.
HALF_SCALE_LOG2 = 60
FP16_LARGEST = 65504.0  # fp16's largest finite value


def chosen_pass() -> str:
    """KMBENCH_TENSOR_PASS: "hopper" (the default, where it applies) or "triton"."""
    chosen = os.environ.get("KMBENCH_TENSOR_PASS", "hopper")
    if chosen not in PASSES:
        raise ImplementationError(f"KMBENCH_TENSOR_PASS must be one of {', '.join(PASSES)}")
    return chosen


def chosen_input() -> str:
    """KMBENCH_TENSOR_INPUT: "fp16" (the default) or "tf32"."""
    chosen = os.environ.get("KMBENCH_TENSOR_INPUT", "fp16")
    if chosen not in INPUTS:
        raise ImplementationError(f"KMBENCH_TENSOR_INPUT must be one of {', '.join(INPUTS)}")
    return chosen


def half_applies(d: int, sigma: float) -> bool:
    """Where a Hopper pass runs in fp16: asked for, and sigma in range (hopper_wide.cu pads a d
    that is no multiple of 16 with zero coordinates)."""
    return chosen_input() == "fp16" and abs(math.log2(sigma)) <= HALF_SCALE_LOG2


def half_terms(d: int, sigma: float) -> tuple[float, float]:
    """fp16_bound's alpha / sigma and beta / sigma^2, as the kernel adds them, rounded up to float32."""
    _, _, alpha, beta = fp16_bound.error_terms16(d)
    up = lambda value: float(np.nextafter(np.float32(value), np.float32(np.inf)))  # noqa: E731
    return up(alpha / sigma), up(beta / sigma ** 2)


def applies(d: int, pack_bits: int, slots: int, kept_tiles: int, capability: int) -> bool:
    """Where a hand-written pass can stand in for certified_assign: the packed epilogue with 32
    slots, on compute capability 9.0 exactly (sm_90a code runs nowhere else); d a multiple of 16
    up to 128 (hopper_pass.cu: rows in registers, a thread's d / 4 coordinates of a row by 16-byte
    loads) or a multiple of 8 above (hopper_wide.cu: a TF32 k-step's 8 coordinates; in fp16 the
    tiles are padded to a k-step of 16)."""
    fits = d % 16 == 0 if d <= REGISTER_ROWS_MAX else d % 8 == 0
    return (chosen_pass() == "hopper" and capability == 90 and 0 < pack_bits <= TILE_BITS_MAX and slots == SLOTS
            and not kept_tiles and fits)


def wide(d: int) -> bool:
    return d > REGISTER_ROWS_MAX


def wide_tiling(d: int, k: int, capability: int) -> tuple | None:
    """The tiling TensorPath takes where hopper_wide.cu will run (None where it will not): rows
    of WIDE_ROWS against WIDE_TILE_N centroids folded into 32 slots, whole rows scored before the
    epilogue (BLOCK_D = d), so that tensor_settings packs the scores and lists candidates as it
    does for rows on chip instead of keeping tile records."""
    tiling = (WIDE_ROWS, WIDE_TILE_N, d, 8, stages(d), SLOTS)
    bits = bound.tile_bits(-(-k // SLOTS))
    # The packed epilogue (applies() checks the bits against TILE_BITS_MAX), or the tiling would
    # reach Triton's pass, whose rows would not fit on chip.
    packed = tensor_settings.EPILOGUE == "packed" and bits <= bound.PACK_MAX_BITS
    return tiling if wide(d) and packed and applies(d, bits, SLOTS, 0, capability) else None


def register_tiling(d: int, k: int, capability: int) -> tuple | None:
    """The tiling TensorPath takes where hopper_pass.cu will run with tile numbers of 9 bits
    (k from 8,193 to 16,384 in tiles of 32 slots): its packing keeps a score's whole mantissa above
    the tile number, where Triton's drops that many bits and holds at most bound.PACK_MAX_BITS, so
    default_tilings would take tiles of 64 and Triton's pass (1e6 x 128, k = 16,384: 17.3 ms an
    iteration). None elsewhere: default_tilings' choice stands."""
    bits = bound.tile_bits(-(-k // SLOTS))
    if wide(d) or tensor_settings.EPILOGUE != "packed" or bits <= bound.PACK_MAX_BITS:
        return None
    tiling = (128, SLOTS, 1 << max(4, (d - 1).bit_length()), 4, 3)
    return tiling if applies(d, bits, SLOTS, 0, capability) else None


def tile_n(d: int) -> int:
    return WIDE_TILE_N if wide(d) else TILE_N


def padded(d: int, half: bool = False) -> int:
    """The coordinates a pass's tiles hold: d, or in fp16 d up to a k-step of 16 (zeros)."""
    return -(-d // 16) * 16 if half else d


def tile_floats(d: int, half: bool = False) -> int:
    """One centroid tile in 4-byte words: its centroids (two fp16 coordinates a word in fp16),
    then their half norms."""
    return tile_n(d) * padded(d, half) // (2 if half else 1) + tile_n(d)


def stage_floats(d: int, half: bool = False) -> int:
    """One stage of the ring: a centroid tile (hopper_pass.cu), or a chunk of the rows and of the
    centroids and the tile's half norms (hopper_wide.cu)."""
    return (WIDE_ROWS + WIDE_TILE_N) * WIDE_CHUNK + WIDE_TILE_N if wide(d) else tile_floats(d, half)


def stages(d: int, half: bool = False) -> int:
    """Stages in flight: as many as the shared memory holds, up to MAX_STAGES."""
    return int(min(MAX_STAGES, (SHARED_MAX - 128) // (stage_floats(d, half) * 4)))


def wide_chunk(half: bool = False) -> int:
    """Coordinates of a row in one of hopper_wide.cu's stages: WIDE_CHUNK words, two fp16 a word."""
    return WIDE_CHUNK * (2 if half else 1)


def wide_turns(d: int, half: bool = False) -> bool:
    """Whether hopper_wide.cu's warpgroups take turns (TAKE_TURNS): where a tile's chunks fit its
    ring, so that the group a turn behind still finds them (fp16 up to d = 256, four chunks of 64).
    At 1e6 x 256, k = 4,096 the pass kept the tensor pipe 71% busy without turns (NOTES.md)."""
    chunks = -(-padded(d, half) // wide_chunk(half))
    return TAKE_TURNS and wide(d) and chunks <= stages(d, half)


def shared_bytes(d: int, half: bool = False) -> int:
    """hopper_assign's dynamic shared memory: the ring's barriers (128 bytes), its stages, and where
    hopper_wide.cu's warpgroups take turns each group's copy of a tile's h + M past the ring."""
    turn_norms = 2 * WIDE_TILE_N * 4 if wide_turns(d, half) else 0
    return 128 + stages(d, half) * stage_floats(d, half) * 4 + turn_norms


def groups(d: int, half: bool = False) -> int:
    """Consumer warpgroups: hopper_wide.cu always runs two."""
    return 3 if (d // 2 if half else d) <= THREE_GROUPS_UP_TO and not wide(d) else 2


def source(d: int) -> Path:
    return HERE / ("hopper_wide.cu" if wide(d) else "hopper_pass.cu")


def build_options(d: int, turns: bool | None = None, half: bool = False) -> list[str]:
    """The pass's compiler options for this d, NVRTC's and nvcc's alike (turns: TAKE_TURNS unless
    given, in hopper_wide.cu only where wide_turns says they fit; half: in fp16)."""
    if wide(d):
        turns = wide_turns(d, half) if turns is None else turns and wide_turns(d, half)
        return (["-arch=sm_90a", "-std=c++17", f"-DDIM={d}", f"-DSTAGES={stages(d)}", f"-DHALF={int(half)}"]
                + (["-DTAKE_TURNS"] if turns else []))
    turns = TAKE_TURNS if turns is None else turns
    return (["-arch=sm_90a", "-std=c++17", f"-DDIM={d}", f"-DSTAGES={stages(d, half)}", f"-DGROUPS={groups(d, half)}",
             f"-DHALF={int(half)}"] + (["-DTAKE_TURNS"] if turns else []))


def compile_module(d: int, half: bool = False):
    """The pass for this d, through NVRTC, as a loaded CuPy module."""
    import cupy
    from cupy_backends.cuda.libs import nvrtc

    path = source(d)
    program = nvrtc.createProgram(with_local_includes(path), path.name, [], [])
    try:
        try:
            nvrtc.compileProgram(program, build_options(d, half=half))
        except nvrtc.NVRTCError as error:
            raise ImplementationError(f"{path.name} did not compile: {nvrtc.getProgramLog(program)}") from error
        cubin = nvrtc.getCUBIN(program)
    finally:
        nvrtc.destroyProgram(program)
    module = cupy.cuda.function.Module()
    module.load(cubin)
    return module


class HopperPass:
    """The pass's module, its grid and the centroid tiles it reads, for one TensorPath."""

    def __init__(self, d: int, k: int, half: bool = False):
        import cupy
        from cupy.cuda import driver  # a loaded module's Function has no attribute setter of its own

        self.d, self.k, self.wide, self.half = d, k, wide(d), half
        self.tile_count = -(-k // tile_n(d))
        self.stage_count = stages(d, half)
        self.groups = groups(d, half)
        self.rows, self.threads = 64 * self.groups, 32 * (4 * self.groups + 4)
        module = compile_module(d, half)
        self._tiles_kernel = module.get_function("centroid_tiles")
        self._assign = module.get_function("hopper_assign")
        self._row_tiles = module.get_function("row_tiles") if self.wide else None
        self.rows_tiled = None  # hopper_wide.cu's copy of the rows, laid out by load_rows
        self.rows_half = None  # hopper_pass.cu's rows in fp16, by load_rows
        self._rows = None  # what hopper_assign reads: set by load_rows, with the sigma-derived arguments
        self._scaled = self._terms = ()
        self.turns = "-DTAKE_TURNS" in build_options(d, half=half)  # as compiled
        self.shared_bytes = shared_bytes(d, half)
        driver.funcSetAttribute(self._assign.ptr, getattr(driver, "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", 8),
                                self.shared_bytes)
        self.tiles = cupy.empty(self.tile_count * tile_floats(d, half), dtype=cupy.float32)
        self.sms = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["multiProcessorCount"]

    def describe(self) -> str:
        half = ", fp16 scaled by a power of two" if self.half else ""
        if self.wide:
            turns = ", 2 warpgroups taking turns" if self.turns else ""
            return (f"hopper_wide.cu (wgmma{half}, rows from shared memory, {WIDE_ROWS} rows x {WIDE_TILE_N} "
                    f"centroids, {self.stage_count} stages of {wide_chunk(self.half)} coordinates{turns})")
        return (f"hopper_pass.cu (wgmma{half}, rows in registers, "
                f"{self.groups} consumer warpgroups, {self.stage_count} stages of {TILE_N} centroids)")

    def load_rows(self, path, n: int) -> None:
        """The first n rows of `path` (a TensorPath) as the pass reads them, once per run, or per
        chunk where the points stream: for hopper_wide.cu a copy in row tiles laid out for its
        bulk copies (of x_tf32, or in fp16 of x times path.sigma); for hopper_pass.cu in fp16,
        x times sigma rounded to fp16 (CuPy rounds to nearest), in TF32 nothing (it reads x_tf32)."""
        import cupy

        if not path.x.flags.c_contiguous:  # the kernels index rows as n x d, row after row
            raise ImplementationError("the tensor path's points must be C-contiguous")
        # What sigma gives the kernels, once per sigma (it changes only with the rows, here), not
        # in every certify: in fp16 the rows' and centroid tiles' scale; the products scaled back
        # by sigma^-2 (exact), the bound's fp16 terms, and the largest centroid norm whose
        # coordinates fit fp16 once scaled (past it, settle certifies nothing). In TF32: 1, 0, 0, inf.
        if self.half:
            self._scaled = (np.float32(path.sigma),)
            self._terms = (np.float32(path.sigma ** -2.0), *map(np.float32, half_terms(self.d, path.sigma)),
                           np.float32(FP16_LARGEST / path.sigma))
        else:
            self._terms = (np.float32(1), np.float32(0), np.float32(0), np.float32(np.inf))
        if self.wide:
            row_tiles = -(-n // WIDE_ROWS)
            words = max(1, row_tiles) * WIDE_ROWS * padded(self.d, self.half) // (2 if self.half else 1)
            if self.rows_tiled is None or self.rows_tiled.size < words:
                self.rows_tiled = cupy.empty(words, dtype=cupy.float32)
            self._row_tiles((min(4 * self.sms, -(-words // 256)),), (256,),
                            (path.x if self.half else path.x_tf32, np.int64(n), np.int64(row_tiles),
                             self.rows_tiled) + self._scaled)
        elif self.half:
            if self.rows_half is None or self.rows_half.shape[0] < n:
                self.rows_half = cupy.empty((n, self.d), dtype=cupy.float16)
            step = max(1, (1 << 24) // self.d)
            for first in range(0, n, step):
                last = min(n, first + step)
                self.rows_half[first:last] = (path.x[first:last] * self._scaled[0]).astype(cupy.float16)
        self._rows = self.rows_tiled if self.wide else self.rows_half if self.half else path.x_tf32

    def certify(self, path) -> None:
        """certified_assign's work for `path` (a TensorPath), on the current CuPy stream."""
        if self._rows is None:  # a pass built beside a path's own must lay out its rows first
            raise ImplementationError("HopperPass.certify before load_rows: the pass has no rows to read")
        # In fp16 the float32 centroids, scaled and rounded as the tiles are laid out.
        tile_source = path.centroids if self.half else path.centroids_tf32
        self._tiles_kernel((min(4 * self.sms, -(-self.tiles.size // 256)),), (256,),
                           (tile_source, path.half_norms, path.bound_max, path.norm_max, np.int32(self.k),
                            np.int32(self.tile_count), self.tiles) + self._scaled)
        row_tiles = -(-path.n // self.rows)
        blocks = max(1, min(self.sms, row_tiles))
        if path.n + blocks * self.rows >= 2**31:  # the kernel's row indices are ints, one row tile past n included
            raise ImplementationError(f"{source(self.d).name} indexes rows by int: n = {path.n:,} is too large")
        self._assign(
            (blocks,), (self.threads,),
            (self._rows, path.x_norm, self.tiles,
             path.bound_max, path.labels,
             path.flagged, path.limits, path.flagged_count, path.floor, path.candidate_rows, path.candidate_sizes,
             path.candidate_index, path.candidate_count, path.norm_max, np.int64(path.n), np.int32(self.tile_count), np.float32(path.eps),
             np.float32(path.eta), np.float32(bound.underflow_floor(self.d)), np.float32(path.margin),
             np.int32(path.pack_bits), np.uint32(1 << path.pack_bits),
             np.int32(path.candidates), np.int32(bool(path.columns)), np.int32(bool(path.keep_floor))) + self._terms,
            shared_mem=self.shared_bytes)
