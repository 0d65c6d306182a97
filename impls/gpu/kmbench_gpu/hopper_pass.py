"""The TF32 pass written for Hopper: where it applies, TensorPath.certify (tf32_pass.py) launches it instead of
Triton's certified_assign, with the same buffers and the same results (labels, the certificate,
the lists with their limits and candidates, the floor). Up to d = 128 it is `hopper_pass.cu`
(rows in registers); above, `hopper_wide.cu` (rows from shared memory, copied from a tiled copy
of them that load_rows lays out), where it lists candidates as the packed epilogue does instead
of Triton's tile records.

It compiles through NVRTC for sm_90a (wgmma and the bulk copies exist only there), which CuPy's
RawModule cannot ask for (it names the device's plain sm_90), so the module is built here and
loaded from its cubin."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from impls.gpu.cuda.sources import with_local_includes
from impls.gpu.kmbench_gpu import bound, tensor_settings
from kmbench.errors import ImplementationError

HERE = Path(__file__).resolve().parent
TILE_N = 128  # as in hopper_pass.cu
SLOTS = 32
# hopper_wide.cu, above REGISTER_ROWS_MAX: rows in tiles of WIDE_ROWS against WIDE_TILE_N centroids,
# a stage holding WIDE_CHUNK coordinates of both and the tile's half norms.
REGISTER_ROWS_MAX = 128
WIDE_TILE_N, WIDE_ROWS, WIDE_CHUNK = 256, 128, 32
# Consumer warpgroups of 64 rows each, beside a producer warpgroup: three where a row's coordinates
# leave registers for them (d <= THREE_GROUPS_UP_TO), so that two others' products hide each one's
# epilogue; two above (hopper_pass.cu's GROUPS). A module setting, so that bench/tensor_experiments.py
# hopper measures one against the other.
THREE_GROUPS_UP_TO = 64
# The consumer warpgroups take turns at the tensor cores (hopper_pass.cu's TAKE_TURNS): with two, 4% faster
# at 1e6 x 128 and 1e7 x 128, even at 1e6 x 64, in one process (NOTES.md). A module setting, so that
# bench/tensor_experiments.py hopper measures one against the other.
TAKE_TURNS = True
# Packed scores are unsigned ints, a 23-bit mantissa above the tile number (hopper_pass.cu's pack):
# tile numbers of up to 9 bits fit.
TILE_BITS_MAX = 9
SHARED_MAX = 227 * 1024  # dynamic shared memory one Hopper block may ask for
MAX_STAGES = 6
PASSES = ("hopper", "triton")


def chosen_pass() -> str:
    """KMBENCH_TENSOR_PASS: "hopper" (the default, where it applies) or "triton"."""
    chosen = os.environ.get("KMBENCH_TENSOR_PASS", "hopper")
    if chosen not in PASSES:
        raise ImplementationError(f"KMBENCH_TENSOR_PASS must be one of {', '.join(PASSES)}")
    return chosen


def applies(d: int, pack_bits: int, slots: int, kept_tiles: int, capability: int) -> bool:
    """Where a hand-written pass can stand in for certified_assign: the packed epilogue with 32
    slots, on compute capability 9.0 exactly (sm_90a code runs nowhere else); d a multiple of 16
    up to 128 (hopper_pass.cu: rows in registers, a thread's d / 4 coordinates of a row by 16-byte
    loads) or a multiple of 8 above (hopper_wide.cu: a k-step's 8 coordinates)."""
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


def tile_n(d: int) -> int:
    return WIDE_TILE_N if wide(d) else TILE_N


def tile_floats(d: int) -> int:
    """One centroid tile: its centroids, then their half norms."""
    return tile_n(d) * d + tile_n(d)


def stage_floats(d: int) -> int:
    """One stage of the ring: a centroid tile (hopper_pass.cu), or a chunk of the rows and of the
    centroids and the tile's half norms (hopper_wide.cu)."""
    return (WIDE_ROWS + WIDE_TILE_N) * WIDE_CHUNK + WIDE_TILE_N if wide(d) else tile_floats(d)


def stages(d: int) -> int:
    """Stages in flight: as many as the shared memory holds, up to MAX_STAGES."""
    return int(min(MAX_STAGES, (SHARED_MAX - 128) // (stage_floats(d) * 4)))


def groups(d: int) -> int:
    """Consumer warpgroups: hopper_wide.cu always runs two."""
    return 3 if d <= THREE_GROUPS_UP_TO and not wide(d) else 2


def source(d: int) -> Path:
    return HERE / ("hopper_wide.cu" if wide(d) else "hopper_pass.cu")


def build_options(d: int, turns: bool | None = None) -> list[str]:
    """The pass's compiler options for this d, NVRTC's and nvcc's alike (turns: TAKE_TURNS unless
    given; hopper_wide.cu's warpgroups share every chunk instead)."""
    if wide(d):
        return ["-arch=sm_90a", "-std=c++17", f"-DDIM={d}", f"-DSTAGES={stages(d)}"]
    turns = TAKE_TURNS if turns is None else turns
    return (["-arch=sm_90a", "-std=c++17", f"-DDIM={d}", f"-DSTAGES={stages(d)}", f"-DGROUPS={groups(d)}"]
            + (["-DTAKE_TURNS"] if turns else []))


def compile_module(d: int):
    """The pass for this d, through NVRTC, as a loaded CuPy module."""
    import cupy
    from cupy_backends.cuda.libs import nvrtc

    path = source(d)
    program = nvrtc.createProgram(with_local_includes(path), path.name, [], [])
    try:
        try:
            nvrtc.compileProgram(program, build_options(d))
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

    def __init__(self, d: int, k: int):
        import cupy
        from cupy.cuda import driver  # a loaded module's Function has no attribute setter of its own

        self.d, self.k, self.wide = d, k, wide(d)
        self.tile_count = -(-k // tile_n(d))
        self.stage_count = stages(d)
        self.groups = groups(d)
        self.rows, self.threads = 64 * self.groups, 32 * (4 * self.groups + 4)
        module = compile_module(d)
        self._tiles_kernel = module.get_function("centroid_tiles")
        self._assign = module.get_function("hopper_assign")
        self._row_tiles = module.get_function("row_tiles") if self.wide else None
        self.rows_tiled = None  # hopper_wide.cu's copy of the rows, laid out by load_rows
        self.shared_bytes = 128 + self.stage_count * stage_floats(d) * 4
        driver.funcSetAttribute(self._assign.ptr, getattr(driver, "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", 8),
                                self.shared_bytes)
        self.tiles = cupy.empty(self.tile_count * tile_floats(d), dtype=cupy.float32)
        self.sms = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["multiProcessorCount"]

    def describe(self) -> str:
        if self.wide:
            return (f"hopper_wide.cu (wgmma, rows from shared memory, {WIDE_ROWS} rows x {WIDE_TILE_N} centroids, "
                    f"{self.stage_count} stages of {WIDE_CHUNK} coordinates)")
        return (f"hopper_pass.cu (wgmma, rows in registers, {self.groups} consumer warpgroups, "
                f"{self.stage_count} stages of {TILE_N} centroids)")

    def load_rows(self, x_tf32, n: int) -> None:
        """hopper_wide.cu's copy of the first n rows of x_tf32 (TF32, n x d), in row tiles laid
        out for its bulk copies; once per run, or per chunk where the points stream. A no-op for
        hopper_pass.cu, which loads rows from x_tf32 itself."""
        import cupy

        if not self.wide:
            return
        row_tiles = -(-n // WIDE_ROWS)
        size = max(1, row_tiles) * WIDE_ROWS * self.d
        if self.rows_tiled is None or self.rows_tiled.size < size:
            self.rows_tiled = cupy.empty(size, dtype=cupy.float32)
        self._row_tiles((min(4 * self.sms, -(-size // 256)),), (256,),
                        (x_tf32, np.int64(n), np.int64(row_tiles), self.rows_tiled))

    def certify(self, path) -> None:
        """certified_assign's work for `path` (a TensorPath), on the current CuPy stream."""
        self._tiles_kernel((min(4 * self.sms, -(-self.tiles.size // 256)),), (256,),
                           (path.centroids_tf32, path.half_norms, path.bound_max, path.norm_max, np.int32(self.k),
                            np.int32(self.tile_count), self.tiles))
        row_tiles = -(-path.n // self.rows)
        blocks = max(1, min(self.sms, row_tiles))
        if path.n + blocks * self.rows >= 2**31:  # the kernel's row indices are ints, one row tile past n included
            raise ImplementationError(f"hopper_pass.cu indexes rows by int: n = {path.n:,} is too large")
        self._assign(
            (blocks,), (self.threads,),
            (self.rows_tiled if self.wide else path.x_tf32, path.x_norm, self.tiles, path.bound_max, path.labels,
             path.flagged, path.limits, path.flagged_count, path.floor, path.candidate_rows, path.candidate_sizes,
             path.candidate_index, path.candidate_count, path.norm_max, np.int64(path.n), np.int32(self.tile_count), np.float32(path.eps),
             np.float32(path.eta), np.float32(bound.underflow_floor(self.d)), np.float32(path.margin),
             np.int32(path.pack_bits), np.uint32(1 << path.pack_bits),
             np.int32(path.candidates), np.int32(bool(path.columns)), np.int32(bool(path.keep_floor))),
            shared_mem=self.shared_bytes)
