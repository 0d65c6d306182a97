"""kmbench-gpu's tensor-core path for d > 32: exact Lloyd iterations with TF32 (or, on Hopper,
fp16) tensor cores.

One iteration is up to fifteen launches on one stream (fewer where recheck.cu settles every
uncertain point), so the whole run captures into a CUDA graph:
  certified_assign (Triton)  TF32 scores (data and centroids rounded to TF32 by us), best and
                             second-best per point, the certified margin of bound.py;
                             uncertain points listed with their candidates (rows on chip), or
                             listed while every tile's best two are kept (rows streamed);
                             on Hopper, d a multiple of 16 up to 128: hopper_pass.cu instead
                             (wgmma, rows in registers; by default in fp16, rows and centroids
                             scaled by a power of two, fp16_bound.py's bound), with the same
                             results (the bound aside); d a multiple
                             of 8 above: hopper_wide.cu (rows from shared memory, fp16 as well),
                             which lists candidates where Triton keeps every tile's best two;
  candidate_recheck or       those points in FP32 against their candidates only: the centroids
  tile_recheck (recheck.cu)  whose TF32 score is within the point's limit;
  flagged_histogram, _scan,  what has no candidate list (too many), or a whole tile to score,
  _scatter                   ordered by TF32 winner (update.cu);
  exact_assign (Triton)      those points again, in FP32 against the centroid tiles that
                             hold a candidate; RECHECK: IEEE products, or error-compensated TF32;
  count_moved, choose_sums   the rows whose label changed; few (update.MOVED_MOST) or many?
  (moved_sums.cu)            (only where the sums stay on this GPU: no shard, not streamed)
  histogram, scan, scatter   the points ordered by cluster (update.cu), where many moved;
  segment_sums               float64 sums over runs of sorted points, one atomic per run;
  moved_sums                 where few moved: the last sums, plus the rows that came in, minus
                             those that left; the previous labels kept either way;
  finish                     new centroids, their float32 copy, half norms, the bound's maxima.
Before the first iteration of each run (inside its timed region), order_by_neighbourhood
renumbers the centroids so that near ones share re-check tiles (not where every tile's best two
are kept: strategies/tensor.py); centroids_in_order undoes it.
The Triton kernels take the CuPy buffers through DLPack (the same memory) and launch on the
CuPy stream in use, the capture stream included. What the path is set up with (tilings, the
re-check's precision, the bound's arguments, its limits and memory) is tensor_settings.py's.

Each stage's launches are a module of their own, whose class TensorPath is built from:
tf32_pass.py (certify), recheck.py (recheck_flagged), update.py (update, and a streamed
iteration's accumulate and finish_streamed), renumber.py (order_by_neighbourhood,
crowded_fraction, centroids_in_order). This module has the buffers they share, the kernels
they launch, the run's first centroids, the chunks a streamed iteration loads, and the
iteration itself (assign, then update).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from impls.gpu.kmbench_gpu import bound, hopper_pass
from impls.gpu.kmbench_gpu.fp16_bound import fp16_scale
# GROUP, CHUNK and SHARED_HISTOGRAM_K lived here before their stages had modules: still importable
# from here. The settings experiments change (update.SCATTER, recheck.WHOLE_MOST) are not: set
# here, they would change nothing.
from impls.gpu.kmbench_gpu.recheck import RECHECK_BLOCKS_PER_SM, Recheck
from impls.gpu.kmbench_gpu.renumber import GROUP, Renumbering  # noqa: F401
# WHOLE_MAX_DIM, device_bytes and tensor_status are imported from here too (tests, scripts): kept so.
from impls.gpu.kmbench_gpu.tensor_settings import (EXACT_PROGRAMS_PER_SM, MAX_POINTS, RECHECK, RECHECKS,  # noqa: F401
                                        WHOLE_MAX_DIM, bound_arguments, candidates_kept, copy_engine, crowded_columns,
                                        default_tilings, device_bytes, kept_tiles, pack_bits, recheck_lanes, slots,
                                        tensor_status, tiered_arguments, tiling_from_env)
from impls.gpu.kmbench_gpu.tf32_pass import TF32Pass, centroid_descriptor
from impls.gpu.kmbench_gpu.update import (CHUNK, SCATTER_BLOCKS_PER_SM, SCATTER_THREADS,  # noqa: F401
                                          SHARED_HISTOGRAM_K, Update, sums_setting)
from kmbench.errors import ImplementationError

HERE = Path(__file__).resolve().parent


class TensorPath(TF32Pass, Recheck, Update, Renumbering):
    """The buffers and launches of one problem; `x` is the centred float32 data on the GPU. The
    stages' methods come from the classes it is built from, one module each."""

    def __init__(self, x, k: int, changed, keep_floor: bool = False):
        """keep_floor: also keep, per point, a lower bound on the exact score of every centroid
        but its winner (`floor`; yinyang-gpu's bounds start from it)."""
        import cupy
        import torch

        from impls.gpu.kmbench_gpu import recheck_kernels, tensor_kernels

        n, d = x.shape
        if n > MAX_POINTS:
            raise ImplementationError(f"the tensor path counts points in int32: n must be <= {MAX_POINTS}")
        self.n, self.d, self.k = n, d, k
        self.x = x
        self.x_tf32 = _chunked_rows(x, lambda rows: bound.to_tf32(rows, cupy), cupy.float32)
        self.x_norm = bound.round_up(_chunked_rows(x, _norms, cupy.float64), cupy)
        self.norm_max = cupy.zeros(1, dtype=cupy.float32)  # the largest point norm, for hopper_pass.cu's offset
        if n:
            self.norm_max[...] = self.x_norm.max()
        self.packable = bound.packable(float(self.norm_max[0]))  # scores far below 3e38
        self.labels = cupy.zeros(n, dtype=cupy.int32)
        self.previous = cupy.full(n, -1, dtype=cupy.int32)
        self.order = cupy.empty(n, dtype=cupy.int32)
        self.flagged = cupy.empty(n, dtype=cupy.int32)
        self.limits = cupy.empty(n, dtype=cupy.float32)
        self.flagged_sorted = cupy.empty(n, dtype=cupy.int32)
        self.limits_sorted = cupy.empty(n, dtype=cupy.float32)
        self.flagged_counts = cupy.zeros(k, dtype=cupy.int32)
        self.flagged_starts = cupy.empty(k, dtype=cupy.int32)
        self.flagged_cursor = cupy.empty(k, dtype=cupy.int32)
        # The two lists' lengths, side by side so that update.cu's scan adds both to the run's
        # total: [0] the points exact_assign scans, [1] those listed with their candidates.
        self.listed_counts = cupy.zeros(2, dtype=cupy.uint32)
        self.flagged_count, self.candidate_count = self.listed_counts[0:1], self.listed_counts[1:2]
        self.left_count = cupy.zeros(1, dtype=cupy.uint32)  # what the tiered re-check leaves to IEEE
        self.flagged_total = cupy.zeros(1, dtype=cupy.uint64)
        self.changed = changed
        self.counts = cupy.zeros(k, dtype=cupy.int32)
        self.totals = cupy.zeros(k, dtype=cupy.int32)  # a streamed iteration's counts over its chunks
        self.starts = cupy.empty(k, dtype=cupy.int32)
        self.cursor = cupy.empty(k, dtype=cupy.int32)
        self.sums = cupy.zeros((k, d), dtype=cupy.float64)
        # The update's sums from the moved rows (update.py, moved_sums.cu): the count of moved rows,
        # the GPU's choice for this iteration (1: from them), a flag that stays 0 for the sort
        # alone, and the steps that took them.
        self.sums_from_moved = sums_setting() == "moved"
        self.moved = cupy.zeros(1, dtype=cupy.uint64)
        self.from_moved = cupy.zeros(1, dtype=cupy.int32)
        self.never_moved = cupy.zeros(1, dtype=cupy.int32)
        self.moved_steps = cupy.zeros(1, dtype=cupy.uint64)
        self.centroids64 = cupy.empty((k, d), dtype=cupy.float64)
        self.centroids = cupy.empty((k, d), dtype=cupy.float32)
        self.centroids_tf32 = cupy.empty((k, d), dtype=cupy.float32)
        self.half_norms = cupy.empty(k, dtype=cupy.float32)
        self.bound_max = cupy.zeros(2, dtype=cupy.float32)
        self.floor = cupy.empty(n if keep_floor else 1, dtype=cupy.float32)
        self.order_of = cupy.arange(k, dtype=cupy.int32)  # the harness's index of each centroid slot
        self.keep_floor = keep_floor
        self.eps, self.eta, self.margin = bound_arguments(d)
        tiling, exact_tiling = default_tilings(d, k, self.packable)
        self.tiling = tiling_from_env("KMBENCH_TENSOR_TILING", tiling, folds=True)
        capability = int(cupy.cuda.Device().compute_capability)
        # Above d = 128 on Hopper, hopper_wide.cu's tiling (KMBENCH_TENSOR_TILING is Triton's: it
        # takes KMBENCH_TENSOR_PASS=triton there): scores packed into 32 slots and candidates
        # listed, as where rows stay on chip, instead of Triton's tile records.
        wide_tiling = hopper_pass.wide_tiling(d, k, capability) if self.packable else None
        # Up to d = 128, where only hopper_pass.cu's packing holds k's tile numbers (9 bits), its tiling.
        register_tiling = hopper_pass.register_tiling(d, k, capability) if self.packable else None
        self.tiling = wide_tiling or register_tiling or self.tiling
        self.slots = slots(self.tiling)  # the packed epilogue's slots: candidates are numbered in tiles of them
        self.pack_bits = ((bound.tile_bits(-(-k // self.slots)) if register_tiling else pack_bits(d, k, self.tiling))
                          if self.packable else 0)
        self.candidates = candidates_kept(self.pack_bits)
        self.columns = crowded_columns(k, self.tiling)  # crowded slots listed whole, or scanned
        listed = n if self.candidates else 1
        self.candidate_rows = cupy.empty(listed, dtype=cupy.int32)
        self.candidate_sizes = cupy.empty(listed, dtype=cupy.int32)
        self.candidate_index = cupy.empty(listed * max(1, self.candidates), dtype=cupy.int32)
        self.kept_tiles = kept_tiles(d, k, self.tiling)
        records = max(1, n * self.kept_tiles)
        self.tile_best = cupy.empty(records, dtype=cupy.float32)
        self.tile_second = cupy.empty(records, dtype=cupy.float32)
        self.tile_labels = cupy.empty(records, dtype=cupy.int32)
        # Points tile_recheck passes on to exact_assign (more than recheck.WHOLE_MOST tiles to score whole).
        self.passed = cupy.empty(n if self.kept_tiles else 1, dtype=cupy.int32)
        self.passed_limits = cupy.empty(n if self.kept_tiles else 1, dtype=cupy.float32)
        self.passed_count = cupy.zeros(1, dtype=cupy.uint32)
        rechecks = cupy.RawModule(code=(HERE / "recheck.cu").read_text(), options=("-std=c++17",))
        self._candidate_recheck = rechecks.get_function("candidate_recheck")
        # 16-byte loads where rows and centroids allow them (cupy's buffers are 256-byte aligned).
        vec4 = d % 4 == 0 and x.data.ptr % 16 == 0
        self._recheck_split = (np.int32(recheck_lanes(d, 4 if vec4 else 1)), np.int32(vec4))
        self._tile_recheck = rechecks.get_function("tile_recheck")
        renumber = cupy.RawModule(code=(HERE / "renumber.cu").read_text(), options=("-std=c++17",))
        self._renumber = {name: renumber.get_function(name) for name in ("neighbourhood_keys", "gather_centroids")}
        module = cupy.RawModule(code=(HERE / "update.cu").read_text(), options=("-std=c++17",))
        self._update = {name: module.get_function(name)
                        for name in ("histogram", "scan", "chunk_scan", "scatter", "block_scatter", "segment_sums", "finish",
                                     "flagged_histogram",
                                     "flagged_scan", "flagged_scatter")}
        moved = cupy.RawModule(code=(HERE / "moved_sums.cu").read_text(), options=("-std=c++17",))
        self._moved = {name: moved.get_function(name) for name in ("count_moved", "choose_sums", "moved_sums")}
        self._torch = {name: torch.from_dlpack(getattr(self, name)) for name in
                       ("x", "x_tf32", "x_norm", "centroids", "centroids_tf32", "half_norms", "bound_max",
                        "labels", "flagged", "limits", "flagged_sorted", "limits_sorted", "flagged_count", "floor", "order_of",
                        "left_count", "candidate_rows", "candidate_sizes", "candidate_index", "candidate_count",
                        "tile_best", "tile_second", "tile_labels", "passed_count")}
        self._certified, self._exact = tensor_kernels.certified_assign, recheck_kernels.exact_assign
        # The hand-written Hopper pass stands in for certified_assign where it applies (hopper_pass.py).
        # Its bulk copies go through the same copy engine (TMA), but it lays out its own tiles, so
        # Triton's descriptor is built only for Triton's pass.
        # In fp16 where it may (hopper_pass.py): the rows scaled by sigma into fp16's range, rounded
        # to fp16; sigma from the largest row norm (of each chunk, where the points stream), so that
        # every centroid whose norm is no larger fits too (hopper_pass.cu's c_limit).
        hopper = hopper_pass.applies(d, self.pack_bits, self.slots, self.kept_tiles, capability)
        self.sigma = fp16_scale(float(self.norm_max[0]))
        half = hopper and hopper_pass.half_applies(d, self.sigma)
        self._hopper = hopper_pass.HopperPass(d, k, half) if hopper else None
        self.pass_input = "fp16" if half else "tf32"  # what the pass's products read
        if self._hopper is not None:
            self._hopper.load_rows(self, n)
        self.tf32_pass = self._hopper.describe() if self._hopper is not None else "certified_assign (Triton)"
        by_copy_engine = copy_engine(d, self.pack_bits, capability)
        self._centroid_tiles = (centroid_descriptor(self._torch["centroids_tf32"], self.tiling)
                                if by_copy_engine and self._hopper is None else None)
        self.centroid_loads = "copy engine (TMA)" if by_copy_engine or self._hopper is not None else "pointers"
        self._tiered = recheck_kernels.tiered_assign
        self.tiered = tiered_arguments(d)
        self.exact_tiling = tiling_from_env("KMBENCH_TENSOR_EXACT_TILING", exact_tiling)
        self.recheck = os.environ.get("KMBENCH_TENSOR_RECHECK", RECHECK)
        if self.recheck not in RECHECKS:
            raise ImplementationError(f"KMBENCH_TENSOR_RECHECK must be one of {', '.join(RECHECKS)}")
        sms = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["multiProcessorCount"]
        self._exact_programs = sms * EXACT_PROGRAMS_PER_SM
        self._stream_blocks = max(1, min((n + 255) // 256, sms * 8))
        # candidate_recheck's grid in one wave (its __launch_bounds__): each warp walks a fixed
        # share of the list, so blocks of a second wave would start their shares late.
        self._recheck_blocks = max(1, min((n + 255) // 256, sms * RECHECK_BLOCKS_PER_SM))
        self._scatter_blocks = max(1, min((n + SCATTER_THREADS - 1) // SCATTER_THREADS, sms * SCATTER_BLOCKS_PER_SM))

    # ------------------------------------------------------------------ state

    def start(self, start64: np.ndarray) -> None:
        """The run's first centroids (centred, float64) and what the first assignment reads."""
        import cupy

        self.centroids64.set(start64)
        self.load_centroids(cupy.asarray(start64.astype(np.float32)))
        self.order_of[...] = cupy.arange(self.k, dtype=cupy.int32)
        self.previous.fill(-1)
        self.listed_counts.fill(0)
        self.flagged_total.fill(0)
        self.flagged_counts.fill(0)
        self.counts.fill(0)
        self.totals.fill(0)
        self.sums.fill(0)
        self.from_moved.fill(0)
        self.moved_steps.fill(0)

    def load_centroids(self, single) -> None:
        """What the assignment reads of the float32 centroids `single` (on the GPU): their TF32
        copy, half norms, and the largest norm and half norm for the bound (rounded up)."""
        import cupy

        wide = single.astype(cupy.float64)
        squares = (wide * wide).sum(axis=1)
        half = (0.5 * squares).astype(cupy.float32)
        self.centroids[...] = single
        self.centroids_tf32[...] = bound.to_tf32(single, cupy)
        self.half_norms[...] = half
        self.bound_max[0] = bound.round_up(cupy.sqrt(squares), cupy).max()
        self.bound_max[1] = half.max()

    # ------------------------------------------------------------------ one iteration

    def assign(self) -> None:
        """Labels for every point from the current centroids (certified, then re-checked)."""
        self.certify()
        self.recheck_flagged()

    def assign_alone(self) -> None:
        """assign() outside an iteration (yinyang-gpu): the re-checked points are counted and the
        list cleared here, as update's scan does inside one."""
        self.assign()
        self.flagged_total += self.listed_counts.sum(dtype=self.flagged_total.dtype)
        self.listed_counts.fill(0)

    # A streamed iteration (stream.py) sees the points a chunk at a time in the same buffers:
    # load_chunk, assign and accumulate per chunk, then finish_streamed once.

    def load_chunk(self, raw, shift) -> None:
        """A chunk of the points as stored (m x d float32 on the GPU) centred by `shift` into
        x[:m], with the TF32 copy and rounded-up norms that __init__ makes for resident points."""
        import cupy

        m = raw.shape[0]
        self.n = m
        x = self.x[:m]
        cupy.subtract(raw, shift, out=x)
        self.x_tf32[:m] = bound.to_tf32(x, cupy)
        self.x_norm[:m] = bound.round_up(_norms(x), cupy)
        if m:
            self.norm_max[...] = self.x_norm[:m].max()
        if self._hopper is not None:
            if self._hopper.half:  # this chunk's sigma, from its rows' norms and the centroids' (so that
                # both fit), kept where its powers are normal floats
                reach = max(float(self.norm_max[0]), float(self.bound_max[0]))
                self.sigma = min(max(fp16_scale(reach), 2.0 ** -hopper_pass.HALF_SCALE_LOG2),
                                 2.0 ** hopper_pass.HALF_SCALE_LOG2)
            self._hopper.load_rows(self, m)

    def iterate(self, track: bool, combine=None) -> None:
        self.assign()
        self.update(track, combine)


def _norms(rows):
    import cupy

    wide = rows.astype(cupy.float64)
    return cupy.sqrt((wide * wide).sum(axis=1))


def _chunked_rows(x, per_chunk, dtype):
    """per_chunk applied to a chunk of rows at a time (bounded temporaries at any n)."""
    import cupy

    out = None
    step = max(1, (1 << 24) // max(1, x.shape[1]))
    for first in range(0, x.shape[0], step):
        part = per_chunk(x[first:first + step])
        if out is None:
            out = cupy.empty((x.shape[0],) + part.shape[1:], dtype=dtype)
        out[first:first + step] = part
    return out
