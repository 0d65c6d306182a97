"""The TF32 pass written for Hopper (`hopper_pass.cu`): where it applies, TensorPath.certify
launches it instead of Triton's certified_assign, with the same buffers and the same results
(labels, the certificate, the lists with their limits and candidates, the floor).

It compiles through NVRTC for sm_90a (wgmma and the bulk copies exist only there), which CuPy's
RawModule cannot ask for (it names the device's plain sm_90), so the module is built here and
loaded from its cubin."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from impls.gpu.kmbench_gpu import bound
from kmbench.errors import ImplementationError

HERE = Path(__file__).resolve().parent
TILE_N = 128  # as in hopper_pass.cu
SLOTS = 32
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
    """Where the hand-written pass can stand in for certified_assign: the packed epilogue with
    rows on chip and 32 slots, d a multiple of 16 up to 128 (rows in registers, a thread's d / 4
    coordinates of a row by 16-byte loads), on compute capability 9.0 exactly (sm_90a code runs nowhere else)."""
    return (chosen_pass() == "hopper" and capability == 90 and 0 < pack_bits <= TILE_BITS_MAX and slots == SLOTS
            and not kept_tiles and d % 16 == 0 and d <= 128)


def tile_floats(d: int) -> int:
    """One centroid tile: TILE_N centroids, then their half norms."""
    return TILE_N * d + TILE_N


def stages(d: int) -> int:
    """Centroid tiles in flight: as many as the shared memory holds, up to MAX_STAGES."""
    return int(min(MAX_STAGES, (SHARED_MAX - 128) // (tile_floats(d) * 4)))


def groups(d: int) -> int:
    return 3 if d <= THREE_GROUPS_UP_TO else 2


def build_options(d: int, turns: bool | None = None) -> list[str]:
    """hopper_pass.cu's compiler options for this d, NVRTC's and nvcc's alike (turns: TAKE_TURNS unless given)."""
    turns = TAKE_TURNS if turns is None else turns
    return (["-arch=sm_90a", "-std=c++17", f"-DDIM={d}", f"-DSTAGES={stages(d)}", f"-DGROUPS={groups(d)}"]
            + (["-DTAKE_TURNS"] if turns else []))


def compile_module(d: int):
    """hopper_pass.cu for this d, through NVRTC, as a loaded CuPy module."""
    import cupy
    from cupy_backends.cuda.libs import nvrtc

    program = nvrtc.createProgram((HERE / "hopper_pass.cu").read_text(), "hopper_pass.cu", [], [])
    try:
        try:
            nvrtc.compileProgram(program, build_options(d))
        except nvrtc.NVRTCError as error:
            raise ImplementationError(f"hopper_pass.cu did not compile: {nvrtc.getProgramLog(program)}") from error
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

        self.d, self.k = d, k
        self.tile_count = -(-k // TILE_N)
        self.stage_count = stages(d)
        self.groups = groups(d)
        self.rows, self.threads = 64 * self.groups, 32 * (4 * self.groups + 4)
        module = compile_module(d)
        self._tiles_kernel = module.get_function("centroid_tiles")
        self._assign = module.get_function("hopper_assign")
        self.shared_bytes = 128 + self.stage_count * tile_floats(d) * 4
        driver.funcSetAttribute(self._assign.ptr, getattr(driver, "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", 8),
                                self.shared_bytes)
        self.tiles = cupy.empty(self.tile_count * tile_floats(d), dtype=cupy.float32)
        self.sms = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["multiProcessorCount"]

    def describe(self) -> str:
        return (f"hopper_pass.cu (wgmma, rows in registers, {self.groups} consumer warpgroups, "
                f"{self.stage_count} stages of {TILE_N} centroids)")

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
            (path.x_tf32, path.x_norm, self.tiles, path.bound_max, path.labels, path.flagged, path.limits,
             path.flagged_count, path.floor, path.candidate_rows, path.candidate_sizes, path.candidate_index,
             path.candidate_count, path.norm_max, np.int64(path.n), np.int32(self.tile_count), np.float32(path.eps),
             np.float32(path.eta), np.float32(bound.underflow_floor(self.d)), np.float32(path.margin),
             np.int32(path.pack_bits), np.uint32(1 << path.pack_bits),
             np.int32(path.candidates), np.int32(bool(path.columns)), np.int32(bool(path.keep_floor))),
            shared_mem=self.shared_bytes)
